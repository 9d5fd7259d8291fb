// Issue 21, point 1: with `store`, rate limits are global. Real daemons (`mcpmux serve`) share
// one real redis-server, hosts call through the SDK's Streamable HTTP client, and the fixture
// upstream records what reached it. A limit holds exactly across 3 daemons under concurrent
// load, gives the same retry-after answers as one daemon does, keeps its buckets over a reload
// that leaves its rule alone, and behaves as store.onError says while Redis is down, and again
// without a restart once it is back.

import { writeFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { fixture, readEvents, tempFile, waitFor, WAIT_MS, writeConfig } from './helpers/harness.js';
import { startRedis, stopAllRedis, type RedisServer } from './helpers/redis.js';
import type { RateLimitRule } from '../src/config/types.js';
import { SharedRateLimiter } from '../src/governance/shared-rate-limit.js';
import { createLogger } from '../src/observe/logger.js';
import { SharedStore } from '../src/store/store.js';

const clients: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
  await stopAllDaemons();
  await stopAllRedis();
});
afterAll(async () => {
  await stopAllDaemons();
  await stopAllRedis();
});

const store = (r: RedisServer, onError: 'closed' | 'open' = 'closed') => ({ redis: { url: r.url, keyPrefix: 'mcpmux:' }, onError });

/** `n` daemons on one config, each up and connected to the store (its /readyz says so). */
async function daemons(config: object, n: number): Promise<Daemon[]> {
  const file = await writeConfig(config);
  // One after the other: on a loaded 2-core machine three at once may miss startDaemon's bound.
  const ds: Daemon[] = [];
  for (let i = 0; i < n; i++) ds.push(await startDaemon(file));
  for (const d of ds) await storeIs(d, 'up');
  return ds;
}

async function storeIs(d: Daemon, health: 'up' | 'down'): Promise<void> {
  await waitFor(async () => ((await (await fetch(`${d.base}/readyz`)).json()) as any).detail?.store === health || undefined, {
    what: `the store ${health} on ${d.base}`,
    timeoutMs: WAIT_MS,
  });
}

async function host(d: Daemon): Promise<Client> {
  const c = new Client({ name: 'host', version: '0' }, { capabilities: {} });
  await c.connect(new StreamableHTTPClientTransport(new URL(d.url)));
  clients.push(c);
  return c;
}

/** A tools/call's outcome: passed, limited (with its wait), or the JSON-RPC error's code and message. */
async function call(c: Client, name = 'fx__echo'): Promise<{ passed: true } | { limited: number; text: string } | { code: number; message: string }> {
  try {
    const r: any = await c.callTool({ name, arguments: { text: 'hi' } }, undefined, { timeout: 30_000 });
    if (!r.isError) return { passed: true };
    return { limited: r._meta?.retryAfterMs, text: r.content?.[0]?.text };
  } catch (err: any) {
    return { code: err.code, message: err.message };
  }
}

const upstreamCalls = (events: string) => readEvents(events).filter((e) => e.type === 'request' && e.method === 'tools/call').length;
const rlKeys = async (r: RedisServer) => (await r.cli('--scan', '--pattern', 'mcpmux:rl:*')).split('\n').filter(Boolean);

