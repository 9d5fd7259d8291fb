// Streamable HTTP client transport (MCP 2025-11-25): every message we send is its own POST; the
// answer to a request comes back as one JSON body or as an SSE stream that may also carry the
// server's requests and notifications about that request; a GET stream carries what the server
// says unprompted. What it shares with the legacy SSE client lives beside it: fetch.ts,
// sse-reader.ts, remote-messages.ts; the 2026-07-28 headers in modern-headers.ts.

import type { EventSourceMessage } from 'eventsource-parser';
import { ErrorCode, errorResponse, RpcError, type Incoming, type JsonRpcId, type JsonRpcResponse } from '../jsonrpc/message.js';
import type { Logger } from '../observe/logger.js';
import { cancelProtocol, MuxError } from '../protocol/mcp.js';
import { declaredVersion, ModernError } from '../protocol/modern.js';
import { bodyText, describeFetchError, errorExcerpt, excerptOf, fetchSameOrigin, mediaType, readBody, safeUrl } from './fetch.js';
import { modernHeaders } from './modern-headers.js';
import { traceHeaders } from './trace-context.js';
import { requestIdOf, unavailable } from './remote-messages.js';
import { readSse, TooLargeError } from './sse-reader.js';
import { encodeMessage } from '../jsonrpc/framing.js';
import type { FrameError } from '../transport/transport.js';
import type { RemoteTransport } from './connect.js';
import { parseJson } from '../jsonrpc/big-numbers.js';
import { backoffDelay } from '../backoff.js';
import { bearerChallenge } from './oauth/challenge.js';

const JSON_TYPE = 'application/json';
const SSE_TYPE = 'text/event-stream';
/** Statuses that, on our first POST, mean "not a Streamable HTTP server" (spec: backwards compatibility). */
const LEGACY_PROBE_STATUSES = new Set([400, 404, 405]);
/** Dropped SSE streams: reconnect delay when the server sent no `retry`, growth, cap, attempts. */
const RETRY_DEFAULT_MS = 1000;
const RETRY_GROWTH = 1.5;
const RETRY_MAX_MS = 30_000;
const MAX_RECONNECTS = 5;
/** How long close() waits for the DELETE that ends the session. */
const DELETE_TIMEOUT_MS = 2000;

/** Where an HTTP upstream's bearer token comes from (oauth/tokens.ts), when it has a login. */
export interface TokenSource {
  readonly server: string;
  /** What a person runs to make this login (`mcpmux login NAME`, with `--client C` for a perClient server's). */
  readonly loginCommand: string;
  /** False when the config sends its own Authorization header: a 401 is then no login matter. */
  readonly usable: boolean;
  /** A machine grant (client_credentials, token_exchange, jwt_bearer): mcpmux gets tokens itself; there is no login to wait for. */
  readonly machine: boolean;
  /** The config's oauth.grant, named in errors. */
  readonly grantName: string;
  /** Throws when the login cannot be read now (a shared store that is down, -31007). */
  header(): Promise<string | undefined>;
  /** `stale`: the Authorization header the server refused. Throws as header() does. */
  refresh(stale?: string): Promise<boolean>;
  /** A 401's challenge, kept for `mcpmux login` (the server may not show it to a bare probe). */
  challenged(header: string): void;
  /** A 403 insufficient_scope: remember the scope the server asks for (the next login asks it); returns it. */
  needScope(challenge: string): Promise<string | undefined>;
  /** The connection is closed: what was kept for its login may go (oauth/tokens.ts release). */
  release?(): void;
}

export interface HttpTransportOptions {
  /** OAuth: the token to send, refreshed on a 401 (once per request). */
  auth?: TokenSource;
  /**
   * Called, instead of failing, when the server refuses our first POST (initialize, no session)
   * with 400/404/405: the caller retries `first` over the legacy HTTP+SSE transport. After the
   * call this transport is inert (closed without onclose).
   */
  onLegacy?: (first: Incoming, why: string) => void;
}

/** One SSE stream we read: a POST's answer (and its resumptions), or the GET stream. */
interface Stream {
  /** The id of the request whose answer the stream carries; undefined for the GET stream. */
  related: JsonRpcId | undefined;
  ctl: AbortController;
  lastEventId: string | undefined;
  reconnects: number;
  lastError: string;
}

