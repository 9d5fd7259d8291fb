// The console's bounded pieces, unit by unit: the rate-limit buckets /status shows as near their
// limit (a bounded top list, one client's own, a cached answer) and the audit ring.

import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../src/governance/rate-limit.js';
import { AuditRing } from '../src/observe/audit-ring.js';

describe('RateLimiter.nearLimit', () => {
  const rule = { client: '*', server: '*', tool: '*', perMinute: 1, burst: 10, per: ['client' as const, 'server' as const, 'tool' as const] };

  it('keeps the emptiest `max`, sorted by fill, among many more near-empty buckets; one client only when named; reuses an answer for a second', () => {
    let now = 0;
    const rl = new RateLimiter([rule], 10_000, () => now);
    // 300 buckets with 1 token left of 10 (near: 10 %), 5 with none left.
    for (let i = 0; i < 300; i++) for (let k = 0; k < 9; k++) rl.take(`c${i}`, 's', 'tools/call', 't');
    for (let i = 0; i < 5; i++) for (let k = 0; k < 10; k++) rl.take(`empty${i}`, 's', 'tools/call', 't');
    const near = rl.nearLimit(0.2, 50);
    expect(near).toHaveLength(50);
    expect(near.slice(0, 5).map((b) => b.client).sort()).toEqual(['empty0', 'empty1', 'empty2', 'empty3', 'empty4']);
    const fills = near.map((b) => b.tokens / b.burst);
    expect(fills).toEqual([...fills].sort((a, b) => a - b));
    expect(near[0]).toMatchObject({ rule: 0, server: 's', tool: 't', tokens: 0, burst: 10, perMinute: 1 });
    // A client that is no admin asks for its own: c299's bucket only, though it is not among the emptiest 50 by position.
    expect(rl.nearLimit(0.2, 50, 'c299').map((b) => b.client)).toEqual(['c299']);
    expect(rl.nearLimit(0.2, 50, 'nobody')).toEqual([]);
    // Within a second the same question gets the same answer (no walk of every bucket per request).
    expect(rl.nearLimit(0.2, 50, 'late')).toEqual([]);
    for (let k = 0; k < 10; k++) rl.take('late', 's', 'tools/call', 't');
    expect(rl.nearLimit(0.2, 50, 'late')).toEqual([]);
    now += 1000;
    expect(rl.nearLimit(0.2, 50, 'late').map((b) => b.client)).toEqual(['late']);
  });
});

describe('AuditRing', () => {
  it('keeps the last lines in order, cuts a long one, gives the last N, and clears', () => {
    const ring = new AuditRing(200);
    for (let i = 0; i < 201; i++) ring.push(`line ${i}\n`);
    const all = ring.snapshot();
    expect(all).toHaveLength(200);
    expect(all[0]).toBe('line 1');
    expect(all.at(-1)).toBe('line 200');
    expect(ring.snapshot(2)).toEqual(['line 199', 'line 200']);
    expect(ring.snapshot(0)).toEqual([]);
    ring.push('x'.repeat(5000));
    expect(ring.snapshot(1)[0]).toBe(`${'x'.repeat(4096)}…[cut]`);
    ring.clear();
    expect(ring.snapshot()).toEqual([]);
    ring.push('after');
    expect(ring.snapshot()).toEqual(['after']);
  });

  it('cuts at a character boundary, not inside a multi-byte character', () => {
    const ring = new AuditRing(10);
    // 4095 ASCII bytes, then characters of 3 bytes: the first of them does not fit in 4096.
    ring.push(`${'a'.repeat(4095)}${'€'.repeat(10)}\n`);
    expect(ring.snapshot()).toEqual([`${'a'.repeat(4095)}…[cut]`]);
    // Exactly at the limit, with its newline: kept whole.
    ring.push(`${'b'.repeat(4096)}\n`);
    expect(ring.snapshot(1)).toEqual(['b'.repeat(4096)]);
    ring.push('€\n');
    ring.push('');
    expect(ring.snapshot(2)).toEqual(['€', '']);
  });

  it('keeps the newest lines that fit in its bytes, in order, whatever their lengths', () => {
    const capacity = 16 * 1024;
    const ring = new AuditRing(50, capacity);
    const pushed: string[] = [];
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2147483648) % n);
    for (let i = 0; i < 3000; i++) {
      const len = rand(10) === 0 ? rand(1500) : rand(400);
      const text = `${i}:` + Array.from({ length: len }, () => (rand(5) === 0 ? ['é', '€', '😀'][rand(3)] : 'x')).join('');
      ring.push(`${text}\n`);
      pushed.push(text);
      if (i % 97 === 0 || i > 2990) {
        const kept = ring.snapshot();
        // The newest lines, oldest first, each whole (none of these is past the cut).
        expect(kept).toEqual(pushed.slice(pushed.length - kept.length));
        // Fewer than `max` only when the bytes are the bound: the next older line would not
        // have fit beside them (room for one line at its longest, and a tail left unused).
        if (kept.length < 50 && kept.length < pushed.length) {
          const bytes = (ls: string[]) => ls.reduce((n, l) => n + Buffer.byteLength(l), 0);
          const older = pushed[pushed.length - kept.length - 1]!;
          expect(bytes(kept) + Buffer.byteLength(older)).toBeGreaterThan(capacity - 3 * (4096 + 10));
        }
      }
    }
  });
});
