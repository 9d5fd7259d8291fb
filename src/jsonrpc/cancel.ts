// Cancellation of requests in flight. A minimal stand-in for AbortSignal: Node's AbortSignal is
// an EventTarget, and making one per request (plus add/removeEventListener) cost over a tenth of
// mcpmux's CPU under load. This carries exactly what the data path needs.

import { RpcError } from './message.js';

export interface CancelSignal {
  readonly aborted: boolean;
  readonly reason: string | undefined;
  /** Calls `fn` once on cancellation (at once if already cancelled); returns an unsubscribe. */
  onCancel(fn: () => void): () => void;
}

const noop = (): void => {};

export class Canceller implements CancelSignal {
  aborted = false;
  reason: string | undefined;
  private fns: (() => void)[] | undefined;

  onCancel(fn: () => void): () => void {
    if (this.aborted) {
      fn();
      return noop;
    }
    (this.fns ??= []).push(fn);
    return () => {
      const i = this.fns?.indexOf(fn) ?? -1;
      if (i >= 0) this.fns!.splice(i, 1);
    };
  }

  cancel(reason: string): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const fns = this.fns;
    this.fns = undefined;
    if (fns) for (const fn of fns) fn();
  }
}

/** A signal that never fires, for internal requests nobody can cancel. */
export const NEVER: CancelSignal = { aborted: false, reason: undefined, onCancel: () => noop };

/** What a request that `signal` cancelled rejects with: -32800, the code MCP (and LSP) use. */
export function cancelledError(signal: CancelSignal): RpcError {
  return new RpcError(-32800, `Request cancelled: ${signal.reason ?? 'cancelled'}`);
}