export class StreamableHttpTransport implements RemoteTransport {
  onmessage?: (value: unknown, related?: JsonRpcId) => void;
  onframeerror?: (err: FrameError) => void;
  onclose?: (reason: string) => void;
  readonly ready = Promise.resolve();
  expired = false;
  /** The server refused us with a 401 and no token we have works: a login is needed (`mcpmux login`). */
  needsLogin = false;
  /** The Authorization header of the login, sent with every request. */
  private bearer: string | undefined;

  private sessionId: string | undefined;
  /** Negotiated version, sent as MCP-Protocol-Version once known. */
  private protocolVersion: string | undefined;
  private initializeId: JsonRpcId | undefined;
  /** The server's last `retry` field, in ms; it applies to every later reconnect. */
  private serverRetryMs: number | undefined;
  private closed = false;
  private closing: Promise<void> | undefined;
  /** Aborts every POST in flight when we close. */
  private readonly abort = new AbortController();
  /** Ends the DELETE of close() when its bound passes (the earliest any close() asked for). */
  private readonly deleteAbort = new AbortController();
  /** 2026-07-28 requests in flight: aborting one's POST is how it is cancelled. */
  private readonly modernPosts = new Map<JsonRpcId, AbortController>();
  /** SSE streams being read: POST answers by request id, and the GET stream under `undefined`. */
  private readonly streams = new Map<JsonRpcId | undefined, Stream>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly where: string;

  constructor(
    private readonly url: string,
    private readonly headers: Record<string, string>,
    private readonly maxBytes: number,
    private readonly log: Logger,
    private readonly opts: HttpTransportOptions = {},
  ) {
    this.where = safeUrl(url);
  }

  send(msg: Incoming): void {
    if (this.closed) return;
    // Once we cancel a request, its answer stream is of no use: stop reading it.
    const cancelled = cancelledId(msg);
    if (cancelled !== undefined) {
      this.dropStream(cancelled);
      // 2026-07-28: closing the request's own connection is the cancellation; nothing is sent.
      const modern = this.modernPosts.get(cancelled);
      if (modern) return void (modern.abort(), this.modernPosts.delete(cancelled));
    }
    // Serialised here, not in post(): a message that cannot be written must throw to its
    // sender (Endpoint.request), not fail the connection.
    const body = encodeMessage(msg);
    this.post(msg, body).catch((err: Error) => this.fail(`POST ${this.where} failed: ${err.message}`));
  }

  /** `withinMs`: the DELETE that ends the session gets at most that (and never more than DELETE_TIMEOUT_MS). */
  close(withinMs: number = DELETE_TIMEOUT_MS): Promise<void> {
    // A later close with a shorter bound (the host is waiting) shortens a DELETE under way.
    const timer = setTimeout(() => this.deleteAbort.abort(), Math.min(withinMs, DELETE_TIMEOUT_MS));
    timer.unref();
    return (this.closing ??= (async () => {
      const wasOpen = !this.closed;
      this.shutdown();
      if (wasOpen) this.onclose?.('closed');
      // Politely end the session; a 405 (server keeps sessions) or a dead server is fine.
      if (this.sessionId !== undefined && !this.expired) await this.deleteSession();
    })()).finally(() => clearTimeout(timer));
  }

  // ---- sending ---------------------------------------------------------------------------

