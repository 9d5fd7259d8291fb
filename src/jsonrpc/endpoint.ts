// One side of a JSON-RPC connection: sends requests with our own ids and waits for their
// responses (PendingTable), hands incoming requests and notifications to one handler object, and
// answers them. Cancellation runs through here in both directions; the protocol that names the
// cancel notification is passed in, so this file stays free of MCP knowledge.

import { jsonText } from './big-numbers.js';
import { Canceller, cancelledError, type CancelSignal } from './cancel.js';
import { peekId, wireBytes, type Wire } from './framing.js';
import {
  classify,
  errorResponse,
  ErrorCode,
  RpcError,
  type Incoming,
  type JsonRpcId,
  type JsonRpcMessage,
  type JsonRpcNotification,
  type JsonRpcRequest,
  type JsonRpcResponse,
} from './message.js';
import { materialise } from './opaque.js';
import { PendingTable, type PendingOptions } from './pending.js';
import { IdTable } from './id-table.js';
import type { FrameError, Transport } from '../transport/transport.js';

export type Result = Record<string, unknown>;

/**
 * `related` is, where the transport knows it, the id of one of OUR outgoing requests that the
 * incoming message belongs to (a sampling request sent on the stream of our tools/call).
 */
export interface Handlers {
  /** Answers one incoming request. Throw RpcError for a JSON-RPC error. */
  request(req: JsonRpcRequest, signal: CancelSignal, related: JsonRpcId | undefined, info: IncomingInfo): Promise<Result> | Result;
  notification(n: JsonRpcNotification, related: JsonRpcId | undefined): void;
}

/** How the protocol spells "cancel request N" (MCP: notifications/cancelled {requestId, reason}). */
export interface CancelProtocol {
  method: string;
  params(id: JsonRpcId, reason: string): Record<string, unknown>;
  requestId(params: Record<string, unknown> | undefined): JsonRpcId | undefined;
  /** The peer's reason, if it gave one (passed on to whoever the request was forwarded to). */
  reason?(params: Record<string, unknown> | undefined): string | undefined;
}

export interface EndpointOptions {
  cancel: CancelProtocol;
  /** Names the peer in errors, e.g. `upstream "fs"`. */
  peer?: string;
  /** Incoming requests answered at once with an error beyond this many in flight. */
  maxInFlight?: number;
  /** Whether a batch is acceptable now; a string is the reason it is not. */
  acceptBatch?: () => true | string;
  /**
   * Incoming requests whose params the handler passes on without reading their long string
   * values, which may then stay raw bytes (opaque.ts). Every other message is fully decoded
   * before the handler sees it.
   */
  opaqueRequests?: ReadonlySet<string>;
  /** Diagnostics for things the peer did wrong that have no response to carry them. */
  onProtocolError?: (what: string, detail: unknown) => void;
}

/** What the endpoint knows of one incoming request besides its content (for observers). */
export interface IncomingInfo {
  /** Its size as it arrived (a request in a batch: its share of the batch); 0 if unknown. */
  readonly bytes: number;
  /** It came in a batch (some requests, e.g. MCP's initialize, must not). */
  readonly inBatch?: boolean;
  /**
   * Set by the handler to hear when the answer has been written: the response (undefined when
   * none was sent: a cancelled request) and its size (0 when the transport did not say).
   * Measuring costs something only for requests whose handler set this.
   */
  onAnswered?: AnswerObserver;
}

/** Hears that an answer has been written: the response (undefined: none, a cancelled request) and its size. */
type AnswerObserver = (response: JsonRpcResponse | undefined, bytesOut: number) => void;

export interface RequestOptions extends PendingOptions {
  signal?: CancelSignal;
  /** The peer's request this one belongs to (see Transport.send). */
  related?: JsonRpcId;
}

export const TOO_MANY_IN_FLIGHT = -31003;

export class Endpoint {
  /** Called once when the underlying transport closes. */
  onclose?: (reason: string) => void;

