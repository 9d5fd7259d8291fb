// Issue 23, the per-call path: the table of requests in flight expires them with one timer
// (not one per request), and keeps its first entry out of a Map; both must keep every timeout,
// order and settle rule they had.

import { describe, expect, it } from 'vitest';
import { PendingTable, REQUEST_TIMEOUT } from '../src/jsonrpc/pending.js';
import { IdTable } from '../src/jsonrpc/id-table.js';
import type { RpcError } from '../src/jsonrpc/message.js';

/** Runs `fn` counting the timers armed meanwhile (the table's timer is unref'd: no active handle to count). */
async function countingTimers(fn: (armed: () => number) => Promise<void>): Promise<void> {
  const real = globalThis.setTimeout;
  let armed = 0;
  globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    armed++;
    return real(...args);
  }) as typeof setTimeout;
  try {
    await fn(() => armed);
  } finally {
    globalThis.setTimeout = real;
  }
}

function answer(t: PendingTable, id: number): boolean {
  return t.settle({ jsonrpc: '2.0', id, result: { n: id } });
}

describe('PendingTable: one timer per table', () => {
  it('50 requests in flight arm one timer, and 1 000 sequential calls answered in time never arm another', async () => {
    await countingTimers(async (armed) => {
      const t = new PendingTable(() => {});
      const inFlight = Array.from({ length: 50 }, () => {
        const id = t.allocateId();
        return { id, p: t.add(id, { timeoutMs: 60_000, maxTotalMs: 120_000 }) };
      });
      expect(armed()).toBe(1);
      for (const { id } of inFlight) expect(answer(t, id)).toBe(true);
      expect(await Promise.all(inFlight.map(({ p }) => p))).toHaveLength(50);
      for (let i = 0; i < 1000; i++) {
        const id = t.allocateId();
        const p = t.add(id, { timeoutMs: 60_000 });
        answer(t, id);
        await p;
      }
      expect(armed()).toBe(1);
      t.failAll(new Error('closed'));
    });
  });

  it('still expires each request at its own time: idle timeout, progress, hard maximum; a cancel is sent for each', async () => {
    const expired: [number, string][] = [];
    const t = new PendingTable((id, reason) => expired.push([id as number, reason]));
    const started = Date.now();
    const when = (p: Promise<unknown>) =>
      p.then(
        () => ({ ok: true, ms: Date.now() - started }),
        (e: RpcError) => ({ ok: false, code: e.code, message: e.message, ms: Date.now() - started }),
      );
    const slow = when(t.add(1, { timeoutMs: 5_000 }));
    const fast = when(t.add(2, { timeoutMs: 80 }));
    const touched = when(t.add(3, { timeoutMs: 1_000 }));
    const capped = when(t.add(4, { timeoutMs: 1_000, maxTotalMs: 250 }));
    const quiet = when(t.add(5, { timeoutMs: 60, cancelOnExpire: false }));
    // Progress resets the idle timeout (3 lives past its 1 s) but never moves the hard maximum (4).
    const keepAlive = setInterval(() => {
      t.progress(3, {});
      t.progress(4, {});
    }, 40);
    const f = await fast;
    expect(f).toMatchObject({ ok: false, code: REQUEST_TIMEOUT, message: 'Request timed out: no response within 80 ms' });
    expect(f.ms).toBeGreaterThanOrEqual(75);
    const c = await capped;
    expect(c).toMatchObject({ ok: false, code: REQUEST_TIMEOUT, message: 'Request timed out: maximum total time exceeded' });
    expect(c.ms).toBeGreaterThanOrEqual(245);
    await new Promise((r) => setTimeout(r, 100));
    clearInterval(keepAlive);
    expect(t.size).toBe(2); // 1 (5 s) and 3 (kept alive) are still waiting
    const k = await touched;
    expect(k).toMatchObject({ ok: false, message: 'Request timed out: no response within 1000 ms' });
    expect(k.ms).toBeGreaterThanOrEqual(1_300);
    expect(await quiet).toMatchObject({ ok: false, code: REQUEST_TIMEOUT });
    expect(answer(t, 1)).toBe(true);
    expect(await slow).toMatchObject({ ok: true });
    // One cancel per expired request, none for the one that must never be cancelled (5).
    expect(expired.map(([id]) => id).sort()).toEqual([2, 3, 4]);
    expect(expired.find(([id]) => id === 4)?.[1]).toBe('maximum total time exceeded');
  });

  it('a late answer to an expired request is refused, and a request added after an expiry is still timed', async () => {
    const t = new PendingTable(() => {});
    const first = t.add(1, { timeoutMs: 30 }).catch((e: RpcError) => e.code);
    expect(await first).toBe(REQUEST_TIMEOUT);
    expect(answer(t, 1)).toBe(false);
    const second = t.add(2, { timeoutMs: 30 }).catch((e: RpcError) => e.code);
    expect(await second).toBe(REQUEST_TIMEOUT);
    expect(t.size).toBe(0);
  });
});

