// `mcpmux connect [URL]`: a stdio-only host talks to a running daemon. A raw message pump (no
// SDK): each stdin line is POSTed to the daemon's /mcp; JSON answers and SSE events come back
// as stdout lines. The session id from initialize is kept, the GET stream is opened once the
// host's `notifications/initialized` is accepted, and stdin's end DELETEs the session.
//
// When the daemon forgets the session (404, e.g. after a restart) the bridge initializes a new
// one with the host's original initialize request and resends the message, once; the host
// keeps its connection. stdout carries only MCP; logs go to stderr.
//
// Messages are read and written the way the daemon reads and writes them (parseJson /
// parseBytes, encodeChunks), so ids and numbers a double cannot hold pass byte-exact; and the
// daemon's answers are read only as fast as the host reads its stdout (host-output.ts).
//
// `--toolset NAME` is `?toolset=NAME` on the daemon URL. connect has no config to check the name
// against; the daemon does (400, before any session exists), and connect then answers the host's
// request with that message, says it on stderr and exits 1, as `mcpmux stdio --toolset` would.

import { parseJson } from '../jsonrpc/big-numbers.js';
import { LineDecoder, encodeMessage, parseBytes, type Frame } from '../jsonrpc/framing.js';
import { classify, type JsonRpcId } from '../jsonrpc/message.js';
import { logOutput } from '../observe/log-format.js';
import { createLogger, type Logger } from '../observe/logger.js';
import { DEFAULTS } from '../config/types.js';
import { UsageError } from './usage-error.js';
import { TOKEN_ENV } from './status.js';
import { backoffDelay } from '../backoff.js';
import { declaredVersion } from '../protocol/modern.js';
import { modernHeaders } from '../upstream/modern-headers.js';
import { readSse } from '../upstream/sse-reader.js';
import { HostOutput } from './host-output.js';
import { TOOLSET_PARAM, UNKNOWN_TOOLSET_REFUSAL } from '../transport/http/guard.js';

export const DEFAULT_CONNECT_URL = `http://127.0.0.1:${DEFAULTS.port}/mcp`;

export interface ConnectOptions {
  header?: string[];
  /** Appended to the URL as `?toolset=`: the session sees only that toolset's tools. */
  toolset?: string;
  logLevel?: string;
  logFormat?: string;
}

/** Attempts to reconnect a dropped SSE stream (GET or a POST's) before giving up on it. */
const MAX_RESUMES = 5;
const DEFAULT_RETRY_MS = 1000;
/** The longest wait between attempts to reopen the GET stream. */
const MAX_RETRY_MS = 30_000;
const DELETE_TIMEOUT_MS = 2000;
/** After stdin ends, how long answers still streaming in may take before the session is deleted. */
const DRAIN_MS = 1000;

export async function runConnect(url: string | undefined, opts: ConnectOptions): Promise<number> {
  let target = url ?? DEFAULT_CONNECT_URL;
  let parsed: URL;
  try {
    parsed = new URL(target);
  } catch {
    throw new UsageError(`not a URL: ${JSON.stringify(target)}`);
  }
  if (opts.toolset !== undefined) {
    if (opts.toolset === '') throw new UsageError('--toolset needs a toolset name');
    // Replaces a toolset the URL names already: the flag is the more specific of the two.
    parsed.searchParams.set(TOOLSET_PARAM, opts.toolset);
    target = parsed.href;
  }
  const headers: Record<string, string> = {};
  for (const h of opts.header ?? []) {
    const colon = h.indexOf(':');
    if (colon <= 0) throw new UsageError(`--header must look like "Name: value", not ${JSON.stringify(h)}`);
    headers[h.slice(0, colon).trim().toLowerCase()] = h.slice(colon + 1).trim();
  }
  const token = process.env[TOKEN_ENV];
  if (token && headers.authorization === undefined) headers.authorization = `Bearer ${token}`;
  const log = createLogger(opts.logLevel ?? 'warn', token ? [token] : [], logOutput(opts.logFormat));
  const bridge = new Bridge(target, headers, log);
  await bridge.run();
  const code = bridge.failed ? 1 : 0;
  // Idle keep-alive sockets of fetch's pool must not hold the process open after the host left.
  setTimeout(() => process.exit(code), 200).unref();
  return code;
}

