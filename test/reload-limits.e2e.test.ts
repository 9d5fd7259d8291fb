// What a reload says it applied, it applies (issue 18, items 10 and 7): timeouts.maxMs and
// limits.maxInFlightPerSession reach sessions already open, timeouts.startupMs the next start of
// upstreams already running; rate-limit buckets survive a reload that does not change their rule;
// a reload that adds a `sharing: "session"` server stays within limits.maxSessionUpstreams.

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { fixture, ROOT, waitFor, writeConfig } from './helpers/harness.js';

afterAll(stopAllDaemons);

const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');
const status = async (d: Daemon) => (await fetch(`${d.base}/status`)).json() as Promise<any>;
const upstream = async (d: Daemon, name: string) => (await status(d)).upstreams.find((u: any) => u.name === name);

/** Writes `cfg` to the daemon's config file, sends SIGHUP, and waits until that reload is applied. */
async function reload(d: Daemon, file: string, cfg: object): Promise<any> {
  const before = (await status(d)).lastReload?.at;
  writeFileSync(file, JSON.stringify(cfg, null, 2));
  d.child.kill('SIGHUP');
  const last = await waitFor(async () => {
    const r = (await status(d)).lastReload;
    return r && r.at !== before && r;
  }, { what: 'the reload done', timeoutMs: 20_000 });
  expect(last).toMatchObject({ result: 'applied' });
  return last;
}

async function host(d: Daemon, name = 'host'): Promise<Client> {
  const c = new Client({ name, version: '0' }, { capabilities: {} });
  await c.connect(new StreamableHTTPClientTransport(new URL(d.url)));
  return c;
}

const rejection = (p: Promise<unknown>): Promise<string> =>
  p.then(
    (r) => `answered: ${JSON.stringify(r).slice(0, 200)}`,
    (err: Error) => err.message,
  );