describe('shared rate limits: 3 daemons, one Redis', () => {
  it('a limit holds exactly across 3 daemons under concurrent load: 60 calls, burst 10, exactly 10 pass', async () => {
    const r = await startRedis();
    const events = tempFile('ev.jsonl');
    // perMinute 1: one token a minute, so the refill cannot add a pass during the burst.
    const ds = await daemons({ mcpServers: { fx: fixture({ name: 'fx', events }) }, rateLimits: [{ server: 'fx', perMinute: 1, burst: 10 }], store: store(r) }, 3);
    const hosts = await Promise.all(ds.map(host));
    const before = Number(/cmdstat_evalsha:calls=(\d+)/.exec(await r.cli('INFO', 'commandstats'))?.[1] ?? 0);
    const outcomes = await Promise.all(Array.from({ length: 60 }, (_, i) => call(hosts[i % 3]!)));

    const passed = outcomes.filter((o) => 'passed' in o);
    const limited = outcomes.filter((o): o is { limited: number; text: string } => 'limited' in o);
    expect(passed).toHaveLength(10); // one daemon each would let 30 through
    expect(limited).toHaveLength(50);
    // The same answer as one daemon gives: a tool result the model reads, with the wait in _meta.
    for (const l of limited) {
      expect(l.limited).toBeGreaterThan(0);
      expect(l.limited).toBeLessThanOrEqual(60_000);
      expect(l.text).toMatch(/^Rate limit reached for fx__echo: at most 10 at once and 1 per minute\. Try again in \d+\.\d s\.$/);
    }
    // Limited calls never reached the upstream; each daemon's passes count against the one bucket.
    expect(upstreamCalls(events)).toBe(10);
    // One bucket in Redis, with an expiry about the time it takes to refill (10 minutes) and no more.
    const keys = await rlKeys(r);
    expect(keys).toHaveLength(1);
    const ttl = Number(await r.cli('PTTL', keys[0]!));
    expect(ttl).toBeGreaterThan(9 * 60_000);
    expect(ttl).toBeLessThanOrEqual(10 * 60_000 + 1_000);
    // At most one script call (one round trip) per limited call: calls that arrive while a
    // daemon's script call is under way go together in its next (the first on each connection is an EVAL).
    const stats = await r.cli('INFO', 'commandstats');
    const evalsha = Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0) - before;
    const evals = Number(/cmdstat_eval:calls=(\d+)/.exec(stats)?.[1] ?? 0);
    expect(evalsha + evals).toBeGreaterThanOrEqual(3);
    expect(evalsha + evals).toBeLessThanOrEqual(60);
  }, 120_000);

  it('refill and retry-after are Redis-timed and shared: a token spent on A is missing on B until the wait B gave has passed, then C gets it; a refused prompt is -31005', async () => {
    const r = await startRedis();
    // fx: one token every 5 s (a margin no loaded machine eats between two calls). px: prompts
    // count too (tool "*"), and a refused prompts/get is an error, not a tool result.
    const ds = await daemons(
      {
        mcpServers: { fx: fixture({ name: 'fx' }), px: fixture({ name: 'px', prompts: 1 }) },
        rateLimits: [
          { server: 'fx', perMinute: 12, burst: 1, per: ['server'] },
          { server: 'px', perMinute: 1, burst: 1, per: ['server'] },
        ],
        store: store(r),
      },
      3,
    );
    const [a, b, c] = await Promise.all(ds.map(host));
    const prompt = (h: Client) => h.getPrompt({ name: 'px__prompt_0', arguments: { topic: 't' } }).then(() => 'passed', (err: any) => err);
    expect(await prompt(a!)).toBe('passed');
    const refusedPrompt = await prompt(b!);
    expect(refusedPrompt.code).toBe(-31005);
    expect(refusedPrompt.message).toMatch(/Rate limit reached for px__prompt_0: at most 1 at once and 1 per minute\. Try again in \d+\.\d s\./);
    expect(refusedPrompt.data?.retryAfterMs).toBeGreaterThan(0);
    expect(refusedPrompt.data?.retryAfterMs).toBeLessThanOrEqual(60_000);

    expect(await call(a!)).toEqual({ passed: true });
    const refused = await call(b!);
    expect(refused).toMatchObject({ limited: expect.any(Number) });
    const wait = (refused as { limited: number }).limited;
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(5_000);
    // Once the wait has passed, the token is back for whoever asks first, on any daemon.
    await new Promise((resolve) => setTimeout(resolve, wait + 400));
    expect(await call(c!)).toEqual({ passed: true });
    expect(await call(a!)).toMatchObject({ limited: expect.any(Number) });
  }, 120_000);

  it('buckets are keyed by rule, not by place: daemons with the rules in another order, and a reload that adds a rule, share and keep the drained bucket', async () => {
    const r = await startRedis();
    const servers = { fx: fixture({ name: 'fx' }), other: fixture({ name: 'other' }) };
    const kept = { server: 'fx', perMinute: 1, burst: 2 };
    const another = { server: 'other', perMinute: 1, burst: 5 };
    const fileA = await writeConfig({ mcpServers: servers, rateLimits: [kept, another], store: store(r) });
    const fileB = await writeConfig({ mcpServers: servers, rateLimits: [another, kept], store: store(r) });
    const [da, db] = [await startDaemon(fileA), await startDaemon(fileB)];
    await storeIs(da, 'up');
    await storeIs(db, 'up');
    const [a, b] = [await host(da), await host(db)];
    expect(await call(a)).toEqual({ passed: true });
    expect(await call(b)).toEqual({ passed: true });
    expect(await call(a)).toMatchObject({ limited: expect.any(Number) });
    expect(await call(b)).toMatchObject({ limited: expect.any(Number) });

    // A reload on B that puts a new rule first and changes `another`: `kept` keeps its drained bucket.
    const before = ((await (await fetch(`${db.base}/status`)).json()) as any).lastReload?.at;
    writeFileSync(fileB, JSON.stringify({ mcpServers: servers, rateLimits: [{ server: 'nothing*', perMinute: 5 }, { ...another, burst: 1 }, kept], store: store(r) }));
    db.child.kill('SIGHUP');
    const reloaded = await waitFor(async () => {
      const last = ((await (await fetch(`${db.base}/status`)).json()) as any).lastReload;
      return last && last.at !== before && last;
    }, { what: 'the reload done', timeoutMs: 20_000 });
    expect(reloaded).toMatchObject({ result: 'applied' });
    expect(await call(b)).toMatchObject({ limited: expect.any(Number) });
    // The changed rule starts afresh on B (burst 1), and on A the old rule is still its own bucket (burst 5).
    expect(await call(b, 'other__echo')).toEqual({ passed: true });
    expect(await call(b, 'other__echo')).toMatchObject({ limited: expect.any(Number) });
    expect(await call(a, 'other__echo')).toEqual({ passed: true });
  }, 120_000);

  it('a bucket someone overwrote in Redis (garbage, or another type) counts as full and is replaced; the limit goes on', async () => {
    const r = await startRedis();
    const [d] = await daemons({ mcpServers: { fx: fixture({ name: 'fx' }) }, rateLimits: [{ server: 'fx', perMinute: 1, burst: 1 }], store: store(r) }, 1);
    const c = await host(d!);
    expect(await call(c)).toEqual({ passed: true });
    expect(await call(c)).toMatchObject({ limited: expect.any(Number) });
    const [key] = await rlKeys(r);
    expect(await r.cli('SET', key!, 'garbage')).toBe('OK');
    expect(await call(c)).toEqual({ passed: true });
    expect(await call(c)).toMatchObject({ limited: expect.any(Number) });
    expect(await r.cli('GET', key!)).toMatch(/^0 \d+(\.\d+)?$/);
    // Another type at the bucket's key: the same.
    expect(await r.cli('DEL', key!)).toBe('1');
    expect(await r.cli('HSET', key!, 't', 'x')).toBe('1');
    expect(await call(c)).toEqual({ passed: true });
    expect(await call(c)).toMatchObject({ limited: expect.any(Number) });
  }, 60_000);
});