  private async post(msg: Incoming, body: string, retried = false): Promise<void> {
    const id = requestIdOf(msg);
    // Kept for the GET stream and DELETE too; the 401 below judges this request's own.
    let bearer: string | undefined;
    try {
      bearer = this.opts.auth ? await this.opts.auth.header() : undefined;
    } catch (err) {
      return this.noLogin(id, err);
    }
    this.bearer = bearer;
    const method = Array.isArray(msg) ? undefined : (msg as { method?: unknown }).method;
    if (method === 'initialize' && id !== undefined) this.initializeId = id;
    const hadSession = this.sessionId !== undefined;
    // A 2026-07-28 message says so in its _meta: it goes without a session, with the headers
    // that revision requires, on a connection of its own that cancelling it closes.
    const modern = Array.isArray(msg) ? undefined : declaredVersion((msg as { params?: unknown }).params);
    const headers = this.requestHeaders(`${JSON_TYPE}, ${SSE_TYPE}`, true);
    traceHeaders(headers, msg);
    let signal = this.abort.signal;
    if (modern !== undefined) {
      modernHeaders(headers, modern, msg as { method?: unknown; params?: Record<string, unknown> });
      if (id !== undefined) {
        const own = new AbortController();
        this.modernPosts.set(id, own);
        signal = AbortSignal.any([this.abort.signal, own.signal]);
      }
    }
    let res: Response;
    try {
      res = await fetchSameOrigin(this.url, { method: 'POST', headers, body, signal });
    } catch (err) {
      // A modern request we cancelled: its connection was closed on purpose.
      if (modern !== undefined && signal.aborted && !this.abort.signal.aborted) return;
      // Unreachable server: the whole connection is down, not just this message.
      if (!this.closed) this.fail(`cannot reach ${this.where}: ${describeFetchError(err)}`);
      return;
    }
    if (this.closed) return void res.body?.cancel().catch(() => {});
    if (method === 'initialize') this.sessionId = res.headers.get('mcp-session-id') ?? undefined;

    // A 401 that a login can answer: a Bearer challenge, and no static Authorization configured
    // (a server refusing an admin's API key is an error like any other, retried with backoff).
    const challenge = res.status === 401 || res.status === 403 ? res.headers.get('www-authenticate') : null;
    const bearerParams = bearerChallenge(challenge);
    if (res.status === 401 && this.opts.auth?.usable && bearerParams) {
      await res.body?.cancel().catch(() => {});
      // Once per request: a fresh token, then the same message again.
      if (!retried && bearer !== undefined) {
        let fresh: boolean;
        try {
          fresh = await this.opts.auth.refresh(bearer);
        } catch (err) {
          return this.noLogin(id, err);
        }
        if (fresh) return this.post(msg, body, true);
      }
      // Kept for `mcpmux login`: the challenge says where to log in.
      this.opts.auth.challenged(challenge!);
      // A machine grant has no login to wait for: an error, retried with backoff.
      if (this.opts.auth.machine) return this.fail(`the server refused the token of the ${this.opts.auth.grantName} grant (401)`);
      this.needsLogin = true;
      return this.fail(`needs a login: the server answered 401${bearer === undefined ? ' and there is no stored login' : ' and the stored login no longer works'}`);
    }
    if (res.status === 403 && this.opts.auth && bearerParams?.error === 'insufficient_scope') {
      // Step-up: this request needs more than the login granted. A person decides (a login
      // with the wider scope, which mcpmux remembers to ask for); this request fails saying so.
      await res.body?.cancel().catch(() => {});
      const scope = await this.opts.auth.needScope(challenge!);
      // The error's data names the scope: in mcpmux stdio, the Upstream opens that login itself and retries once.
      if (id !== undefined) this.deliver(errorResponse(id, { code: MuxError.UpstreamUnavailable, message: `the server needs more access for this${scope ? ` (scope "${scope}")` : ''}: run ${this.opts.auth.loginCommand}`, data: { scopeNeeded: scope ?? '' } }), id);
      return;
    }
    if (!res.ok) return this.refused(res, msg, id, hadSession);
    if (id === undefined || res.status === 202) {
      await res.body?.cancel().catch(() => {});
      if (method === 'notifications/initialized') this.openGetStream();
      return;
    }
    const type = mediaType(res);
    if (type === SSE_TYPE) {
      this.consume(res, this.newStream(id));
    } else if (type === JSON_TYPE) {
      let body: Awaited<ReturnType<typeof readBody>>;
      try {
        body = await readBody(res, this.maxBytes);
      } catch (err) {
        return this.deliver(unavailable(id, `upstream answer broke off: ${describeFetchError(err)}`), id);
      }
      if ('tooLarge' in body) return this.deliver(tooLargeResponse(id, body.tooLarge, this.maxBytes), id);
      const parsed = this.parse(body.text, id);
      if (parsed) this.deliver(parsed.value, id);
    } else {
      await res.body?.cancel().catch(() => {});
      this.deliver(unavailable(id, `upstream answered with unexpected content type ${JSON.stringify(res.headers.get('content-type'))}`), id);
    }
  }

