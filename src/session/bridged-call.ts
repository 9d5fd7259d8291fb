// One call of a 2026-07-28 host that a legacy upstream may interrupt with questions (sampling,
// elicitation, roots): the upstream asks mcpmux a server-initiated request and waits; the
// modern host can only be asked through an `input_required` answer and its retry. A
// BridgedCall holds both ends: the upstream call still in flight, and the questions it is
// waiting on, until the host's retry brings the answers.
//
// Between rounds the call runs on upstream, but the host request it served has been answered:
// the call's progress and log messages go with the host request waiting on it now (the one
// that started it, then each retry that resumes it: the retry's id, its progressToken, its
// log level, its stream), and go nowhere while it waits for the next retry.

import type { CancelSignal } from '../jsonrpc/cancel.js';
import { ErrorCode, RpcError, type JsonRpcId } from '../jsonrpc/message.js';
import type { Result } from '../jsonrpc/endpoint.js';
import { endWaiting, type RequestEvent } from '../observe/events.js';
import { logLevelRank, type LogLevel, type Params } from '../protocol/mcp.js';

export interface Ask {
  key: string;
  method: string;
  params: Params;
  resolve(result: Result): void;
  reject(err: Error): void;
}

export type Step = { done: true; result: Result } | { done: false; asks: Ask[] };

/** A host request waiting on a call: where the call's progress and log messages go. */
export interface Waiter {
  /** The host's id for it. */
  id: JsonRpcId;
  /** Its `_meta.progressToken`; none: it wants no progress. */
  progressToken: string | number | undefined;
  /** Its `_meta` log level; none: it wants no log messages. */
  logLevel: LogLevel | undefined;
  /** Sends a notification tied to it (on its connection; over HTTP, on its own response). */
  send(method: string, params: Params, related: JsonRpcId): void;
}

export class BridgedCall {
  /** Questions asked and not yet put to the host (they go out with the next input_required). */
  private fresh: Ask[] = [];
  /** Questions put to the host, waiting for its retry. */
  private open = new Map<string, Ask>();
  private wake: (() => void) | undefined;
  private seq = 0;
  private settled: { result: Result } | { error: unknown } | undefined;
  /** The host request waiting on the call now; none while it waits for the host's retry. */
  private waiter: Waiter | undefined;
  /** The call's record for observers (events.ts), when someone observes: one record for all its rounds. */
  record: RequestEvent | undefined;
  /** The upstream server (config name) the call went to, once the router has sent it on. */
  server: string | undefined;

  /** `cancel`: ends the upstream call (the host gave up on it). */
  constructor(
    readonly outcome: Promise<Result>,
    readonly cancel: (why: string) => void,
  ) {
    const settle = (v: { result: Result } | { error: unknown }): void => {
      this.settled = v;
      // A question asked as the call ended will never be put to the host: it fails upstream
      // now instead of holding one of the upstream's request slots for good.
      this.reject(this.fresh, 'the call it belonged to has ended');
      this.fresh = [];
      this.wake?.();
    };
    outcome.then(
      (result) => settle({ result }),
      (error: unknown) => settle({ error }),
    );
  }

  get finished(): boolean {
    return this.settled !== undefined;
  }

  /** `w` waits on the call now (it started it, or resumes it); returns the release for when it is answered. */
  attach(w: Waiter): () => void {
    this.waiter = w;
    return () => {
      if (this.waiter === w) this.waiter = undefined;
    };
  }

  /**
   * A progress or log notification of the upstream call, to the host request waiting on it now:
   * progress under that request's own token (it asked for none: none), a log message from the
   * level it asked for. With no request waiting (between rounds) it has nowhere to go: the
   * request it came with was answered, and a host drops what relates to a finished request.
   */
  relay(method: string, params: Params): void {
    const w = this.waiter;
    if (!w) return;
    if (method === 'notifications/progress') {
      if (w.progressToken !== undefined) w.send(method, { ...params, progressToken: w.progressToken }, w.id);
    } else if (method === 'notifications/message') {
      if (w.logLevel !== undefined && logLevelRank(params.level) >= logLevelRank(w.logLevel)) w.send(method, params, w.id);
    }
  }

  /** The upstream asks: answered when the host's retry brings the answer; `signal`: the upstream gave up asking. */
  ask(method: string, params: Params, signal?: CancelSignal): Promise<Result> {
    if (this.settled) return Promise.reject(new RpcError(ErrorCode.InternalError, 'the call it belongs to has ended'));
    return new Promise((resolve, reject) => {
      const a: Ask = { key: `q${++this.seq}`, method, params, resolve, reject };
      this.fresh.push(a);
      signal?.onCancel(() => {
        this.fresh = this.fresh.filter((x) => x !== a);
        this.open.delete(a.key);
        reject(new RpcError(ErrorCode.InternalError, signal.reason ?? 'cancelled by the server'));
      });
      this.wake?.();
    });
  }

  /**
   * Waits for the call's end, or for questions. Questions arriving together (an upstream that
   * asks two things at once) go out together: after the first, one more turn of the event loop.
   */
  async next(): Promise<Step> {
    for (;;) {
      if (this.settled) {
        if ('error' in this.settled) throw this.settled.error;
        return { done: true, result: this.settled.result };
      }
      if (this.fresh.length > 0) {
        await new Promise((r) => setImmediate(r));
        const asks = this.fresh;
        this.fresh = [];
        for (const a of asks) this.open.set(a.key, a);
        return { done: false, asks };
      }
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
  }

  /** The host's retry: each open question gets its answer; one left unanswered fails upstream. */
  answer(responses: Params): void {
    for (const [key, a] of this.open) {
      const r = responses[key];
      if (r !== null && typeof r === 'object' && !Array.isArray(r)) a.resolve(r as Result);
      else a.reject(new RpcError(ErrorCode.InternalError, `The host gave no answer to ${a.method}`));
    }
    this.open.clear();
  }

  /**
   * Nobody will answer (the host never came back, or went): every question fails upstream, and
   * the call itself is given up (cancelled upstream), so it cannot ask again into the void.
   * `outcome`: how its record ends (`timeout`: the host did not come back in time).
   */
  abandon(why: string, outcome: 'cancelled' | 'timeout' = 'cancelled'): void {
    this.reject([...this.open.values(), ...this.fresh], why);
    this.open.clear();
    this.fresh = [];
    if (!this.settled) this.cancel(why);
    // Its record ends here if it was waiting for a retry that will not come.
    if (this.record) endWaiting(this.record, outcome);
  }

  private reject(asks: Ask[], why: string): void {
    for (const a of asks) a.reject(new RpcError(ErrorCode.InternalError, why));
  }
}
