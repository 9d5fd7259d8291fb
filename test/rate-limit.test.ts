// The token buckets behind `rateLimits`, on the real RateLimiter with a clock the test moves:
// refill, the most restrictive rule winning, all-or-nothing takes, `per`, and the key cap.

import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import type { RateLimitRule } from '../src/config/types.js';
import { RateLimiter } from '../src/governance/rate-limit.js';

const rule = (r: Partial<RateLimitRule> & { perMinute: number }): RateLimitRule => ({
  client: '*',
  server: '*',
  tool: '*',
  burst: Math.ceil(r.perMinute),
  per: ['client', 'server', 'tool'],
  ...r,
});

function limiter(rules: RateLimitRule[], maxKeys = 1000): { rl: RateLimiter; advance(ms: number): void } {
  let now = 1_000;
  return { rl: new RateLimiter(rules, maxKeys, () => now), advance: (ms) => (now += ms) };
}

describe('RateLimiter', () => {
  it('a reload (adopt) keeps the buckets of rules it does not change, wherever they move, and starts changed rules afresh', () => {
    let now = 1_000;
    const clock = () => now;
    const kept = rule({ perMinute: 1, burst: 2, server: 'a' });
    const changed = rule({ perMinute: 1, burst: 1, server: 'b' });
    const before = new RateLimiter([kept, changed], 1000, clock);
    for (const server of ['a', 'a', 'b']) expect(before.take('c', server, 'tools/call', 't')).toBeUndefined();
    expect(before.take('c', 'a', 'tools/call', 't')?.rule).toBe(0);
    expect(before.take('c', 'b', 'tools/call', 't')?.rule).toBe(1);
    now += 1000;
    // The kept rule moves to index 1; the other one gets a new burst.
    const after = new RateLimiter([{ ...changed, burst: 2 }, kept], 1000, clock).adopt(before);
    expect(after.take('c', 'a', 'tools/call', 't')?.rule).toBe(1);
    expect(after.take('c', 'b', 'tools/call', 't')).toBeUndefined();
    expect(after.take('c', 'b', 'tools/call', 't')).toBeUndefined();
    expect(after.take('c', 'b', 'tools/call', 't')?.rule).toBe(0);
    // Refill goes on from where it was: a minute after the drain, one token back.
    now += 59_000;
    expect(after.take('c', 'a', 'tools/call', 't')).toBeUndefined();
    expect(after.take('c', 'a', 'tools/call', 't')?.rule).toBe(1);
  });

  it('lets a burst through, refuses the next with the time to the next token, and refills at perMinute', () => {
    const { rl, advance } = limiter([rule({ perMinute: 60, burst: 3 })]);
    for (let i = 0; i < 3; i++) expect(rl.take('a', 's', 'tools/call', 't')).toBeUndefined();
    expect(rl.take('a', 's', 'tools/call', 't')).toEqual({ retryAfterMs: 1000, rule: 0, burst: 3, perMinute: 60 });
    advance(400);
    expect(rl.take('a', 's', 'tools/call', 't')?.retryAfterMs).toBe(600);
    advance(600);
    expect(rl.take('a', 's', 'tools/call', 't')).toBeUndefined();
    expect(rl.take('a', 's', 'tools/call', 't')?.retryAfterMs).toBe(1000);
  });

  it('keys buckets by client, server and tool by default, and by fewer with `per`', () => {
    const each = limiter([rule({ perMinute: 1, burst: 1 })]).rl;
    expect(each.take('a', 's', 'tools/call', 't1')).toBeUndefined();
    expect(each.take('a', 's', 'tools/call', 't2')).toBeUndefined();
    expect(each.take('b', 's', 'tools/call', 't1')).toBeUndefined();
    expect(each.take('a', 's', 'tools/call', 't1')).toBeDefined();

    const perServer = limiter([rule({ perMinute: 1, burst: 2, per: ['server'] })]).rl;
    expect(perServer.take('a', 's', 'tools/call', 't1')).toBeUndefined();
    expect(perServer.take('b', 's', 'prompts/get', undefined)).toBeUndefined();
    expect(perServer.take('c', 's', 'tools/call', 't2')).toBeDefined();
    expect(perServer.take('c', 'other', 'tools/call', 't2')).toBeUndefined();
  });

  it('applies every matching rule; the most restrictive answer wins, and a refusal takes no token anywhere', () => {
    // Rule 0: one bucket per client across servers (3). Rule 1: servers slow*, 2 at once.
    const { rl, advance } = limiter([rule({ perMinute: 600, burst: 3, per: ['client'] }), rule({ server: 'slow*', perMinute: 6, burst: 2 })]);
    expect(rl.take('a', 'slowpoke', 'tools/call', 't')).toBeUndefined();
    expect(rl.take('a', 'slowpoke', 'tools/call', 't')).toBeUndefined();
    expect(rl.take('a', 'slowpoke', 'tools/call', 't')).toMatchObject({ rule: 1, retryAfterMs: 10_000 });
    // The refusal spent nothing of rule 0: its last token is still there, for another server.
    expect(rl.take('a', 'fast', 'tools/call', 't')).toBeUndefined();
    expect(rl.take('a', 'fast', 'tools/call', 't')).toMatchObject({ rule: 0, retryAfterMs: 100 });
    advance(10_000);
    expect(rl.take('a', 'slowpoke', 'tools/call', 't')).toBeUndefined();
  });

  it('a tool glob counts only tools/call of matching tools; "*" counts the other methods too', () => {
    const { rl } = limiter([rule({ tool: 'write_*', perMinute: 1, burst: 1 })]);
    expect(rl.take('a', 's', 'tools/call', 'write_file')).toBeUndefined();
    expect(rl.take('a', 's', 'tools/call', 'write_file')).toBeDefined();
    expect(rl.take('a', 's', 'tools/call', 'read_file')).toBeUndefined();
    expect(rl.take('a', 's', 'tools/call', 'read_file')).toBeUndefined();
    expect(rl.take('a', 's', 'resources/read', undefined)).toBeUndefined();
    expect(rl.take('a', 's', 'resources/read', undefined)).toBeUndefined();

    const all = limiter([rule({ perMinute: 1, burst: 1 })]).rl;
    expect(all.take('a', 's', 'resources/read', undefined)).toBeUndefined();
    expect(all.take('a', 's', 'resources/read', undefined)).toBeDefined();
  });

  it('holds at most maxKeys buckets: 100 000 distinct client/tool keys stay within the cap', () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const cap = 1000;
    const { rl } = limiter([rule({ perMinute: 60, burst: 3 })], cap);
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 100_000; i++) expect(rl.take(`client-${i % 100}`, 'server', 'tools/call', `tool-${i}`)).toBeUndefined();
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    expect(rl.size).toBe(cap);
    // 100 000 live buckets would hold well over 10 MB (key strings, entries, bucket objects).
    expect(grown).toBeLessThan(4 * 1024 * 1024);
  });

  it('a limiter with the default cap of 100 000 keys and few in use holds memory for the keys in use, not for the cap', () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    gc();
    const before = process.memoryUsage();
    // Kept alive to the end: every daemon builds one (with no rules, too).
    const limiters = [new RateLimiter([], 100_000), limiter([rule({ perMinute: 60, burst: 3 })], 100_000).rl];
    limiters[1]!.take('a', 's', 'tools/call', 't');
    gc();
    const after = process.memoryUsage();
    // lru-cache with `max` allocated its index arrays for the whole cap up front: ~2.7 MB of
    // heap and array buffers per limiter (heap snapshot of an idle daemon, issue 23).
    expect(after.arrayBuffers - before.arrayBuffers).toBeLessThan(256 * 1024);
    expect(after.heapUsed - before.heapUsed).toBeLessThan(1024 * 1024);
    expect(limiters[1]!.size).toBe(1);
  });
});
