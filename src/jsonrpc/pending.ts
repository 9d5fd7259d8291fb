// The table of requests we sent and still wait for: id -> settle callbacks, a timeout that can
// be reset by progress, and a hard maximum. Ids are ours (a counter per connection), so the
// peer's id space and ours never mix.

import { materialise } from './opaque.js';
import { RpcError, type JsonRpcId, type JsonRpcResponse, isFailure } from './message.js';

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
  onResult: ((result: Record<string, unknown>) => void) | undefined;
  /** Run once when the request settles (unsubscribes its cancellation listener). */
  cleanup: (() => void) | undefined;
  resolve(result: Record<string, unknown>): void;
  reject(err: Error): void;
  onProgress: ((params: Record<string, unknown>) => void) | undefined;
  timeoutMs: number;
  deadline: number;
  timer: NodeJS.Timeout | undefined;
}

export class PendingTable {
  private readonly entries = new Map<JsonRpcId, Entry>();
  private nextId = 1;

  /** Called when a request expires, so the owner can tell the peer (cancel notification). */
  constructor(private readonly onExpire: (id: JsonRpcId, reason: string) => void) {}

  get size(): number {
    return this.entries.size;
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
        onResult: opts.onResult,
        cleanup: undefined,
        resolve,
        reject,
        onProgress: opts.onProgress,
        timeoutMs,
        deadline: maxTotal > 0 ? Date.now() + maxTotal : Infinity,
        timer: undefined,
      };
      this.entries.set(id, entry);
      this.arm(id, entry, timeoutMs > 0 ? timeoutMs : maxTotal);
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
    if (!entry.opaque) materialise(res.result);
    try {
      entry.onResult?.(res.result);
    } finally {
      // Whatever the hook did, the request is answered: its timers are already gone.
      entry.resolve(res.result);
    }
    return true;
  }

  /** Progress for request `id`: restart its idle timer (bounded by the hard maximum) and relay. */
  progress(id: JsonRpcId, params: Record<string, unknown>): boolean {
    const entry = this.entries.get(id);
    if (!entry) return false;
    if (entry.timeoutMs > 0) this.arm(id, entry, entry.timeoutMs);
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
    for (const [id, entry] of this.entries) {
      this.drop(id, entry);
      entry.reject(err);
    }
  }

  private arm(id: JsonRpcId, entry: Entry, ms: number): void {
    if (entry.timer) clearTimeout(entry.timer);
    if (ms <= 0 && entry.deadline === Infinity) return;
    const wait = Math.min(ms > 0 ? ms : Infinity, entry.deadline - Date.now());
    entry.timer = setTimeout(() => this.expire(id), Math.max(0, wait));
    entry.timer.unref?.();
  }

  private expire(id: JsonRpcId): void {
    const entry = this.entries.get(id);
    if (!entry) return;
    const hard = Date.now() >= entry.deadline;
    const reason = hard ? 'maximum total time exceeded' : `no response within ${entry.timeoutMs} ms`;
    this.drop(id, entry);
    if (entry.cancelOnExpire) this.onExpire(id, reason);
    entry.reject(new RpcError(REQUEST_TIMEOUT, `Request timed out: ${reason}`));
  }

  private drop(id: JsonRpcId, entry: Entry): void {
    if (entry.timer) clearTimeout(entry.timer);
    this.entries.delete(id);
    entry.cleanup?.();
  }
}