  /**
   * The login could not be read or refreshed now (a shared store that is down): this request
   * fails saying why; the connection stays, and the next request tries again.
   */
  private noLogin(id: JsonRpcId | undefined, err: unknown): void {
    const e = err instanceof RpcError ? err : new RpcError(MuxError.UpstreamUnavailable, `cannot use the login: ${(err as Error).message}`);
    if (id !== undefined) this.deliver(errorResponse(id, { code: e.code, message: e.message }), id);
    else this.log.warn({ url: this.where, err: e.message }, 'a notification to the upstream was dropped: its login cannot be used now');
  }

  /** A POST got a non-2xx answer. */
  private async refused(res: Response, msg: Incoming, id: JsonRpcId | undefined, hadSession: boolean): Promise<void> {
    const text = await bodyText(res);
    // A 2026-07-28 server answers with the revision's own errors in 400/404 bodies (an unknown
    // version, a header mismatch, a missing capability, an unknown method): that error is the
    // request's answer, and it tells a dual-era client that the server is modern.
    const answer = id === undefined ? undefined : jsonRpcError(text, id);
    if (answer && (MODERN_CODES.has(answer.error.code) || declaredVersion((msg as { params?: unknown }).params) !== undefined)) return this.deliver(answer, id);
    const detail = excerptOf(text);
    if (res.status === 404 && hadSession) return this.sessionGone();
    const first = !hadSession && id !== undefined && id === this.initializeId;
    if (first && LEGACY_PROBE_STATUSES.has(res.status) && this.opts.onLegacy) {
      this.log.info({ url: this.where, status: res.status }, 'not a Streamable HTTP server; trying the legacy HTTP+SSE transport');
      this.shutdown();
      this.opts.onLegacy(msg, `POST ${this.where}: HTTP ${res.status}`);
      return;
    }
    const message = `upstream HTTP ${res.status}: ${detail || res.statusText || 'no details'}`;
    // The pending request fails now instead of waiting for its timeout.
    if (id !== undefined) this.deliver(unavailable(id, message), id);
    else this.log.warn({ status: res.status, detail }, 'upstream refused a notification or response');
  }

  /** The server ended our session: the Upstream re-initializes at once (see Connection.expired). */
  private sessionGone(): void {
    if (this.closed) return;
    this.expired = true;
    this.log.info({ url: this.where }, 'upstream session expired (HTTP 404)');
    this.fail('upstream session expired (HTTP 404)');
  }

  private async deleteSession(): Promise<void> {
    try {
      const res = await fetchSameOrigin(this.url, {
        method: 'DELETE',
        headers: this.requestHeaders(`${JSON_TYPE}, ${SSE_TYPE}`, false),
        signal: this.deleteAbort.signal,
      });
      await res.body?.cancel().catch(() => {});
      this.log.debug({ status: res.status }, 'upstream session deleted');
    } catch (err) {
      this.log.debug({ err: describeFetchError(err) }, 'DELETE of the upstream session failed');
    }
  }

  /** Config headers first, so ours (Accept, session, version) cannot be overridden by accident. */
  private requestHeaders(accept: string, json: boolean): Headers {
    const h = new Headers(this.headers);
    h.set('accept', accept);
    if (json) h.set('content-type', JSON_TYPE);
    if (this.sessionId !== undefined) h.set('mcp-session-id', this.sessionId);
    if (this.protocolVersion !== undefined) h.set('mcp-protocol-version', this.protocolVersion);
    if (this.bearer !== undefined) h.set('authorization', this.bearer);
    return h;
  }

  // ---- receiving -------------------------------------------------------------------------

  /** Parses one JSON payload; a bad one fails the related request, or is reported upstream. */
  private parse(text: string, related: JsonRpcId | undefined): { value: unknown } | undefined {
    try {
      return { value: parseJson(text) };
    } catch (e) {
      const detail = (e as Error).message;
      if (related !== undefined) this.deliver(unavailable(related, `upstream sent invalid JSON: ${detail}`), related);
      else this.onframeerror?.({ ok: false, error: 'parse', detail });
      return undefined;
    }
  }