  private readonly pending: PendingTable;
  private readonly incoming = new IdTable<Canceller>();
  private closed = false;
  /**
   * Answers written this turn whose handlers asked to hear of them, told in the next tick
   * (answered()), with their size: a single request's as the Wire written (measured then), a
   * batch entry's as its share of the batch answer in bytes.
   */
  private answers: { told: AnswerObserver; res: JsonRpcResponse | undefined; size: Wire | number }[] = [];

  constructor(
    private readonly transport: Transport,
    private readonly handlers: Handlers,
    private readonly opts: EndpointOptions,
  ) {
    this.pending = new PendingTable((id, reason) => this.sendCancel(id, reason));
    transport.onmessage = (v, related, bytes) => this.receive(v, related, bytes ?? 0);
    transport.onframeerror = (e) => this.frameError(e);
    // Only while one of our requests waits for a result it takes unread (PendingOptions.raw).
    transport.rawResults = () => this.pending.rawWaiting;
    transport.onclose = (reason) => this.shutdown(reason);
  }

  private get peerText(): string {
    return this.opts.peer ? `to ${this.opts.peer} ` : '';
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Reserve an id before building a request (MCP uses it as the progress token). */
  /** Our requests still waiting for the peer's answer. */
  get pendingCount(): number {
    return this.pending.size;
  }

  allocateId(): number {
    return this.pending.allocateId();
  }

  request(id: JsonRpcId, method: string, params: Result | undefined, opts: RequestOptions = {}): Promise<Result> {
    if (this.closed) return Promise.reject(new RpcError(-32000, `Connection ${this.peerText}closed`));
    const { signal } = opts;
    if (signal?.aborted) return Promise.reject(cancelledError(signal));
    const promise = this.pending.add(id, opts);
    try {
      this.transport.send(params === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params }, opts.related);
    } catch (err) {
      // It could not be written (see encodeChunks): the caller gets the error, nothing waits.
      this.pending.fail(id, err instanceof RpcError ? err : new RpcError(ErrorCode.InternalError, String(err)));
      return promise;
    }
    if (signal) {
      // The table calls the unsubscribe when the request settles, however it settles.
      this.pending.onSettle(
        id,
        signal.onCancel(() => {
          if (this.pending.fail(id, cancelledError(signal))) this.sendCancel(id, signal.reason ?? 'cancelled');
        }),
      );
    }
    return promise;
  }

