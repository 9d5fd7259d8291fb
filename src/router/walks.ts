// The walks that name resolution makes. A host that calls a tool or prompt no list has shown
// yet (a misspelling, a name remembered from an earlier run, a hidden or held tool) makes
// mcpmux read every live upstream's list for it. Those reads are mcpmux's own requests and no
// rate limit counts them; what keeps them bounded instead:
// - at most one walk per upstream and list at a time: every call that needs it waits on it;
// - a finished walk (its failure too) is remembered until that list changes (list_changed, a
//   restart, a reload, a change in what is shown) or for WALK_MEMORY_MS: until then a name not
//   in the index is not there, and calls of unknown names ask the upstream nothing;
// - each walk is bounded in pages and items (upstream/paging.ts), and ends when every call
//   waiting on it has been cancelled.

import { Canceller, type CancelSignal } from '../jsonrpc/cancel.js';
import { RpcError, ErrorCode } from '../jsonrpc/message.js';
import { cancelledError } from '../jsonrpc/cancel.js';
import { ListTooLong } from '../upstream/paging.js';
import type { Upstream } from '../upstream/upstream.js';
import { offering, type Catalogue, type ListKind } from './catalogue.js';

/** How long a walk's outcome stands for an upstream whose list has not said it changed. */
export const WALK_MEMORY_MS = 30_000;

/** A list that could not be read to its end, and why. */
export interface WalkFailure {
  server: string;
  error: Error;
}

interface Outcome {
  version: string;
  at: number;
  /** How many names the walk left in the index (fewer later: it dropped some, walk again). */
  names: number;
  error: RpcError | undefined;
}

interface Running {
  done: Promise<Outcome | undefined>;
  stop: Canceller;
  /** Calls waiting on it that have not been cancelled. */
  waiting: number;
}

export class Walks {
  private readonly outcomes = new WeakMap<Upstream, Map<string, Outcome>>();
  private readonly running = new WeakMap<Upstream, Map<string, Running>>();

  constructor(
    private readonly catalogue: Catalogue,
    /** How many names of this list the index holds for a server now. */
    private readonly names: (kind: ListKind, up: Upstream) => number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * Makes sure every upstream of `ups` (that offers the list) has had its list walked lately,
   * walking those that have not, and says which could not be read to the end. Rejects with
   * -32800 when `signal` fires.
   */
  async ensure(kind: ListKind, ups: readonly Upstream[], signal: CancelSignal): Promise<WalkFailure[]> {
    const offered = offering(kind, ups);
    const outcomes = await Promise.all(offered.map((up) => this.fresh(kind, up) ?? this.join(kind, up, signal)));
    const failures: WalkFailure[] = [];
    outcomes.forEach((o, i) => o?.error && failures.push({ server: offered[i]!.name, error: o.error }));
    return failures;
  }

  /** The remembered outcome, while it still stands. */
  private fresh(kind: ListKind, up: Upstream): Outcome | undefined {
    const o = this.outcomes.get(up)?.get(kind.method);
    if (!o) return undefined;
    if (o.version === this.catalogue.version(kind, up) && this.now() - o.at < WALK_MEMORY_MS && this.names(kind, up) >= o.names) return o;
    this.outcomes.get(up)!.delete(kind.method);
    return undefined;
  }

  /** Waits on the upstream's walk of this list, starting it if none is under way. */
  private join(kind: ListKind, up: Upstream, signal: CancelSignal): Promise<Outcome | undefined> {
    if (signal.aborted) return Promise.reject(cancelledError(signal));
    let byList = this.running.get(up);
    if (!byList) this.running.set(up, (byList = new Map()));
    let run = byList.get(kind.method);
    if (!run) {
      const stop = new Canceller();
      const done = this.walk(kind, up, stop).finally(() => byList.get(kind.method) === run && byList.delete(kind.method));
      byList.set(kind.method, (run = { done, stop, waiting: 0 }));
    }
    const joined = run;
    joined.waiting++;
    return new Promise((resolve, reject) => {
      let left = false;
      const off = signal.onCancel(() => {
        left = true;
        // The last call waiting on it is gone: nobody needs the walk any more, and a call
        // that comes now starts its own rather than join one that is ending.
        if (--joined.waiting === 0) {
          if (byList.get(kind.method) === joined) byList.delete(kind.method);
          joined.stop.cancel(signal.reason ?? 'cancelled');
        }
        reject(cancelledError(signal));
      });
      void joined.done.then((o) => {
        off();
        if (left) return;
        joined.waiting--;
        resolve(o);
      });
    });
  }

  /** One walk; its outcome remembered unless it was stopped (nobody wanted it any more). */
  private async walk(kind: ListKind, up: Upstream, stop: Canceller): Promise<Outcome | undefined> {
    const version = this.catalogue.version(kind, up);
    let error: RpcError | undefined;
    try {
      await this.catalogue.walk(kind, up, stop);
    } catch (err) {
      if (stop.aborted) return undefined;
      error = err instanceof ListTooLong ? err : new RpcError(ErrorCode.InternalError, `server "${up.name}": its ${kind.method} failed: ${(err as Error).message}`);
      up.log.warn({ err: error.message, method: kind.method }, 'a list could not be read to its end; names it may hold are not found');
    }
    const outcome: Outcome = { version, at: this.now(), names: this.names(kind, up), error };
    let byList = this.outcomes.get(up);
    if (!byList) this.outcomes.set(up, (byList = new Map()));
    byList.set(kind.method, outcome);
    return outcome;
  }
}
