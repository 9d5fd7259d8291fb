// One call of a 2026-07-28 host that a legacy upstream may interrupt with questions (sampling,
// elicitation, roots): the upstream asks mcpmux a server-initiated request and waits; the
// modern host can only be asked through an `input_required` answer and its retry. A
// BridgedCall holds both ends: the upstream call still in flight, and the questions it is
// waiting on, until the host's retry brings the answers.

import type { CancelSignal } from '../jsonrpc/cancel.js';
import { ErrorCode, RpcError } from '../jsonrpc/message.js';
import type { Result } from '../jsonrpc/endpoint.js';
import type { Params } from '../protocol/mcp.js';

export interface Ask {
  key: string;
  method: string;
  params: Params;
  resolve(result: Result): void;
  reject(err: Error): void;
}

export type Step = { done: true; result: Result } | { done: false; asks: Ask[] };

export class BridgedCall {
  /** Questions asked and not yet put to the host (they go out with the next input_required). */
  private fresh: Ask[] = [];
  /** Questions put to the host, waiting for its retry. */
  private open = new Map<string, Ask>();
  private wake: (() => void) | undefined;
  private seq = 0;
  private settled: { result: Result } | { error: unknown } | undefined;

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
   */
  abandon(why: string): void {
    this.reject([...this.open.values(), ...this.fresh], why);
    this.open.clear();
    this.fresh = [];
    if (!this.settled) this.cancel(why);
  }

  private reject(asks: Ask[], why: string): void {
    for (const a of asks) a.reject(new RpcError(ErrorCode.InternalError, why));
  }
}