type Msg = Record<string, unknown>;

class Bridge {
  private sessionId: string | undefined;
  private protocolVersion: string | undefined;
  /** The host's initialize request, replayed to open a new session after a 404. */
  private initRequest: Msg | undefined;
  private initialized: Msg | undefined;
  private reinit: Promise<boolean> | undefined;
  private closing = false;
  private readonly abort = new AbortController();
  /** POSTs start in stdin order: each waits until the previous one has its response headers. */
  private chain: Promise<unknown> = Promise.resolve();
  private inflight = new Set<Promise<void>>();
  private getOpen = false;
  /** 2026-07-28 requests in flight: aborting one's POST cancels it. */
  private readonly modernPosts = new Map<JsonRpcId, AbortController>();
  /** Requests the host cancelled: no answer is owed for them. */
  private readonly cancelled = new Set<JsonRpcId>();
  private nextOwnId = 0;
  private readonly out: HostOutput;
  /** The bridge cannot work at all (the daemon does not know its --toolset): exit 1. */
  failed = false;

  constructor(
    private readonly url: string,
    private readonly extraHeaders: Record<string, string>,
    private readonly log: Logger,
  ) {
    this.out = new HostOutput(process.stdout, log);
  }

  async run(): Promise<void> {
    const decoder = new LineDecoder(DEFAULTS.maxMessageBytes);
    const onFrame = (f: Frame): void => {
      if (!f.ok) {
        const message = f.error === 'parse' ? `Parse error: ${f.detail}` : `Message of ${f.bytes} bytes exceeds the limit`;
        this.write({ jsonrpc: '2.0', id: null, error: { code: f.error === 'parse' ? -32700 : -32600, message } });
      } else if (f.value !== undefined) {
        const msg = f.value as Msg;
        // 2026-07-28 requests are independent (no session to keep in order), and their answers
        // come whole: each goes at once, or one slow call would hold every later one back.
        if (this.modernMessage(msg)) return this.track(this.forwardModern(msg));
        const sent = this.chain.then(() => this.forward(msg));
        this.chain = sent.catch(() => {});
        this.track(sent);
      }
    };
    process.stdout.on('error', () => this.abort.abort());
    await new Promise<void>((resolve) => {
      process.stdin.on('data', (c: Buffer) => decoder.push(c, onFrame));
      process.stdin.on('end', resolve);
      process.stdin.on('error', () => resolve());
      // The host's way to stop a stdio server after closing stdin; we still end the session.
      process.once('SIGTERM', () => resolve());
      process.once('SIGINT', () => resolve());
      this.abort.signal.addEventListener('abort', () => resolve());
    });
    this.closing = true;
    await this.chain.catch(() => {});
    // Answers already on their way (`echo request | mcpmux connect`) get a moment to arrive.
    await Promise.race([Promise.allSettled([...this.inflight]), delay(DRAIN_MS)]);
    await this.deleteSession();
    this.abort.abort();
  }

  /** A message that declares 2026-07-28 in its _meta (a request, or its cancellation). */
  private modernMessage(msg: Msg): boolean {
    return !Array.isArray(msg) && declaredVersion(msg.params) !== undefined;
  }