describe('reload applies what it reports applied', () => {
  /** A daemon with fx, one host session open, then a reload that sets `over` (timeouts and limits). */
  async function reloadedUnderHost(over: object): Promise<{ d: Daemon; c: Client }> {
    const cfg = (more: object) => ({ mcpServers: { fx: fixture({ name: 'fx' }) }, timeouts: { requestMs: 5000, maxMs: 60_000, startupWaitMs: 10_000 }, ...more });
    const file = await writeConfig(cfg({}));
    const d = await startDaemon(file);
    const c = await host(d);
    await reload(d, file, cfg(over));
    return { d, c };
  }

  it('limits.maxInFlightPerSession reaches a session that is already open', async () => {
    const { d, c } = await reloadedUnderHost({ limits: { maxInFlightPerSession: 1 } });
    // One call in flight: the same session's next request is refused at the new limit.
    const first = c.callTool({ name: 'fx__slow', arguments: { ms: 4000 } }, undefined, { timeout: 30_000 });
    await waitFor(async () => (await upstream(d, 'fx'))?.inFlight === 1, { what: 'the slow call in flight' });
    expect(await rejection(c.callTool({ name: 'fx__echo', arguments: {} }))).toMatch(/Too many requests in flight \(limit 1\)/);
    expect((await first).content).toEqual([{ type: 'text', text: 'slept 4000' }]);
    await c.close();
    await d.stop();
  }, 90_000);

  it('timeouts.maxMs reaches an upstream connection that is already open', async () => {
    const { d, c } = await reloadedUnderHost({ timeouts: { requestMs: 5000, maxMs: 5000, startupWaitMs: 10_000 } });
    // A call that keeps reporting progress (every 100 ms for 10 s) is cut at the new maxMs.
    const long = c.callTool({ name: 'fx__progress', arguments: { steps: 100, delayMs: 100 } }, undefined, { timeout: 60_000, resetTimeoutOnProgress: true, onprogress: () => {} });
    expect(await rejection(long)).toMatch(/maximum total time exceeded/);
    await c.close();
    await d.stop();
  }, 90_000);

  it('timeouts.startupMs applies to the next start of an upstream already running', async () => {
    const cfg = (startupMs: number) => ({
      mcpServers: { slow: { command: process.execPath, args: [BAD, JSON.stringify({ initDelayMs: 2000 })], restart: { maxRetries: 0, backoffMs: 20 } } },
      timeouts: { startupMs, startupWaitMs: 500 },
    });
    const file = await writeConfig(cfg(30_000));
    const d = await startDaemon(file);
    await waitFor(async () => (await upstream(d, 'slow'))?.state === 'ready', { what: 'slow ready', timeoutMs: 20_000 });

    await reload(d, file, cfg(500));
    expect((await fetch(`${d.base}/status/restart?server=slow`, { method: 'POST', headers: { 'x-mcpmux-operator': '1' } })).status).toBe(202);
    // Its 2 s initialize no longer fits.
    const failed = await waitFor(async () => {
      const u = await upstream(d, 'slow');
      return u?.state === 'failed' && u;
    }, { what: 'slow failed under the new startupMs', timeoutMs: 20_000 });
    expect(failed.lastError).toMatch(/no response within 500 ms/);
    await d.stop();
  }, 60_000);

  it('a reload that does not change a rate limit leaves its drained bucket drained; a changed rule starts afresh', async () => {
    const rule = { server: 'fx', perMinute: 1, burst: 2 };
    const cfg = (over: object) => ({ mcpServers: { fx: fixture({ name: 'fx' }) }, rateLimits: [rule], ...over });
    const file = await writeConfig(cfg({}));
    const d = await startDaemon(file);
    const c = await host(d);
    const limited = async () => {
      const r: any = await c.callTool({ name: 'fx__echo', arguments: {} });
      return r.isError === true && /Rate limit reached/.test(r.content?.[0]?.text);
    };
    let calls = 0;
    while (!(await limited())) expect(++calls).toBeLessThanOrEqual(2);
    expect(calls).toBe(2);

    // Unrelated: the policy and the log level change, the rule does not.
    await reload(d, file, cfg({ policy: { tools: { deny: ['fx__whoami'] } }, logLevel: 'debug' }));
    expect(await limited()).toBe(true);

    // The rule changes: its buckets start full at the new burst.
    await reload(d, file, cfg({ rateLimits: [{ ...rule, burst: 3 }] }));
    for (let i = 0; i < 3; i++) expect(await limited()).toBe(false);
    expect(await limited()).toBe(true);

    await c.close();
    await d.stop();
  }, 90_000);
});

describe('reload and limits.maxSessionUpstreams', () => {
  it('a reload that adds a sharing "session" server opens no more per-session connections than the cap', async () => {
    const cfg = (servers: object) => ({ mcpServers: { fx: fixture({ name: 'fx' }), ...servers }, limits: { maxSessionUpstreams: 2 } });
    const file = await writeConfig(cfg({}));
    const d = await startDaemon(file);
    const hosts = [await host(d, 'h1'), await host(d, 'h2'), await host(d, 'h3')];

    const last = await reload(d, file, cfg({ mine: { ...fixture({ name: 'mine' }), sharing: 'session' } }));
    expect(last.added).toEqual(['mine']);
    const mine = (await status(d)).upstreams.filter((u: any) => u.name === 'mine');
    expect(mine).toHaveLength(2);
    await waitFor(() => /"sessions":1,"running":2,"limit":2,"msg":"limits.maxSessionUpstreams reached/.test(d.stderr()), { what: 'the session left without it said' });

    // Two sessions have it (the oldest two: h1 and h2); the third goes without it, and can tell.
    expect(new Set(mine.map((u: any) => u.session)).size).toBe(2);
    const names = async (c: Client) => (await c.listTools()).tools.map((t) => t.name);
    expect(await names(hosts[0])).toContain('mine__echo');
    expect(await names(hosts[1])).toContain('mine__echo');
    expect(await names(hosts[2])).not.toContain('mine__echo');
    expect(await names(hosts[2])).toContain('fx__echo');
    for (const h of hosts) await h.close();
    await d.stop();
  }, 90_000);
});