describe('SharedRateLimiter on a real Redis (calls that go together in one script call)', () => {
  const rule = (r: Partial<RateLimitRule> & { perMinute: number }): RateLimitRule => ({ client: '*', server: '*', tool: '*', burst: Math.ceil(r.perMinute), per: ['client', 'server', 'tool'], ...r });

  it('each call of a batch is all or nothing: a refusal by one rule takes no token of another, and the most restrictive wait wins', async () => {
    const r = await startRedis();
    const store = new SharedStore({ redis: { url: r.url, keyPrefix: 'mcpmux:' }, onError: 'closed' }, createLogger('silent'));
    try {
      expect(await store.ready(WAIT_MS)).toBe('up');
      // The in-memory limiter's own case (rate-limit.test.ts): rule 0, 3 per client over all servers
      // (a token a second: no pause between two script calls refills it); rule 1, servers slow*, 2 at once.
      const rl = new SharedRateLimiter([rule({ perMinute: 60, burst: 3, per: ['client'] }), rule({ server: 'slow*', perMinute: 6, burst: 2 })], store, createLogger('silent'));
      // Asked in one go: the first goes to Redis at once, the other three together in the next script call.
      const answers = await Promise.all([
        rl.take('a', 'slowpoke', 'tools/call', 't'),
        rl.take('a', 'slowpoke', 'tools/call', 't'),
        rl.take('a', 'slowpoke', 'tools/call', 't'),
        rl.take('a', 'fast', 'tools/call', 't'),
        rl.take('a', 'fast', 'tools/call', 't'),
      ]);
      expect(answers[0]).toBeUndefined();
      expect(answers[1]).toBeUndefined();
      // Refused by rule 1 (10 s to its next token); rule 0 kept its last token for the next call.
      expect(answers[2]).toMatchObject({ rule: 1, burst: 2, perMinute: 6 });
      expect(answers[2]!.retryAfterMs).toBeGreaterThan(9_000);
      expect(answers[2]!.retryAfterMs).toBeLessThanOrEqual(10_000);
      expect(answers[3]).toBeUndefined();
      expect(answers[4]).toMatchObject({ rule: 0 });
      expect(answers[4]!.retryAfterMs).toBeLessThanOrEqual(1_000);
      // Two buckets, each written once, with its expiry; two script calls for the five.
      expect((await rlKeys(r)).length).toBe(2);
      const stats = await r.cli('INFO', 'commandstats');
      const scripts = ['eval', 'evalsha'].map((c) => Number(new RegExp(`cmdstat_${c}:calls=(\\d+)`).exec(stats)?.[1] ?? 0));
      expect(scripts[0]! + scripts[1]!).toBe(2);
    } finally {
      await store.close();
    }
  }, 60_000);
});

