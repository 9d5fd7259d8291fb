// Seeing the daemon: GET /status, `mcpmux status`, `mcpmux restart`, and what a crash loop
// looks like there and in /readyz. Plus the one backoff every retry uses.

import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { backoffDelay } from '../src/backoff.js';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { fixture, ROOT, runMux, waitFor } from './helpers/harness.js';

afterAll(stopAllDaemons);

const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');
// Not spawnSync: it would stop this process's event loop while the CLI runs, and a keep-alive
// socket the daemon closed meanwhile would be reused by the next fetch ("other side closed").
const cli = async (args: string[], env: NodeJS.ProcessEnv = {}) => {
  const r = await runMux(args, { env, timeoutMs: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};
const status = async (d: Daemon, init: RequestInit = {}) => (await fetch(`${d.base}/status`, init)).json() as Promise<any>;

describe('status', () => {
  it('lists every upstream with its state, pid and counts; a crash loop is given up, shown, and makes /readyz 503 until restarted', async () => {
    const d = await startDaemon({
      mcpServers: {
        fx: fixture({ name: 'fx' }),
        // Initializes, then dies 200 ms later, every time.
        crashy: { command: process.execPath, args: [BAD, JSON.stringify({ exitAfterInitMs: 200 })], restart: { maxRetries: 2, backoffMs: 20 } },
      },
    });
    await waitFor(async () => (await status(d)).upstreams.find((u: any) => u.name === 'crashy')?.gaveUp === true, { what: 'crashy given up', timeoutMs: 15_000 });
    const s = await status(d);
    expect(s).toMatchObject({ config: { path: expect.any(String) }, lastReload: null, sessions: { total: 0 } });
    const fx = s.upstreams.find((u: any) => u.name === 'fx');
    expect(fx).toMatchObject({ transport: 'stdio', sharing: 'shared', state: 'ready', restarts: 0, inFlight: 0 });
    expect(fx.pid).toBeGreaterThan(0);
    const crashy = s.upstreams.find((u: any) => u.name === 'crashy');
    expect(crashy).toMatchObject({ state: 'failed', gaveUp: true, restarts: 2, lastError: expect.stringMatching(/exited with code 1/) });
    await waitFor(() => d.stderr().includes('giving up on upstream: it keeps failing'), { what: 'the giving up logged' });

    const ready = await fetch(`${d.base}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ status: 'degraded', detail: { upstreams: { ready: 1, 'given up': 1 } } });

    // The terminal view and the JSON one.
    const table = await cli(['status', '--url', d.base]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/^server\s+state\s+transport\s+pid\s+restarts\s+in flight\s+tools\s+prompts\s+resources\s+last error$/m);
    expect(table.stdout).toMatch(/^crashy\s+failed \(given up\)\s+stdio/m);
    const json = await cli(['status', '--json', '--url', d.base]);
    expect(JSON.parse(json.stdout).upstreams.map((u: any) => [u.name, u.state]).sort()).toEqual([['crashy', 'failed'], ['fx', 'ready']]);

    // An admin restarts it: its failures are forgotten and it starts again. Seen in the log, not
    // in /status: it lives 200 ms each time, so a poll on a busy machine may find it failed again.
    const readies = () => d.stderr().split('\n').filter((l) => l.includes('"server":"crashy"') && l.includes('"msg":"upstream ready"')).length;
    const readyBefore = readies();
    expect(readyBefore).toBe(3); // the first start and its two retries
    const restarted = await cli(['restart', 'crashy', '--url', d.base]);
    expect(restarted.code, restarted.stderr).toBe(0);
    await waitFor(() => readies() > readyBefore, { what: 'crashy ready again' });
    expect((await cli(['restart', 'nope', '--url', d.base])).code).toBe(1);
    expect((await fetch(`${d.base}/status/restart?server=fx`)).status).toBe(405);
    await d.stop();
  }, 60_000);

  it('on the main listener, /status and restart need the token when tokens are configured; the CLI sends $MCPMUX_TOKEN', async () => {
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) }, listen: { auth: { tokens: [{ client: 'ops', tokenEnv: 'MUX_T_OPS' }] } } }, { MUX_T_OPS: 'ops-token-123' });
    expect((await fetch(`${d.base}/status`)).status).toBe(401);
    expect((await fetch(`${d.base}/status/restart?server=fx`, { method: 'POST' })).status).toBe(401);
    expect((await fetch(`${d.base}/healthz`)).status).toBe(200);
    expect((await status(d, { headers: { authorization: 'Bearer ops-token-123' } })).upstreams).toHaveLength(1);
    expect((await cli(['status', '--url', d.base])).code).toBe(1);
    expect((await cli(['status', '--url', d.base], { MCPMUX_TOKEN: 'ops-token-123' })).code).toBe(0);
    await d.stop();
  });

  it('mcpmux status says clearly when no daemon answers', async () => {
    const r = await cli(['status', '--url', 'http://127.0.0.1:1']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/cannot reach the daemon at http:\/\/127\.0\.0\.1:1/);
  });
});

describe('backoff', () => {
  it('grows by the factor, never past the cap, and jitters between half and all of each step', () => {
    const b = { baseMs: 100, maxMs: 1000 };
    expect([0, 1, 2, 3, 4].map((n) => backoffDelay(n, b, () => 1))).toEqual([100, 200, 400, 800, 1000]);
    expect([0, 1, 2, 3, 4].map((n) => backoffDelay(n, b, () => 0))).toEqual([50, 100, 200, 400, 500]);
    expect(backoffDelay(1, { baseMs: 1000, factor: 1.5, maxMs: 30_000 }, () => 1)).toBe(1500);
  });
});
