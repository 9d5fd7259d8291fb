// Legacy HTTP+SSE client transport (MCP 2024-11-05): one long GET stream carries everything the
// server says; its first event, `endpoint`, names the URL we POST our messages to. The session
// lives exactly as long as that stream, so there is nothing to resume: when it ends, the
// connection is gone and the Upstream reconnects.

import type { EventSourceMessage } from 'eventsource-parser';
import type { Incoming, JsonRpcId } from '../jsonrpc/message.js';
import type { Logger } from '../observe/logger.js';
import { encodeMessage } from '../jsonrpc/framing.js';
import type { FrameError } from '../transport/transport.js';
import type { RemoteTransport } from './connect.js';
import { describeFetchError, errorExcerpt, fetchSameOrigin, mediaType, safeUrl } from './fetch.js';
import { requestIdOf, unavailable } from './remote-messages.js';
import { readSse, TooLargeError } from './sse-reader.js';
import { traceHeaders } from './trace-context.js';
import { parseJson } from '../jsonrpc/big-numbers.js';

export class LegacySseTransport implements RemoteTransport {
  onmessage?: (value: unknown, related?: JsonRpcId) => void;
  onframeerror?: (err: FrameError) => void;
  onclose?: (reason: string) => void;
  /** Resolves once the `endpoint` event has arrived (sends before that are held by the caller). */
  readonly ready: Promise<void>;
  expired = false;

  private endpoint: string | undefined;
  private closed = false;
  private readonly abort = new AbortController();
  private readonly where: string;
  private markReady!: () => void;

  constructor(
    private readonly url: string,
    private readonly headers: Record<string, string>,
    private readonly maxBytes: number,
    private readonly log: Logger,
    /** Set when we got here through the Streamable HTTP probe: what the POST got. */
    private readonly probe?: string,
  ) {
    this.where = safeUrl(url);
    this.ready = new Promise((resolve) => (this.markReady = resolve));
    this.listen().catch((err: Error) => this.fail(`SSE stream ${this.where} failed: ${err.message}`));
  }

  send(msg: Incoming): void {
    if (this.closed || this.endpoint === undefined) return;
    const body = encodeMessage(msg); // here, so that an unwritable message throws to its sender
    this.post(this.endpoint, msg, body).catch((err: Error) => this.fail(`POST to the SSE endpoint failed: ${err.message}`));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.shutdown();
    this.onclose?.('closed');
  }

  private async listen(): Promise<void> {
    let res: Response;
    try {
      res = await fetchSameOrigin(this.url, { method: 'GET', headers: this.requestHeaders('text/event-stream'), signal: this.abort.signal });
    } catch (err) {
      return this.fail(`cannot reach ${this.where}: ${describeFetchError(err)}`);
    }
    if (!res.ok) return this.fail(`GET ${this.where}: upstream HTTP ${res.status}: ${(await errorExcerpt(res)) || res.statusText}`);
    if (mediaType(res) !== 'text/event-stream') {
      await res.body?.cancel().catch(() => {});
      return this.fail(`GET ${this.where} did not open an SSE stream (content type ${res.headers.get('content-type')})`);
    }
    try {
      await readSse(res.body, this.maxBytes, this.abort.signal, { event: (ev) => this.onEvent(ev) });
    } catch (err) {
      const why = err instanceof TooLargeError ? err.message : `stream broke: ${describeFetchError(err)}`;
      return this.fail(`SSE stream ${this.where}: ${why}`);
    }
    this.fail(this.endpoint ? 'the server closed the SSE stream' : 'the SSE stream ended before the endpoint event');
  }

  private onEvent(ev: EventSourceMessage): void {
    if (this.closed) return;
    if (ev.event === 'endpoint') return this.setEndpoint(ev.data.trim());
    if (ev.event !== undefined && ev.event !== 'message') return;
    if (!ev.data) return;
    let value: unknown;
    try {
      value = parseJson(ev.data);
    } catch (e) {
      return this.onframeerror?.({ ok: false, error: 'parse', detail: (e as Error).message });
    }
    // One stream for everything: no message can be tied to a request of ours.
    this.onmessage?.(value);
  }

  /** The POST URL, relative to the SSE URL; another origin is refused (it would receive our headers). */
  private setEndpoint(data: string): void {
    if (this.endpoint !== undefined) return;
    let target: URL;
    try {
      target = new URL(data, this.url);
    } catch {
      return this.fail(`the endpoint event is not a URL: ${JSON.stringify(data.slice(0, 100))}`);
    }
    const origin = new URL(this.url).origin;
    if (target.origin !== origin) return this.fail(`the endpoint event points to another origin (${target.origin}, expected ${origin})`);
    this.endpoint = target.href;
    this.log.debug({ endpoint: safeUrl(target.href) }, 'legacy SSE endpoint received');
    this.markReady();
  }

  private async post(endpoint: string, msg: Incoming, body: string): Promise<void> {
    const id = requestIdOf(msg);
    let res: Response;
    try {
      const headers = this.requestHeaders('application/json, text/event-stream');
      headers.set('content-type', 'application/json');
      traceHeaders(headers, msg);
      res = await fetchSameOrigin(endpoint, { method: 'POST', headers, body, signal: this.abort.signal });
    } catch (err) {
      if (!this.closed) this.fail(`cannot reach ${safeUrl(endpoint)}: ${describeFetchError(err)}`);
      return;
    }
    // Answers come on the SSE stream; the POST's own body is only an acknowledgement.
    if (res.ok) return void (await res.body?.cancel().catch(() => {}));
    const detail = (await errorExcerpt(res)) || res.statusText;
    if (res.status === 404) {
      // The server forgot our session (restarted): reconnect at once, as for Streamable HTTP.
      this.expired = true;
      return this.fail(`upstream session ended (HTTP 404: ${detail})`);
    }
    if (id !== undefined) this.onmessage?.(unavailable(id, `upstream HTTP ${res.status}: ${detail || 'no details'}`));
    else this.log.warn({ status: res.status, detail }, 'upstream refused a notification or response');
  }

  private requestHeaders(accept: string): Headers {
    const h = new Headers(this.headers);
    h.set('accept', accept);
    return h;
  }

  private fail(reason: string): void {
    if (this.closed) return;
    this.shutdown();
    // A probe that finds neither transport should say so, not only why the second try failed.
    const why = this.probe && this.endpoint === undefined ? `not a Streamable HTTP server (${this.probe}), nor a legacy HTTP+SSE one: ${reason}` : reason;
    this.onclose?.(why);
  }

  private shutdown(): void {
    this.closed = true;
    this.abort.abort();
  }
}