describe('shared rate limits while Redis is down', () => {
  it('onError "closed": a limited call fails with -31007 while Redis is down, unlimited calls pass, and once Redis is back calls pass again without a restart; the outage is logged once', async () => {
    const r = await startRedis();
    const config = {
      mcpServers: { fx: fixture({ name: 'fx' }), free: fixture({ name: 'free' }) },
      rateLimits: [{ server: 'fx', perMinute: 60, burst: 100 }],
      store: store(r, 'closed'),
    };
    const ds = await daemons(config, 2);
    const hosts = await Promise.all(ds.map(host));
    for (const h of hosts) expect(await call(h)).toEqual({ passed: true });

    await r.kill();
    for (const d of ds) await storeIs(d, 'down');
    for (const h of hosts) {
      for (let i = 0; i < 3; i++) {
        const o = await call(h);
        expect(o).toMatchObject({ code: -31007 });
        expect((o as { message: string }).message).toMatch(/The rate limit on fx__echo needs mcpmux's shared store \(Redis\), which is unreachable now; try again shortly$/);
      }
      // A call no rule limits needs no store.
      expect(await call(h, 'free__echo')).toEqual({ passed: true });
    }

    await r.restart();
    for (const [i, h] of hosts.entries()) {
      await waitFor(async () => ('passed' in (await call(h)) ? true : undefined), { what: `calls pass again on daemon ${i}`, timeoutMs: WAIT_MS });
    }
    // Each daemon said "unreachable" once and "reachable again" once, for 6 failed calls; no call logged at warn or above.
    for (const d of ds) {
      const lines = d.stderr().split('\n').filter(Boolean).map((l) => JSON.parse(l));
      expect(lines.filter((l) => /shared store \(Redis\) is unreachable/.test(l.msg))).toHaveLength(1);
      expect(lines.filter((l) => /reachable again/.test(l.msg))).toHaveLength(1);
      expect(lines.filter((l) => l.level >= 40 && l.component === 'rate-limit')).toEqual([]);
    }
  }, 120_000);

  it('Redis down at start and killed mid-traffic: the daemon never crashes, answers each call as passed or -31007, and calls pass again once Redis is back', async () => {
    const r = await startRedis();
    await r.stop();
    const file = await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) }, rateLimits: [{ server: 'fx', perMinute: 1, burst: 30 }], store: store(r, 'closed') });
    const d = await startDaemon(file);
    await storeIs(d, 'down');
    const h = await host(d);
    expect(await call(h)).toMatchObject({ code: -31007 });

    await r.restart();
    await storeIs(d, 'up');
    expect(await call(h)).toEqual({ passed: true });
    // 20 calls in flight while Redis dies: each is answered, as passed (the script ran) or as -31007.
    const outcomes = Promise.all(Array.from({ length: 20 }, () => call(h)));
    await r.kill();
    for (const o of await outcomes) {
      if ('passed' in o) continue;
      expect(o).toMatchObject({ code: -31007 });
    }
    expect(d.child.exitCode).toBeNull();
    await r.restart();
    await waitFor(async () => ('passed' in (await call(h)) ? true : undefined), { what: 'calls pass again', timeoutMs: WAIT_MS });
  }, 120_000);

  it('onError "open": while Redis is down the limits are skipped and calls pass; once it is back the limit holds again', async () => {
    const r = await startRedis();
    const events = tempFile('ev.jsonl');
    const ds = await daemons({ mcpServers: { fx: fixture({ name: 'fx', events }) }, rateLimits: [{ server: 'fx', perMinute: 1, burst: 1 }], store: store(r, 'open') }, 2);
    const [a, b] = await Promise.all(ds.map(host));
    expect(await call(a!)).toEqual({ passed: true });
    expect(await call(b!)).toMatchObject({ limited: expect.any(Number) });

    await r.kill();
    for (const d of ds) await storeIs(d, 'down');
    for (let i = 0; i < 3; i++) for (const h of [a!, b!]) expect(await call(h)).toEqual({ passed: true });
    expect(upstreamCalls(events)).toBe(7);

    await r.restart();
    for (const d of ds) await storeIs(d, 'up');
    // A fresh Redis (no persistence): a full bucket of 1, shared again.
    expect(await call(b!)).toEqual({ passed: true });
    expect(await call(a!)).toMatchObject({ limited: expect.any(Number) });
  }, 120_000);
});
