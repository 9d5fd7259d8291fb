// The table of requests we sent and still wait for: id -> settle callbacks, a timeout that can
// be reset by progress, and a hard maximum. Ids are ours (a counter per connection), so the
// peer's id space and ours never mix.

import { materialise } from './opaque.js';
import { ErrorCode, RpcError, type JsonRpcId, type JsonRpcResponse, isFailure } from './message.js';
import { RawResult } from './raw-result.js';
import { IdTable } from './id-table.js';

/** Error code for a request that ran out of time (the SDK uses the same). */
export const REQUEST_TIMEOUT = -32001;

export interface PendingOptions {
  /** Idle timeout; reset by `touch` (progress). 0 = none. */
  timeoutMs?: number;
  /** Hard cap from the start, whatever progress says. 0 = none. */
  maxTotalMs?: number;
  /** Called for each progress notification that names this request's token. */
  onProgress?: (params: Record<string, unknown>) => void;
  /** Anything the owner wants back for messages related to this request (see contextOf). */
  context?: unknown;
  /** False for requests that must never be cancelled (MCP's initialize): expiry only fails them. */
  cancelOnExpire?: boolean;
  /**
   * True when the caller passes the result on without reading its long string values, which
   * may then stay raw bytes (opaque.ts). Otherwise the result is fully decoded before it is
   * handed over.
   */
  opaque?: boolean;
  /**
   * True when the caller passes the result on unread, so that it may arrive as its text
   * (a RawResult, raw-result.ts) unless a key mcpmux reads occurs in it. Otherwise the result
   * is always parsed before it is handed over.
   */
  raw?: boolean;
  /**
   * Called with the result as the response is read, before the promise settles: what must be in
   * place for the messages that came in the same read (a task's progress and status notices
   * follow its CreateTaskResult at once) cannot wait for a promise turn.
   */
  onResult?: (result: Record<string, unknown>) => void;
}

interface Entry {
  context: unknown;
  cancelOnExpire: boolean;
  opaque: boolean;
  raw: boolean;
  onResult: ((result: Record<string, unknown>) => void) | undefined;
  /** Run once when the request settles (unsubscribes its cancellation listener). */
  cleanup: (() => void) | undefined;
  resolve(result: Record<string, unknown>): void;
  reject(err: Error): void;
  onProgress: ((params: Record<string, unknown>) => void) | undefined;
  timeoutMs: number;
  /** The hard deadline (maxTotalMs), or Infinity. */
  deadline: number;
  /** When it expires unless answered or touched: the idle timeout, bounded by the deadline. */
  due: number;
}

/**
 * Expiry uses ONE timer per table, not one per request: setTimeout and clearTimeout for every
 * request (a timer list made and dropped per sequential call, the libuv timer re-armed) were a
 * measurable part of a call's cost. The timer is armed for the earliest `due` it knows of and
 * left alone when requests settle; when it fires it expires what is due and re-arms for the
 * next. A request answered in time therefore costs no timer work at all.
 */
export class PendingTable {
  private readonly entries = new IdTable<Entry>();
  private nextId = 1;
  private timer: NodeJS.Timeout | undefined;
  /** When `timer` fires (Infinity: not armed). */
  private timerAt = Infinity;
  /** Requests waiting that take a raw result (PendingOptions.raw): while any, lines are scanned for one. */
  private rawCount = 0;

  /** Called when a request expires, so the owner can tell the peer (cancel notification). */
  constructor(private readonly onExpire: (id: JsonRpcId, reason: string) => void) {}

  get size(): number {
    return this.entries.size;
  }

  /** Whether a request waiting now takes a raw result (the decoder then tries to keep one). */
  get rawWaiting(): boolean {
    return this.rawCount > 0;
  }

  allocateId(): number {
    return this.nextId++;
  }

  /** Whether `id` is one this table handed out (settled or not). */
  issued(id: JsonRpcId | null): boolean {
    return typeof id === 'number' && Number.isInteger(id) && id >= 1 && id < this.nextId;
  }