  /**
   * A 2026-07-28 message. A request gets a POST of its own, cancelled by aborting it (the
   * revision's cancellation over HTTP); the host's notifications/cancelled does just that.
   */
  private async forwardModern(msg: Msg): Promise<void> {
    if (msg.method === 'notifications/cancelled') {
      const id = (msg.params as Msg | undefined)?.requestId;
      // Aborting its POST is the cancellation (nothing to remember, unlike the legacy path).
      if (typeof id === 'string' || typeof id === 'number') this.modernPosts.get(id)?.abort();
      return;
    }
    const ids = requestIds(msg);
    const own = new AbortController();
    for (const id of ids) this.modernPosts.set(id, own);
    try {
      let res: Response;
      try {
        res = await this.post(msg, AbortSignal.any([this.abort.signal, own.signal]));
      } catch (err) {
        if (own.signal.aborted) return;
        return this.fail(ids, `mcpmux daemon unreachable at ${this.url}: ${causeOf(err)}`);
      }
      if (res.status === 202) return void (await res.body?.cancel());
      if ((res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
        // No resumption in 2026-07-28: the stream is read once, to its end (or our abort).
        await this.consume(res, new Set(ids));
        return;
      }
      await this.out.ready();
      const body = Buffer.from(await res.arrayBuffer());
      if (this.unknownToolset(res.status, body.toString('utf8'), ids)) return;
      // The revision's refusals (400, 404) carry the JSON-RPC error that answers the request.
      if (!res.ok && !body.includes('"jsonrpc"')) return this.fail(ids, `HTTP ${res.status} from ${this.url}: ${body.toString('utf8', 0, 500)}`);
      this.relayJson(body);
    } catch (err) {
      if (!own.signal.aborted) throw err;
    } finally {
      for (const id of ids) this.modernPosts.delete(id);
    }
  }

  /**
   * The daemon's 400 for a toolset it does not define (`--toolset`): every request would get
   * it, so the host's gets it as its answer, stderr says why, and the bridge stops (exit 1).
   */
  private unknownToolset(status: number, body: string, ids: JsonRpcId[], batch?: Msg[]): boolean {
    if (status !== 400) return false;
    let message: unknown;
    try {
      message = (JSON.parse(body) as { error?: { message?: unknown } }).error?.message;
    } catch {
      return false;
    }
    if (typeof message !== 'string' || !message.startsWith(UNKNOWN_TOOLSET_REFUSAL)) return false;
    const why = message.slice(UNKNOWN_TOOLSET_REFUSAL.length);
    this.fail(ids, `--toolset: ${why}`, batch);
    process.stderr.write(`mcpmux: --toolset: ${why} (at ${this.url})\n`);
    this.failed = true;
    this.abort.abort();
    return true;
  }

  private track(p: Promise<void>): void {
    const q = p.catch((err: unknown) => this.log.error({ err: String(err) }, 'bridge failure')).finally(() => this.inflight.delete(q));
    this.inflight.add(q);
  }

  /**
   * Sends one message (or batch) and relays what comes back. Returns once the response
   * headers are in (so the next POST may start); the body is relayed in the background.
   */
  private async forward(msg: Msg, retried = false): Promise<void> {
    const ids = requestIds(msg);
    // A batch is answered with one array, however the daemon sent its responses (SSE: one by one).
    const batch: Msg[] | undefined = Array.isArray(msg) ? [] : undefined;
    if (!Array.isArray(msg) && msg.method === 'initialize') this.initRequest = msg;
    if (!Array.isArray(msg) && msg.method === 'notifications/initialized') this.initialized = msg;
    if (!Array.isArray(msg) && msg.method === 'notifications/cancelled') {
      const id = (msg.params as Msg | undefined)?.requestId;
      if (this.cancelled.size >= 1024) this.cancelled.clear(); // cancels of requests long answered
      if (typeof id === 'string' || typeof id === 'number') this.cancelled.add(id);
    }
    let res: Response;
    try {
      res = await this.post(msg);
    } catch (err) {
      return this.fail(ids, `mcpmux daemon unreachable at ${this.url}: ${causeOf(err)}`, batch);
    }
    const sid = res.headers.get('mcp-session-id');
    if (sid) this.sessionId = sid;
    if (res.status === 404 && this.sessionId && !retried && this.initRequest && msg !== this.initRequest) {
      await res.body?.cancel();
      if (await this.reinitialize()) return this.forward(msg, true);
    }
    if (res.status === 202) {
      await res.body?.cancel();
      if (msg === this.initialized && !this.getOpen) void this.listen();
      return;
    }
    if (!res.ok) {
      const text = await res.text().catch(() => '');
      if (this.unknownToolset(res.status, text, ids, batch)) return;
      return this.fail(ids, `HTTP ${res.status} from ${this.url}: ${text.slice(0, 500)}`, batch);
    }
    const type = res.headers.get('content-type') ?? '';
    if (type.startsWith('text/event-stream')) {
      this.track(this.relayStream(res, new Set(ids), 0, batch));
    } else {
      this.track(this.relayBody(res));
    }
  }

  /** A JSON answer, read once the host has taken what was written before. */
  private async relayBody(res: Response): Promise<void> {
    await this.out.ready();
    this.relayJson(Buffer.from(await res.arrayBuffer()));
  }

  private relayJson(body: Buffer): void {
    if (body.every((b) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09)) return; // an empty body
    const frame = parseBytes(body);
    if (!frame.ok) return this.log.warn({ err: frame.detail }, 'daemon sent a body that is not JSON');
    if (frame.value !== undefined) this.write(frame.value as Msg);
  }

  /**
   * Writes every event of an SSE response. A POST stream that ends before all its responses
   * came is resumed with GET + Last-Event-ID (bounded), after the server's `retry`. The
   * responses to a batch are collected in `batch` and written as one array once all are in.
   */
  private async relayStream(res: Response, waiting: Set<JsonRpcId>, attempt: number, batch?: Msg[]): Promise<void> {
    const sink = batch && ((m: Msg): void => void ('method' in m ? this.write(m) : batch.push(m)));
    const { lastId, retryMs } = await this.consume(res, waiting, sink);
    for (const id of waiting) if (this.cancelled.delete(id)) waiting.delete(id);
    if (waiting.size === 0 || this.closing || this.abort.signal.aborted) return this.writeBatch(batch);
    if (lastId === undefined || attempt >= MAX_RESUMES) {
      return this.fail([...waiting], 'the daemon closed the response stream before answering', batch);
    }
    await delay(retryMs);
    const again = await this.get(lastId).catch(() => undefined);
    if (!again?.ok) return this.fail([...waiting], `could not resume the response stream (HTTP ${again?.status ?? 'error'})`, batch);
    return this.relayStream(again, waiting, attempt + 1, batch);
  }

  /** The standalone GET stream, reconnected with Last-Event-ID while the bridge runs. */
  private async listen(): Promise<void> {
    this.getOpen = true;
    let lastId: string | undefined;
    let failures = 0;
    while (!this.closing && !this.abort.signal.aborted && failures < MAX_RESUMES) {
      let res: Response | undefined;
      try {
        res = await this.get(lastId);
      } catch {
        /* counted below */
      }
      if (res?.status === 405) break; // the server offers no GET stream
      if (!res?.ok) {
        await res?.body?.cancel();
        failures++;
        // 404: the session is gone; the next POST re-initializes, which reopens this stream.
        if (res?.status === 404) break;
        await delay(backoffDelay(failures - 1, { baseMs: DEFAULT_RETRY_MS, maxMs: MAX_RETRY_MS }));
        continue;
      }
      failures = 0;
      const r = await this.consume(res, undefined);
      lastId = r.lastId ?? lastId;
      if (!this.closing) await delay(r.retryMs);
    }
    this.getOpen = false;
  }

  private post(msg: unknown, signal: AbortSignal = this.abort.signal): Promise<Response> {
    const headers = new Headers(this.headers({ 'content-type': 'application/json', accept: 'application/json, text/event-stream' }));
    // A 2026-07-28 host's message goes as that revision wants it: its own headers.
    const version = Array.isArray(msg) ? undefined : declaredVersion((msg as { params?: unknown } | null)?.params);
    if (version !== undefined) modernHeaders(headers, version, msg as { method?: unknown; params?: Record<string, unknown> });
    // encodeMessage, not JSON.stringify: the decoder may have kept long values raw (opaque.ts).
    return fetch(this.url, { method: 'POST', headers, body: encodeMessage(msg), signal });
  }

  private get(lastEventId: string | undefined): Promise<Response> {
    const extra: Record<string, string> = { accept: 'text/event-stream' };
    if (lastEventId !== undefined) extra['last-event-id'] = lastEventId;
    return fetch(this.url, { method: 'GET', headers: this.headers(extra), signal: this.abort.signal });
  }

  /** Reads an SSE body to its end, writing each message; responses are removed from `waiting`. */
  private async consume(
    res: Response,
    waiting: Set<JsonRpcId> | undefined,
    sink: ((m: Msg) => void) | undefined = undefined,
  ): Promise<{ lastId: string | undefined; retryMs: number }> {
    let lastId: string | undefined;
    let retryMs = DEFAULT_RETRY_MS;
    try {
      await readSse(res.body, DEFAULTS.maxMessageBytes, this.abort.signal, {
        event: (ev) => {
          if (ev.id) lastId = ev.id;
          if (!ev.data || (ev.event && ev.event !== 'message')) return;
          let m: Msg;
          try {
            m = parseJson(ev.data) as Msg;
          } catch {
            this.log.warn('daemon sent an SSE event that is not JSON');
            return;
          }
          if (waiting && !('method' in m) && (typeof m.id === 'string' || typeof m.id === 'number')) waiting.delete(m.id);
          if (sink) sink(m);
          else this.write(m);
        },
        retry: (ms) => (retryMs = ms),
        // The next chunk is read only once the host has read this one's messages.
        drained: () => this.out.ready(),
      });
    } catch (err) {
      if (!this.abort.signal.aborted) this.log.debug({ err: String(err) }, 'SSE stream broke');
    }
    return { lastId, retryMs };
  }

  /** A new session from the host's own initialize (the answer is not relayed; the host has one). */
  private reinitialize(): Promise<boolean> {
    this.reinit ??= (async () => {
      this.log.warn('the daemon ended our session; initializing a new one');
      this.sessionId = undefined;
      const init = { ...this.initRequest!, id: `mcpmux-connect-${++this.nextOwnId}` };
      try {
        const res = await this.post(init);
        const sid = res.headers.get('mcp-session-id');
        await (res.headers.get('content-type')?.startsWith('text/event-stream') ? this.consume(res, undefined, () => {}) : res.text()).catch(() => {});
        if (!res.ok || !sid) return false;
        this.sessionId = sid;
        const note = await this.post(this.initialized ?? { jsonrpc: '2.0', method: 'notifications/initialized' });
        await note.body?.cancel();
        if (!this.getOpen) void this.listen();
        return true;
      } catch (err) {
        this.log.error({ err: causeOf(err) }, 're-initialize failed');
        return false;
      } finally {
        this.reinit = undefined;
      }
    })();
    return this.reinit;
  }

  private async deleteSession(): Promise<void> {
    if (!this.sessionId) return;
    try {
      const res = await fetch(this.url, { method: 'DELETE', headers: this.headers({}), signal: AbortSignal.timeout(DELETE_TIMEOUT_MS) });
      await res.body?.cancel();
    } catch (err) {
      this.log.debug({ err: causeOf(err) }, 'DELETE failed');
    }
  }

  private headers(extra: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = { ...this.extraHeaders, ...extra };
    if (this.sessionId) h['mcp-session-id'] = this.sessionId;
    if (this.protocolVersion) h['mcp-protocol-version'] = this.protocolVersion;
    return h;
  }

  /** Error responses for the host's requests that no answer will come for (in `batch`'s array, for a batch). */
  private fail(ids: JsonRpcId[], message: string, batch?: Msg[]): void {
    this.log.warn({ ids }, message);
    const errors = ids.map((id) => ({ jsonrpc: '2.0', id, error: { code: -32000, message } }));
    if (batch) return this.writeBatch(batch.concat(errors));
    for (const e of errors) this.write(e);
  }

  /** A batch's responses as one array (none: nothing, as JSON-RPC wants for a batch of notifications). */
  private writeBatch(batch: Msg[] | undefined): void {
    if (batch && batch.length > 0) this.write(batch);
  }

  private write(m: Msg | Msg[]): void {
    // The negotiated version, for the MCP-Protocol-Version header of later requests.
    if (!Array.isArray(m) && this.initRequest && m.id === this.initRequest.id && !('method' in m)) {
      const v = (m.result as Msg | undefined)?.protocolVersion;
      if (typeof v === 'string') this.protocolVersion = v;
    }
    this.out.write(m);
  }
}

/** Ids of the requests in a message or batch (those that expect an answer). */
function requestIds(msg: unknown): JsonRpcId[] {
  const ids: JsonRpcId[] = [];
  for (const m of Array.isArray(msg) ? msg : [msg]) {
    const c = classify(m);
    if (c.kind === 'request') ids.push(c.msg.id);
  }
  return ids;
}

function causeOf(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  return e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err);
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