  private deliver(value: unknown, related: JsonRpcId | undefined): void {
    if (this.closed) return;
    // Answered: a modern request has nothing left to cancel.
    if (related !== undefined && this.modernPosts.size > 0 && answers(value, related)) this.modernPosts.delete(related);
    // The transport must send MCP-Protocol-Version but does not negotiate: it reads the version
    // from the initialize answer as it passes, before the Upstream can send anything else.
    if (this.protocolVersion === undefined && this.initializeId !== undefined) {
      const m = value as { id?: unknown; result?: { protocolVersion?: unknown } } | null;
      if (m?.id === this.initializeId && typeof m.result?.protocolVersion === 'string') this.protocolVersion = m.result.protocolVersion;
    }
    this.onmessage?.(value, related);
  }

  private newStream(related: JsonRpcId | undefined): Stream {
    this.streams.get(related)?.ctl.abort();
    const s: Stream = { related, ctl: new AbortController(), lastEventId: undefined, reconnects: 0, lastError: '' };
    this.streams.set(related, s);
    return s;
  }

  private dropStream(related: JsonRpcId): void {
    this.streams.get(related)?.ctl.abort();
    this.streams.delete(related);
  }

  private openGetStream(): void {
    void this.get(this.newStream(undefined));
  }

  /** Reads one SSE response; when it ends early, resumes it (GET + Last-Event-ID). */
  private consume(res: Response, s: Stream): void {
    void readSse(res.body, this.maxBytes, s.ctl.signal, {
      event: (ev) => this.onEvent(ev, s),
      retry: (ms) => (this.serverRetryMs = ms),
    }).then(
      () => this.ended(s, 'the server closed the stream'),
      (err: Error) => {
        if (err instanceof TooLargeError) return this.tooLarge(s, err.bytes);
        this.ended(s, `stream broke: ${describeFetchError(err)}`);
      },
    );
  }

  private onEvent(ev: EventSourceMessage, s: Stream): void {
    if (ev.id) s.lastEventId = ev.id;
    if (ev.id || ev.data) s.reconnects = 0; // the stream makes progress
    // No data: a priming event or keep-alive. Other event types are not MCP messages.
    if (!ev.data || (ev.event !== undefined && ev.event !== 'message')) return;
    const parsed = this.parse(ev.data, s.related);
    if (!parsed) return;
    const done = s.related !== undefined && answers(parsed.value, s.related);
    this.deliver(parsed.value, s.related);
    if (done) {
      // Answered: nothing more belongs on this stream (a resumed one may otherwise stay open).
      s.ctl.abort();
      this.forget(s);
    }
  }

  private tooLarge(s: Stream, bytes: number): void {
    if (this.closed || s.ctl.signal.aborted) return;
    // Every message on a POST stream belongs to its request: failing that request is exact.
    if (s.related !== undefined) {
      this.forget(s);
      return this.deliver(tooLargeResponse(s.related, bytes, this.maxBytes), s.related);
    }
    this.onframeerror?.({ ok: false, error: 'too-large', bytes, head: '', tail: '' });
    this.reconnect(s); // the GET stream is still wanted; resume after the oversized event
  }

  private ended(s: Stream, why: string): void {
    if (this.closed || s.ctl.signal.aborted) return;
    s.lastError = why;
    // A POST stream without an event id cannot be resumed: its answer will never come.
    if (s.related !== undefined && s.lastEventId === undefined) return this.giveUp(s);
    this.reconnect(s);
  }