  add(id: JsonRpcId, opts: PendingOptions): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const timeoutMs = opts.timeoutMs ?? 0;
      const maxTotal = opts.maxTotalMs ?? 0;
      const entry: Entry = {
        context: opts.context,
        cancelOnExpire: opts.cancelOnExpire ?? true,
        opaque: opts.opaque ?? false,
        raw: opts.raw === true && opts.onResult === undefined,
        onResult: opts.onResult,
        cleanup: undefined,
        resolve,
        reject,
        onProgress: opts.onProgress,
        timeoutMs,
        deadline: Infinity,
        due: Infinity,
      };
      if (timeoutMs > 0 || maxTotal > 0) {
        const now = Date.now();
        if (maxTotal > 0) entry.deadline = now + maxTotal;
        this.arm(entry, timeoutMs, now);
      }
      this.entries.set(id, entry);
      if (entry.raw) this.rawCount++;
    });
  }

  /** Registers something to run when request `id` settles. */
  onSettle(id: JsonRpcId, fn: () => void): void {
    const entry = this.entries.get(id);
    if (entry) entry.cleanup = fn;
    else fn();
  }

  contextOf(id: JsonRpcId): unknown {
    return this.entries.get(id)?.context;
  }

  /** Settles the request a response belongs to. Returns false for unknown (late or foreign) ids. */
  settle(res: JsonRpcResponse): boolean {
    const id = res.id;
    if (id === null) return false;
    const entry = this.entries.get(id);
    if (!entry) return false;
    this.drop(id, entry);
    if (isFailure(res)) {
      entry.reject(RpcError.from(res.error));
      return true;
    }
    let result = res.result;
    if (result instanceof RawResult && (!entry.raw || result.read)) {
      try {
        result = res.result = result.parse();
      } catch (err) {
        // Not expected (the scan accepts only what JSON.parse does), but never a hang.
        entry.reject(new RpcError(ErrorCode.InternalError, `Malformed response: ${(err as Error).message}`));
        return true;
      }
    }
    if (!entry.opaque) materialise(result);
    try {
      entry.onResult?.(result);
    } finally {
      // Whatever the hook did, the request is answered: its timers are already gone.
      entry.resolve(result);
    }
    return true;
  }

  /** Progress for request `id`: restart its idle timer (bounded by the hard maximum) and relay. */
  progress(id: JsonRpcId, params: Record<string, unknown>): boolean {
    const entry = this.entries.get(id);
    if (!entry) return false;
    if (entry.timeoutMs > 0) this.arm(entry, entry.timeoutMs, Date.now());
    entry.onProgress?.(params);
    return true;
  }

  /** Fails one request (aborted by the caller, or its response was unreadable). */
  fail(id: JsonRpcId, err: Error): boolean {
    const entry = this.entries.get(id);
    if (!entry) return false;
    this.drop(id, entry);
    entry.reject(err);
    return true;
  }

  /** Fails everything (the connection is gone). */
  failAll(err: Error): void {
    for (const [id, entry] of this.entries.entries()) {
      this.drop(id, entry);
      entry.reject(err);
    }
    this.disarm();
  }

  /** Sets when `entry` expires: `idleMs` from `now` (0: no idle timeout), never past its deadline. */
  private arm(entry: Entry, idleMs: number, now: number): void {
    entry.due = Math.min(idleMs > 0 ? now + idleMs : Infinity, entry.deadline);
    if (entry.due < this.timerAt) this.schedule(entry.due, now);
  }

  private schedule(at: number, now: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(this.sweep, Math.max(0, at - now));
    this.timer.unref?.();
  }

  private disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  /** The timer fired: expires every request that is due, and re-arms for the earliest left. */
  private readonly sweep = (): void => {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = Date.now();
    let next = Infinity;
    const due: JsonRpcId[] = [];
    for (const [id, entry] of this.entries.entries()) {
      if (entry.due <= now) due.push(id);
      else if (entry.due < next) next = entry.due;
    }
    // Expired after the scan: an expiry's cancel notification may settle or add entries.
    for (const id of due) this.expire(id, now);
    // Whatever expire() armed meanwhile stands if it is earlier.
    if (next < this.timerAt) this.schedule(next, now);
  };

  private expire(id: JsonRpcId, now: number): void {
    const entry = this.entries.get(id);
    if (!entry || entry.due > now) return;
    const hard = now >= entry.deadline;
    const reason = hard ? 'maximum total time exceeded' : `no response within ${entry.timeoutMs} ms`;
    this.drop(id, entry);
    if (entry.cancelOnExpire) this.onExpire(id, reason);
    entry.reject(new RpcError(REQUEST_TIMEOUT, `Request timed out: ${reason}`));
  }

  private drop(id: JsonRpcId, entry: Entry): void {
    this.entries.delete(id);
    if (entry.raw) this.rawCount--;
    entry.cleanup?.();
  }
}
