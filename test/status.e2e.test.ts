// Seeing the daemon: GET /status, `mcpmux status`, `mcpmux restart`, and what a crash loop
// looks like there and in /readyz. Plus the one backoff every retry uses.

import { request as httpRequest } from 'node:http';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { backoffDelay } from '../src/backoff.js';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { closeAll, fixture, freePort, ROOT, runMux, startRawMux, tempDir, waitFor, writeConfig } from './helpers/harness.js';

afterAll(async () => {
  await stopAllDaemons();
  await closeAll();
});

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
    expect((await cli(['status', '--url', d.base], { MCPMUX_TOKEN: 'ops-token-123' })).code).toBe(0);
    // A 401 says which variable to set (exit 1: the command line was fine, the token is not).
    const none = await cli(['status', '--url', d.base]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('answered 401');
    expect(none.stderr).toContain('(the daemon wants a token: set $MCPMUX_TOKEN (or the variable --token-env names) to a token from listen.auth.tokens)');
    const wrong = await cli(['status', '--url', d.base], { MCPMUX_TOKEN: 'not-the-token' });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('(the token in $MCPMUX_TOKEN is not one of listen.auth.tokens: set $MCPMUX_TOKEN (or the variable --token-env names) to one that is)');
    expect(wrong.stderr).not.toContain('not-the-token');
    const named = await cli(['restart', 'fx', '--url', d.base, '--token-env', 'MUX_MINE'], { MUX_MINE: 'not-the-token' });
    expect(named.code).toBe(1);
    expect(named.stderr).toMatch(/^mcpmux restart: .* answered 401.*\(the token in \$MUX_MINE is not one of listen\.auth\.tokens: set \$MUX_MINE to one that is\)/);
    await d.stop();
  });

  it('the admin port binds listen.adminHost (loopback), not a public listen.host; /status there needs the token, /metrics and health stay open', async () => {
    const adminPort = await freePort();
    const d = await startDaemon(
      { mcpServers: { fx: fixture({ name: 'fx' }) }, listen: { host: '0.0.0.0', adminPort, auth: { tokens: [{ client: 'host', tokenEnv: 'MUX_T_HOST' }] } } },
      { MUX_T_HOST: 'host-token-456' },
    );
    expect(d.stderr()).toMatch(new RegExp(`"adminPort":${adminPort},"adminHost":"127.0.0.1"`));
    const admin = `http://127.0.0.1:${adminPort}`;
    // Where the kernel says it listens: the admin port on 127.0.0.1 only, the main one on every
    // address (read from /proc, so the test sends nothing to an address outside loopback).
    expect(listeningOn(adminPort)).toEqual(['127.0.0.1']);
    expect(listeningOn(d.port)).toEqual(['0.0.0.0']);
    expect((await fetch(`${admin}/status`)).status).toBe(401);
    expect((await fetch(`${admin}/status`, { headers: { authorization: 'Bearer wrong-token-000' } })).status).toBe(401);
    expect((await fetch(`${admin}/status/restart?server=fx`, { method: 'POST' })).status).toBe(401);
    expect((await fetch(`${admin}/status`, { headers: { authorization: 'Bearer host-token-456' } })).status).toBe(200);
    for (const open of ['/metrics', '/healthz']) expect((await fetch(`${admin}${open}`)).status, open).toBe(200);
    // The web console is where /status is: the admin port, not the main one; the admin
    // listener's Host and Origin checks cover it (DNS rebinding, other pages' actions).
    const ui = await fetch(`${admin}/ui`);
    expect(ui.status).toBe(200);
    expect(ui.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect((await fetch(`http://127.0.0.1:${d.port}/ui`)).status).toBe(404);
    const rawStatus = (headers: Record<string, string>, method = 'GET', target = '/ui') =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest({ host: '127.0.0.1', port: adminPort, method, path: target, headers }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on('error', reject);
        req.end();
      });
    expect(await rawStatus({ host: `evil.example:${adminPort}` })).toBe(403);
    expect(await rawStatus({ origin: 'http://127.0.0.1:3000', 'sec-fetch-site': 'same-site', authorization: 'Bearer host-token-456' }, 'POST', '/status/restart?server=fx')).toBe(403);
    await waitFor(async () => (await fetch(`${admin}/readyz`)).status === 200, { what: '/readyz open and ready' });
    // The CLI against the admin port: refused without a token (and says what to do), fine with one.
    const refused = await cli(['status', '--url', admin]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/answered 401.*MCPMUX_TOKEN/);
    expect((await cli(['status', '--url', admin, '--token-env', 'MUX_T_HOST'], { MUX_T_HOST: 'host-token-456' })).code).toBe(0);
    await d.stop();
  });

  it('a restart needs a client marked "admin" (403 for a host\'s token); every attempt and the reload are in the audit log', async () => {
    const audit = path.join(tempDir(), 'audit.jsonl');
    const config = {
      mcpServers: { fx: fixture({ name: 'fx' }) },
      listen: { auth: { tokens: [{ client: 'host', tokenEnv: 'MUX_T_HOST' }, { client: 'ops', tokenEnv: 'MUX_T_OPS', admin: true }] } },
      audit: { path: audit },
    };
    const file = await writeConfig(config);
    const d = await startDaemon(file, { MUX_T_HOST: 'host-token-456', MUX_T_OPS: 'ops-token-123' });
    const restart = (server: string, token?: string) =>
      fetch(`${d.base}/status/restart?server=${server}`, { method: 'POST', headers: token ? { authorization: `Bearer ${token}` } : {} });
    const pidOf = async () => (await status(d, { headers: { authorization: 'Bearer ops-token-123' } })).upstreams[0].pid as number;
    await waitFor(async () => (await pidOf()) > 0, { what: 'fx up' });
    const before = await pidOf();

    expect((await restart('fx')).status).toBe(401);
    const denied = await restart('fx', 'host-token-456');
    expect(denied.status).toBe(403);
    expect((await denied.json()).error.message).toMatch(/client "host" may not restart upstreams.*"admin": true/);
    // A non-operator learns nothing of which servers exist: the same 403 for a name that is none.
    expect((await restart('nope', 'host-token-456')).status).toBe(403);
    expect(await pidOf()).toBe(before);
    expect((await restart('nope', 'ops-token-123')).status).toBe(404);
    expect((await restart('fx', 'ops-token-123')).status).toBe(202);
    await waitFor(async () => { const p = await pidOf(); return p > 0 && p !== before; }, { what: 'fx restarted' });

    // The CLI: --token-env names the variable; a host's token is told why not.
    const asHost = await cli(['restart', 'fx', '--url', d.base], { MCPMUX_TOKEN: 'host-token-456' });
    expect(asHost.code).toBe(1);
    expect(asHost.stderr).toMatch(/answered 403.*"admin": true/);
    const asOps = await cli(['restart', 'fx', '--url', d.base, '--token-env', 'MUX_T_OPS'], { MUX_T_OPS: 'ops-token-123' });
    expect(asOps.code, asOps.stderr).toBe(0);

    // A reload is an operator action too (the file or SIGHUP: whoever could do it is the operator).
    d.child.kill('SIGHUP');
    await waitFor(() => d.stderr().includes('config reloaded'), { what: 'the reload' });
    expect((await d.stop()).code).toBe(0);

    const lines = readFileSync(audit, 'utf8').trim().split('\n').map((l) => JSON.parse(l)).filter((l) => l.direction === 'operator');
    expect(lines.map(({ client, action, server, outcome, status }) => ({ client, action, server, outcome, status }))).toEqual([
      { client: 'host', action: 'restart', server: 'fx', outcome: 'denied', status: 403 },
      { client: 'host', action: 'restart', server: 'nope', outcome: 'denied', status: 403 },
      { client: 'ops', action: 'restart', server: 'nope', outcome: 'error', status: 404 },
      { client: 'ops', action: 'restart', server: 'fx', outcome: 'ok', status: 202 },
      { client: 'host', action: 'restart', server: 'fx', outcome: 'denied', status: 403 },
      { client: 'ops', action: 'restart', server: 'fx', outcome: 'ok', status: 202 },
      { client: undefined, action: 'reload', server: undefined, outcome: 'ok', status: undefined },
    ]);
    expect(lines[0]).toMatchObject({ v: 1, time: expect.any(String), remote: expect.stringMatching(/127\.0\.0\.1/) });
    expect(lines[6]).toMatchObject({ trigger: 'signal', file });
  });

  it('stdio --admin-port: loopback, and /status needs the token when tokens are configured', async () => {
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) }, listen: { auth: { tokens: [{ client: 'ops', tokenEnv: 'MUX_T_OPS', admin: true }] } } }), {
      args: ['--admin-port', '0'],
      env: { MUX_T_OPS: 'ops-token-123' },
    });
    const port = await waitFor(() => /"port":(\d+)[^\n]*"msg":"admin listening"/.exec(peer.stderr())?.[1], { what: 'the admin port' });
    const admin = `http://127.0.0.1:${port}`;
    expect((await fetch(`${admin}/status`)).status).toBe(401);
    expect((await fetch(`${admin}/status`, { headers: { authorization: 'Bearer ops-token-123' } })).status).toBe(200);
    expect((await fetch(`${admin}/metrics`)).status).toBe(200);
    await peer.close();
  });

  it('mcpmux status and restart say clearly when no daemon answers, and exit 1 (2 is for a wrong command line)', async () => {
    const base = `http://127.0.0.1:${await freePort()}`; // nothing listens there
    for (const args of [['status'], ['status', '--json'], ['restart', 'fx']]) {
      const r = await cli([...args, '--url', base]);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toContain(`mcpmux ${args[0]}: cannot reach the daemon at ${base}: connect ECONNREFUSED`);
      expect(r.stdout).toBe('');
    }
    const usage = await cli(['status', '--url', 'not a url']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--url not a url: not a URL');
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

/** The IPv4 addresses on which something listens on `port`, from /proc/net/tcp (state 0A). */
function listeningOn(port: number): string[] {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  return readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => f[3] === '0A' && f[1]?.endsWith(`:${hexPort}`))
    .map((f) => {
      const hex = f[1]!.split(':')[0]!;
      return [3, 2, 1, 0].map((i) => parseInt(hex.slice(i * 2, i * 2 + 2), 16)).join('.');
    });
}