  notify(method: string, params?: Result, related?: JsonRpcId): void {
    if (this.closed) return;
    try {
      this.transport.send(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params }, related);
    } catch (err) {
      this.opts.onProtocolError?.('a notification could not be sent', `${method}: ${String(err)}`);
    }
  }

  /** The context given with an outgoing request still in flight (see PendingOptions.context). */
  contextOf(id: JsonRpcId): unknown {
    return this.pending.contextOf(id);
  }

  /** Routes a progress notification to the request it names; false if no such request. */
  progress(id: JsonRpcId, params: Result): boolean {
    return this.pending.progress(id, params);
  }

  async close(reason = 'closed'): Promise<void> {
    this.shutdown(reason);
    await this.transport.close();
  }

  private shutdown(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.pending.failAll(new RpcError(-32000, `Connection ${this.peerText}closed: ${reason}`));
    for (const [, ctl] of this.incoming.entries()) ctl.cancel('connection closed');
    this.incoming.clear();
    this.onclose?.(reason);
  }

  private sendCancel(id: JsonRpcId, reason: string): void {
    const c = this.opts.cancel;
    this.notify(c.method, c.params(id, reason));
  }

  private receive(value: unknown, related: JsonRpcId | undefined, bytes: number): void {
    if (Array.isArray(value)) {
      this.receiveBatch(value, related, bytes).catch((err: unknown) => this.opts.onProtocolError?.('batch handling failed', err));
      return;
    }
    const info: IncomingInfo = { bytes };
    const out = this.dispatchSafely(value, related, info);
    // answer() never rejects: every failure becomes an error response.
    if (out instanceof Promise) void out.then((res) => this.answered(info, res, res && this.reply(res)));
    else if (out) this.answered(info, out, this.reply(out));
  }

  private async receiveBatch(items: unknown[], related: JsonRpcId | undefined, bytes: number): Promise<void> {
    const verdict = this.opts.acceptBatch?.() ?? true;
    if (items.length === 0 || verdict !== true) {
      const why = items.length === 0 ? 'empty batch' : verdict;
      this.reply(failure(null, ErrorCode.InvalidRequest, `Invalid Request: ${why}`));
      return;
    }
    const infos = items.map((): IncomingInfo => ({ bytes: Math.round(bytes / items.length), inBatch: true }));
    const results = await Promise.all(items.map((item, i) => this.dispatchSafely(item, related, infos[i]!)));
    const responses = results.filter((r): r is JsonRpcResponse => r !== undefined);
    const wire = responses.length > 0 ? this.reply(responses) : undefined;
    // Each request's share of the batch answer, where the transport wrote it as one message.
    const share = wire && infos.some((i) => i.onAnswered) ? Math.round(wireBytes(wire) / responses.length) : 0;
    infos.forEach((info, i) => info.onAnswered && this.tellLater(info.onAnswered, results[i], results[i] === undefined ? 0 : share));
  }

  /**
   * Tells the request's handler, if it asked, that its answer is out (and how big it was), once
   * it is: a transport that batches writes queued its flush with process.nextTick when the
   * answer was sent, and ticks run in order, so what observers do with the answer (the audit
   * line, metrics, a span) comes after the peer has it, not before. On the path of a sequential
   * call that work was mcpmux's largest addition with governance on (issue 23).
   */
  private answered(info: IncomingInfo, res: JsonRpcResponse | undefined, wire: Wire | void | undefined): void {
    // Its size is measured when observers are told, after the write: nothing on the call's path.
    if (info.onAnswered) this.tellLater(info.onAnswered, res, wire || 0);
  }

  /** Queues one answer for its observer, with its size (see `answers`); see answered(). */
  private tellLater(told: AnswerObserver, res: JsonRpcResponse | undefined, size: Wire | number): void {
    // One tick for all the answers of a turn (under load, dozens), not one each.
    if (this.answers.length === 0) process.nextTick(this.tellAnswered);
    this.answers.push({ told, res, size });
  }

  private readonly tellAnswered = (): void => {
    const answers = this.answers;
    this.answers = [];
    for (const { told, res, size } of answers) {
      try {
        told(res, typeof size === 'number' ? size : wireBytes(size));
      } catch (err) {
        // An observer's bug costs its record, not the process (this runs outside any request).
        this.opts.onProtocolError?.('an answer could not be observed', err);
      }
    }
  };

  /**
   * dispatch(), but a bug or a message nobody foresaw costs that message, not the process:
   * a request still gets an answer.
   */
  private dispatchSafely(value: unknown, related: JsonRpcId | undefined, info: IncomingInfo): ReturnType<Endpoint['dispatch']> {
    try {
      return this.dispatch(value, related, info);
    } catch (err) {
      this.opts.onProtocolError?.('message handling failed', err);
      const c = classify(value);
      return c.kind === 'request' ? internalError(c.msg.id, err) : undefined;
    }
  }

  /**
   * Sends our answer(s) and returns what the transport wrote. encodeChunks turns an unwritable
   * response into an error, so the catch is a last guard.
   */
  private reply(res: JsonRpcResponse | JsonRpcResponse[]): Wire | void {
    try {
      return this.transport.send(res as JsonRpcMessage | JsonRpcMessage[], (Array.isArray(res) ? res[0]!.id : res.id) ?? undefined);
    } catch (err) {
      this.opts.onProtocolError?.('response could not be sent', err);
      return undefined;
    }
  }

  /** Handles one message; returns the response to send, if any (a promise for requests). */
  private dispatch(value: unknown, related: JsonRpcId | undefined, info: IncomingInfo): JsonRpcResponse | undefined | Promise<JsonRpcResponse | undefined> {
    const c = classify(value);
    switch (c.kind) {
      case 'response':
        // A late answer to a request we gave up on (cancelled, timed out) is normal: dropped.
        // An answer to an id we never used is the peer's mistake.
        if (!this.pending.settle(c.msg) && !this.pending.issued(c.msg.id)) this.opts.onProtocolError?.('a response to an id never used', c.msg.id);
        return undefined;
      case 'notification':
        if (c.msg.params) materialise(c.msg.params);
        if (c.msg.method === this.opts.cancel.method) {
          const id = this.opts.cancel.requestId(c.msg.params);
          // Invalid or late cancellations are ignored, as the spec asks.
          if (id !== undefined) this.incoming.get(id)?.cancel(this.opts.cancel.reason?.(c.msg.params) ?? 'cancelled by peer');
        }
        this.handlers.notification(c.msg, related);
        return undefined;
      case 'request':
        if (c.msg.params && !this.opts.opaqueRequests?.has(c.msg.method)) materialise(c.msg.params);
        return this.answer(c.msg, related, info);
      case 'invalid':
        this.opts.onProtocolError?.('a message that is not JSON-RPC', c.reason);
        return failure(c.id, ErrorCode.InvalidRequest, `Invalid Request: ${c.reason}`);
      case 'bad-response':
        // Answering it would look like a response to one of the peer's own requests.
        if (c.id === null || !this.pending.fail(c.id, new RpcError(ErrorCode.InternalError, `Malformed response: ${c.reason}`))) {
          this.opts.onProtocolError?.('malformed response', c);
        }
        return undefined;
    }
  }

  private async answer(req: JsonRpcRequest, related: JsonRpcId | undefined, info: IncomingInfo): Promise<JsonRpcResponse | undefined> {
    const { id } = req;
    if (this.incoming.has(id)) {
      return failure(id, ErrorCode.InvalidRequest, `Invalid Request: id ${jsonText(id)} is already in use`);
    }
    const max = this.opts.maxInFlight ?? Infinity;
    if (this.incoming.size >= max) {
      // Said (and, for upstreams, counted) like any other excess of the peer's.
      this.opts.onProtocolError?.('too many requests in flight', req.method);
      return failure(id, TOO_MANY_IN_FLIGHT, `Too many requests in flight (limit ${max})`);
    }
    const ctl = new Canceller();
    this.incoming.set(id, ctl);
    try {
      const result = await this.handlers.request(req, ctl, related, info);
      return ctl.aborted ? undefined : { jsonrpc: '2.0', id, result };
    } catch (err) {
      // A cancelled request gets no response at all.
      if (ctl.aborted) return undefined;
      if (err instanceof RpcError) return { jsonrpc: '2.0', id, error: err.toJSON() };
      this.opts.onProtocolError?.('handler failed', err);
      return internalError(id, err);
    } finally {
      this.incoming.delete(id);
    }
  }

  private frameError(e: FrameError): void {
    this.opts.onProtocolError?.(e.error === 'parse' ? 'a message that is not JSON' : 'a message over the size limit', e.error === 'parse' ? e.detail : e.bytes);
    if (e.error === 'parse') {
      this.reply(failure(null, ErrorCode.ParseError, `Parse error: ${e.detail}`));
      return;
    }
    const message = `Message of ${e.bytes} bytes exceeds the limit`;
    const head = peekId(e.head, e.tail);
    if (head && !head.isRequest && this.pending.fail(head.id, new RpcError(ErrorCode.InternalError, `Response too large: ${message}`))) {
      return;
    }
    this.reply(failure(head?.isRequest ? head.id : null, ErrorCode.InvalidRequest, message, { bytes: e.bytes }));
  }
}

function failure(id: JsonRpcId | null, code: number, message: string, data?: unknown): JsonRpcResponse {
  return errorResponse(id, data === undefined ? { code, message } : { code, message, data });
}

/**
 * Our answer to a request whose handling failed in a way nobody turned into an RpcError: a bug
 * or an unexpected exception, whose text (paths, arguments, a stack) is no business of the
 * peer's. The detail goes to our log (onProtocolError), the peer gets the fact.
 */
function internalError(id: JsonRpcId, _err: unknown): JsonRpcResponse {
  return failure(id, ErrorCode.InternalError, 'Internal error in mcpmux (the details are in its log)');
}