  private reconnect(s: Stream): void {
    if (s.reconnects >= MAX_RECONNECTS) return this.giveUp(s);
    const delay = this.serverRetryMs ?? backoffDelay(s.reconnects, { baseMs: RETRY_DEFAULT_MS, factor: RETRY_GROWTH, maxMs: RETRY_MAX_MS });
    s.reconnects++;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      void this.get(s);
    }, delay);
    this.timers.add(timer);
  }

  private giveUp(s: Stream): void {
    this.forget(s);
    if (s.related !== undefined) {
      this.deliver(unavailable(s.related, `upstream response stream lost before the answer (${s.lastError})`), s.related);
    } else {
      this.log.warn({ why: s.lastError }, 'lost the stream of server-initiated messages');
    }
  }

  private forget(s: Stream): void {
    if (this.streams.get(s.related) === s) this.streams.delete(s.related);
  }

  /** GET: opens the server's own stream, or resumes `s` after its last event id. */
  private async get(s: Stream): Promise<void> {
    if (this.closed || s.ctl.signal.aborted) return;
    const headers = this.requestHeaders(SSE_TYPE, false);
    if (s.lastEventId !== undefined) headers.set('last-event-id', s.lastEventId);
    let res: Response;
    try {
      res = await fetchSameOrigin(this.url, { method: 'GET', headers, signal: s.ctl.signal });
    } catch (err) {
      if (this.closed || s.ctl.signal.aborted) return;
      s.lastError = describeFetchError(err);
      return this.reconnect(s);
    }
    if (res.status === 404 && this.sessionId !== undefined) {
      await res.body?.cancel().catch(() => {});
      return this.sessionGone();
    }
    if (res.status === 405 && s.related === undefined && s.lastEventId === undefined) {
      // The server offers no stream of its own: fine.
      await res.body?.cancel().catch(() => {});
      return this.forget(s);
    }
    if (!res.ok || mediaType(res) !== SSE_TYPE) {
      s.lastError = res.ok ? `unexpected content type ${res.headers.get('content-type')}` : `HTTP ${res.status}: ${await errorExcerpt(res)}`;
      if (res.ok) await res.body?.cancel().catch(() => {});
      return this.reconnect(s);
    }
    this.consume(res, s);
  }

  // ---- lifecycle -------------------------------------------------------------------------

  private fail(reason: string): void {
    if (this.closed) return;
    this.shutdown();
    this.onclose?.(reason);
  }

  private shutdown(): void {
    this.closed = true;
    this.opts.auth?.release?.();
    this.abort.abort();
    for (const s of this.streams.values()) s.ctl.abort();
    this.streams.clear();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}

// ---- helpers ------------------------------------------------------------------------------

/** The JSON-RPC error response in `text` for request `id` (an id-less one is taken as it), or undefined. */
function jsonRpcError(text: string, id: JsonRpcId): { jsonrpc: '2.0'; id: JsonRpcId; error: { code: number; message: string; data?: unknown } } | undefined {
  try {
    const v = parseJson(text) as { id?: unknown; error?: { code?: unknown; message?: unknown; data?: unknown } };
    const e = v?.error;
    if (!e || typeof e.code !== 'number' || (v.id !== undefined && v.id !== null && v.id !== id)) return undefined;
    return { jsonrpc: '2.0', id, error: { code: e.code, message: typeof e.message === 'string' ? e.message : 'error', ...(e.data !== undefined && { data: e.data }) } };
  } catch {
    return undefined;
  }
}

/** The 2026-07-28 error codes (and -32601 with them): a body carrying one is a modern server's answer. */
const MODERN_CODES: ReadonlySet<number> = new Set([ModernError.HeaderMismatch, ModernError.MissingRequiredClientCapability, ModernError.UnsupportedProtocolVersion]);

function tooLargeResponse(id: JsonRpcId, bytes: number, max: number): JsonRpcResponse {
  return errorResponse(id, { code: ErrorCode.InternalError, message: `Response too large: upstream message of ${bytes} bytes exceeds the limit of ${max}` });
}

function cancelledId(msg: Incoming): JsonRpcId | undefined {
  const m = msg as { method?: unknown; params?: Record<string, unknown> };
  return m.method === cancelProtocol.method ? cancelProtocol.requestId(m.params) : undefined;
}

/** Whether a message (or batch) carries the response to request `id`. */
function answers(value: unknown, id: JsonRpcId): boolean {
  const list = (Array.isArray(value) ? value : [value]) as { id?: unknown; method?: unknown }[];
  return list.some((m) => m !== null && typeof m === 'object' && m.id === id && m.method === undefined);
}