describe('IdTable', () => {
  it('behaves as a Map: get, has, set over, delete, size, entries in insertion order', () => {
    const m = new IdTable<string>();
    const ref = new Map<string | number, string>();
    const ops: [string, string | number, string?][] = [
      ['set', 1, 'a'], ['set', 2, 'b'], ['set', 1, 'a2'], ['delete', 1], ['set', 3, 'c'], ['set', '1', 'str'],
      ['delete', 2], ['delete', 3], ['delete', 'x'], ['set', 4, 'd'], ['delete', '1'], ['set', 5, 'e'], ['delete', 4], ['delete', 5],
      ['set', 6, 'f'], ['set', 7, 'g'], ['delete', 6], ['set', 8, 'h'], ['set', -0, 'zero'], ['set', 0, 'zero2'], ['delete', 0],
    ];
    for (const [op, k, v] of ops) {
      if (op === 'set') {
        m.set(k, v!);
        ref.set(k, v!);
      } else {
        expect(m.delete(k)).toBe(ref.delete(k));
      }
      expect(m.size).toBe(ref.size);
      expect(m.entries()).toEqual([...ref.entries()]);
      for (const key of [1, 2, 3, '1', 4, 5, 6, 7, 8, 0]) {
        expect(m.get(key)).toBe(ref.get(key));
        expect(m.has(key)).toBe(ref.has(key));
      }
    }
    m.clear();
    expect(m.size).toBe(0);
    expect(m.entries()).toEqual([]);
  });

  it('stays a Map through growth, shrinking and long probe runs, for numbers, big numbers and strings', () => {
    const m = new IdTable<number>();
    const ref = new Map<string | number, number>();
    let seed = 5;
    const rand = (n: number) => (seed = (seed * 48271) % 2147483647) % n;
    // Sequential ids (as mcpmux issues them), colliding ones (multiples of the table sizes),
    // strings, ids past 32 bits and fractions.
    const key = (): string | number => {
      switch (rand(5)) {
        case 0: return rand(64);
        case 1: return rand(8) * 1024;
        case 2: return `req-${rand(50)}`;
        case 3: return 2 ** 40 + rand(20);
        default: return rand(30) + 0.5;
      }
    };
    for (let round = 0; round < 40; round++) {
      // Fill up (the table grows), then drain (it goes back to its first size when empty).
      const fill = rand(300);
      for (let i = 0; i < fill; i++) {
        const k = key();
        m.set(k, i);
        ref.set(k, i);
      }
      for (let i = 0; i < 400; i++) {
        const k = key();
        expect(m.delete(k)).toBe(ref.delete(k));
        if (rand(3) === 0) {
          const k2 = key();
          m.set(k2, -i);
          ref.set(k2, -i);
        }
      }
      expect(m.size).toBe(ref.size);
      expect(m.entries()).toEqual([...ref.entries()]);
      expect(m.values()).toEqual([...ref.values()]);
      for (const k of ref.keys()) expect(m.get(k)).toBe(ref.get(k));
      for (const [k] of m.entries()) m.delete(k);
      ref.clear();
      expect(m.size).toBe(0);
      expect(m.get(1)).toBeUndefined();
    }
  });
});
