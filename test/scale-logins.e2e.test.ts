// OAuth logins shared through Redis (issue 21, point 3): with `store` and `store.secretEnv`, one
// `mcpmux login` serves every daemon; the login is sealed in Redis (never plain); an expired
// access token is refreshed by one daemon while the others wait on the refresh lock and then use
// the new token (one refresh reaches the authorization server); a daemon SIGKILLed while holding
// the lock holds it no longer than its timeout, after which another daemon refreshes; and
// store.onError decides what a daemon does with its login while Redis is down.
//
// Real redis-server (test/helpers/redis.ts), real daemons, and the real authorization server and
// protected MCP server of test/fixtures/oauth-upstream.mjs (which counts every token grant).

import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, describe, expect, it } from 'vitest';
import { loginKey, openLogin } from '../src/upstream/oauth/seal.js';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { awaitJsonLine, readEvents, ROOT, runMux, tempDir, tempFile, waitFor, waitForEvent, WAIT_MS, writeConfig } from './helpers/harness.js';
import { startRedis, stopAllRedis, type RedisServer } from './helpers/redis.js';

const OAUTH = path.join(ROOT, 'test/fixtures/oauth-upstream.mjs');
const BROWSER = `${process.execPath} ${path.join(ROOT, 'test/fixtures/headless-browser.mjs')}`;
const KEY = randomBytes(32).toString('hex');

const children: ChildProcess[] = [];
const hosts: Client[] = [];

afterAll(async () => {
  await Promise.allSettled(hosts.map((h) => h.close()));
  await stopAllDaemons();
  for (const c of children) c.kill('SIGKILL');
  await stopAllRedis();
});

/** The authorization server + protected MCP server; resolves to its MCP URL and its events file. */
async function authServer(opts: { refreshDelayMs?: number; stallRefreshes?: number; holdRefreshes?: number } = {}): Promise<{ url: string; events: string }> {
  const events = tempFile('oauth-events.jsonl');
  const child = spawn(process.execPath, [OAUTH, JSON.stringify({ events, ...opts })], { stdio: ['pipe', 'pipe', 'pipe'] });
  children.push(child);
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await awaitJsonLine(child.stdout!, exited, (j) => j.url as string | undefined, { ms: WAIT_MS, what: 'the OAuth fixture URL', log: () => err });
  return { url, events };
}

interface Cluster {
  config: string;
  url: string;
  events: string;
  redis: RedisServer;
  prefix: string;
}

async function cluster(redis: RedisServer, prefix: string, as: { url: string; events: string }, onError: 'closed' | 'open' = 'closed'): Promise<Cluster> {
  const config = await writeConfig({ store: { redis: { url: redis.url, keyPrefix: prefix }, onError, secretEnv: 'MCPMUX_STORE_KEY' }, mcpServers: { secure: { url: as.url } } });
  return { config, redis, prefix, ...as };
}

/** A daemon of the cluster, with a state folder of its own (nothing shared through files). */
const daemon = (c: Cluster, env: Record<string, string> = {}, config = c.config) => startDaemon(config, { MCPMUX_STATE_DIR: tempDir(), MCPMUX_STORE_KEY: KEY, ...env });

/** `mcpmux login secure` from yet another state folder, the browser step done headlessly. */
async function login(c: Cluster): Promise<{ stdout: string; state: string }> {
  const state = tempDir();
  const r = await runMux(['login', 'secure', '--config', c.config], { env: { MCPMUX_STATE_DIR: state, MCPMUX_STORE_KEY: KEY, BROWSER } });
  expect(r.status, r.stderr).toBe(0);
  return { stdout: r.stdout, state };
}

/** The login as Redis holds it, opened with the cluster's key (only the test does this). */
async function storedLogin(c: Cluster): Promise<{ sealed: string; login: any }> {
  const sealed = await c.redis.cli('GET', `${c.prefix}login:secure`);
  return { sealed, login: openLogin(loginKey(KEY), c.prefix, 'secure', sealed) };
}

const fingerprint = async (token: string) => (await import('node:crypto')).createHash('sha256').update(token).digest('hex').slice(0, 12);

const status = async (d: Daemon) => (await (await fetch(`${d.base}/status`)).json()) as any;
const secureState = async (d: Daemon) => (await status(d)).upstreams.find((u: any) => u.name === 'secure')?.state as string | undefined;

/** A host on daemon `d` once the protected upstream serves there. */
async function hostOn(d: Daemon): Promise<Client> {
  await waitFor(async () => (await secureState(d)) === 'ready', { what: `secure ready on :${d.port}`, timeoutMs: WAIT_MS }).catch(async (e) => {
    throw new Error(`${e.message}\n${JSON.stringify((await status(d)).upstreams)}\n${d.stderr()}`);
  });
  const host = new Client({ name: 'host', version: '0' });
  await host.connect(new StreamableHTTPClientTransport(new URL(d.url)));
  hosts.push(host);
  await waitFor(async () => (await host.listTools()).tools.some((t) => t.name === 'secure__whoami'), { what: 'secure__whoami listed' });
  return host;
}

const whoami = async (host: Client) => ((await host.callTool({ name: 'secure__whoami', arguments: {} })).content as any)[0].text as string;
const refreshes = (events: string) => readEvents(events).filter((e) => e.type === 'token' && e.grant === 'refresh_token');

describe('OAuth logins shared through Redis', () => {
  it('one mcpmux login serves both daemons, sealed in Redis; an expired token is refreshed once for both, and both use the new one', async () => {
    const redis = await startRedis();
    const c = await cluster(redis, 'mcpmux:', await authServer({ refreshDelayMs: 1_000 }));
    const [a, b] = await Promise.all([daemon(c), daemon(c)]);
    await waitFor(async () => (await secureState(a)) === 'needs-login' && (await secureState(b)) === 'needs-login', { what: 'needs-login on both', timeoutMs: WAIT_MS });

    // 1. One login, stored in Redis (not in the CLI's state folder); both daemons pick it up without a restart.
    const { stdout, state } = await login(c);
    expect(stdout).toMatch(/^logged in to secure \(scope: mcp:tools\); the login is stored in the shared store \(Redis\)/);
    expect(existsSync(path.join(state, 'oauth', 'secure.json'))).toBe(false);
    const [hostA, hostB] = await Promise.all([hostOn(a), hostOn(b)]);
    const first = await storedLogin(c);
    expect(await whoami(hostA)).toBe(first.login.client.client_id);
    expect(await whoami(hostB)).toBe(first.login.client.client_id);

    // 2. Sealed at rest: no key or value in Redis holds a token; the blob opens for this server only.
    const tokens = [first.login.tokens.access_token, first.login.tokens.refresh_token];
    expect(tokens.every((t) => typeof t === 'string' && t.length > 8)).toBe(true);
    const scan = async () => {
      const keys = (await redis.cli('--scan')).split('\n').filter(Boolean);
      const values = await Promise.all(keys.map(async (k) => ((await redis.cli('TYPE', k)) === 'string' ? redis.cli('GET', k) : redis.cli('DUMP', k))));
      return [...keys, ...values].join('\n');
    };
    const inRedis = await scan();
    expect(inRedis).toContain('mcpmux:login:secure');
    for (const t of tokens) expect(inRedis.includes(t)).toBe(false);
    expect(first.sealed).toMatch(/^v1\.[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(() => openLogin(loginKey(KEY), 'mcpmux:', 'other', first.sealed)).toThrow();
    expect(() => openLogin(loginKey(randomBytes(32).toString('hex')), 'mcpmux:', 'secure', first.sealed)).toThrow();

    // 3. The access token stops working; both daemons call at once. One refresh reaches the
    //    authorization server (it takes a second: the other daemon finds the lock held and waits),
    //    and both calls succeed with the new token.
    expect(refreshes(c.events)).toHaveLength(0);
    await fetch(new URL('/admin/revoke-access', c.url), { method: 'POST' });
    const since = Date.now();
    const [wa, wb] = await Promise.all([whoami(hostA), whoami(hostB)]);
    expect([wa, wb]).toEqual([first.login.client.client_id, first.login.client.client_id]);
    expect(refreshes(c.events)).toEqual([expect.objectContaining({ ok: true })]);
    const now = await storedLogin(c);
    expect(now.login.tokens.access_token).not.toBe(first.login.tokens.access_token);
    const fresh = await fingerprint(now.login.tokens.access_token);
    expect(refreshes(c.events)[0].access).toBe(fresh);
    const calls = readEvents(c.events).filter((e) => e.type === 'mcp' && e.method === 'tools/call' && e.t >= since);
    expect(calls.filter((e) => e.auth === 'ok').map((e) => e.token)).toEqual([fresh, fresh]);
    // Both daemons' first tries were refused (the old token), so both had to refresh: neither asked twice.
    expect(calls.filter((e) => e.auth === 'refused').map((e) => e.token)).toEqual([await fingerprint(first.login.tokens.access_token), await fingerprint(first.login.tokens.access_token)]);
    // One daemon refreshed; the other waited for it and took its token.
    expect([a, b].map((d) => d.stderr().split('access token refreshed').length - 1).sort()).toEqual([0, 1]);
    // The lock is gone once the refresh is over; still nothing plain in Redis.
    expect(await redis.cli('EXISTS', 'mcpmux:lock:refresh:secure')).toBe('0');
    const after = await scan();
    for (const t of [...tokens, now.login.tokens.access_token, now.login.tokens.refresh_token]) expect(after.includes(t)).toBe(false);

    // 4. Logout on any machine: every daemon's upstream needs a login again at its next request.
    const out = await runMux(['logout', 'secure', '--config', c.config], { env: { MCPMUX_STATE_DIR: tempDir(), MCPMUX_STORE_KEY: KEY } });
    expect(out.status, out.stderr).toBe(0);
    expect(out.stdout).toMatch(/^logged out of secure/);
    expect(await redis.cli('EXISTS', 'mcpmux:login:secure')).toBe('0');
    for (const h of [hostA, hostB]) await expect(whoami(h)).rejects.toThrow(/needs a login|not available|unavailable/i);
    // Secrets never reach the logs.
    for (const d of [a, b]) for (const t of [...tokens, now.login.tokens.access_token, KEY]) expect(d.stderr().includes(t)).toBe(false);
  }, 120_000);

  it('a daemon SIGKILLed while it holds the refresh lock holds it no longer than its timeout; another daemon then refreshes', async () => {
    const LOCK_MS = 5_000;
    const redis = await startRedis();
    // The first refresh is never answered: the daemon that asks is killed waiting for it.
    const c = await cluster(redis, 'kill:', await authServer({ stallRefreshes: 1 }));
    const env = { MCPMUX_REFRESH_LOCK_MS: String(LOCK_MS) };
    const [a, b] = await Promise.all([daemon(c, env), daemon(c, env)]);
    await login(c);
    const [hostA, hostB] = await Promise.all([hostOn(a), hostOn(b)]);
    const id = (await storedLogin(c)).login.client.client_id;

    await fetch(new URL('/admin/revoke-access', c.url), { method: 'POST' });
    // Its host's call dies with the daemon (the SDK client only notices at its own timeout: not awaited).
    void whoami(hostA).catch(() => {});
    await waitForEvent(c.events, (e) => e.type === 'token' && e.stalled === true);
    // Daemon A holds the lock, waiting on the authorization server; it dies holding it.
    const lock = 'kill:lock:refresh:secure';
    expect(Number(await redis.cli('PTTL', lock))).toBeGreaterThan(0);
    a.child.kill('SIGKILL');
    await a.exited;
    const left = Number(await redis.cli('PTTL', lock));
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(LOCK_MS);

    // B needs a refresh too: it waits for the dead daemon's lock to lapse (no longer), then refreshes itself.
    const started = Date.now();
    expect(await whoami(hostB)).toBe(id);
    const waited = Date.now() - started;
    expect(waited).toBeGreaterThanOrEqual(left - 250);
    expect(waited).toBeLessThan(LOCK_MS + WAIT_MS);
    expect(refreshes(c.events).map((e) => (e.stalled ? 'stalled' : e.ok))).toEqual(['stalled', true]);
    expect(await redis.cli('EXISTS', lock)).toBe('0');
  }, 120_000);

  it('while Redis is down: "closed" fails a call that needs the login clearly, "open" uses the last login seen; both recover', async () => {
    const redis = await startRedis();
    const as = await authServer();
    const closed = await cluster(redis, 'mcpmux:', as, 'closed');
    const open = await cluster(redis, 'mcpmux:', as, 'open');
    const [dc, dop] = await Promise.all([daemon(closed), daemon(open)]);
    await login(closed);
    const [hc, ho] = await Promise.all([hostOn(dc), hostOn(dop)]);
    const id = (await storedLogin(closed)).login.client.client_id;
    expect(await whoami(hc)).toBe(id);
    expect(await whoami(ho)).toBe(id);

    await redis.kill();
    for (const d of [dc, dop]) await waitFor(() => d.stderr().includes('the shared store (Redis) is unreachable'), { what: 'Redis seen down', timeoutMs: WAIT_MS });
    const refused = await hc.callTool({ name: 'secure__whoami', arguments: {} }).then(
      (r) => JSON.stringify(r),
      (e: Error) => e.message,
    );
    expect(refused).toMatch(/-31007/);
    expect(refused).toMatch(/the login for server secure needs mcpmux's shared store \(Redis\), which is unreachable now/);
    // The call failed, not the upstream: it is no login matter, and nothing restarts.
    expect(await secureState(dc)).toBe('ready');
    expect(await whoami(ho)).toBe(id);

    // Back: no restart needed.
    await redis.restart();
    // A restarted Redis is empty (no persistence in tests): the login is stored again, as after a Redis loss.
    await login(closed);
    // (A new login registers a new client: its id is what whoami answers now.)
    const again = (await storedLogin(closed)).login.client.client_id;
    expect(again).not.toBe(id);
    await waitFor(async () => (await whoami(hc).catch(() => '')) === again, { what: 'the closed daemon serves again', timeoutMs: WAIT_MS });
    expect(await whoami(ho)).toBe(again);
  }, 120_000);

  it('a refresh granted while Redis drops is kept, used, and written back when Redis returns: no new login needed', async () => {
    const redis = await startRedis();
    const c = await cluster(redis, 'drop:', await authServer({ holdRefreshes: 1 }), 'open');
    const d = await daemon(c);
    await login(c);
    const host = await hostOn(d);
    const before = await storedLogin(c);
    const id = before.login.client.client_id;
    expect(await whoami(host)).toBe(id);

    // The access token stops working; the daemon's refresh reaches the authorization server,
    // which holds it while Redis goes away, then grants it (and spends the old refresh token).
    await fetch(new URL('/admin/revoke-access', c.url), { method: 'POST' });
    const call = whoami(host).then((v) => v, (e: Error) => `error: ${e.message}`);
    await waitForEvent(c.events, (e) => e.type === 'token' && e.held === true);
    await redis.kill();
    await waitFor(() => d.stderr().includes('the shared store (Redis) is unreachable'), { what: 'Redis seen down', timeoutMs: WAIT_MS });
    await fetch(new URL('/admin/release-refreshes', c.url), { method: 'POST' });
    // "open": the call goes on with the new token, kept in this daemon.
    expect(await call).toBe(id);
    const granted = refreshes(c.events).find((e) => e.ok === true);
    expect(granted).toBeDefined();
    expect(d.stderr()).toContain('the refreshed login for server secure could not be stored in the shared store');
    expect(d.stderr()).not.toContain('the tokens are kept for the next try');

    // Redis back (empty: no persistence in tests): the new login is written back, not the old one.
    await redis.restart();
    await waitFor(async () => (await redis.cli('EXISTS', 'drop:login:secure')) === '1', { what: 'the login written back', timeoutMs: WAIT_MS });
    const after = await storedLogin(c);
    expect(await fingerprint(after.login.tokens.access_token)).toBe(granted.access);
    expect(after.login.tokens.refresh_token).not.toBe(before.login.tokens.refresh_token);
    expect(after.login.client.client_id).toBe(id);
    // No new login: calls go on, and the next refresh uses the new refresh token (the old one is spent).
    expect(await whoami(host)).toBe(id);
    await fetch(new URL('/admin/revoke-access', c.url), { method: 'POST' });
    expect(await whoami(host)).toBe(id);
    expect(refreshes(c.events).filter((e) => e.ok !== undefined).map((e) => e.ok)).toEqual([true, true]);
  }, 120_000);

  it('a login sealed with another store key is an error on that daemon, said once, and never replaced by it', async () => {
    const redis = await startRedis();
    const c = await cluster(redis, 'keys:', await authServer());
    const good = await daemon(c);
    await login(c);
    await hostOn(good);
    const sealed = (await storedLogin(c)).sealed;
    // A daemon whose store.secretEnv holds another value.
    const other = await daemon(c, { MCPMUX_STORE_KEY: randomBytes(32).toString('hex') });
    const said = 'the login stored for server secure was sealed with another store key: check store.secretEnv on every daemon';
    await waitFor(() => other.stderr().includes(said), { what: 'the other key said', timeoutMs: WAIT_MS });
    // Not "no login" (which a client-credentials server would answer with a token of its own, sealed with its key).
    expect(await secureState(other)).not.toBe('ready');
    const st = (await status(other)).upstreams.find((u: any) => u.name === 'secure');
    expect(JSON.stringify(st)).toContain('sealed with another store key');
    // Said once, however often it is asked; the good daemon's login is untouched.
    await new Promise((r) => setTimeout(r, 1_500));
    // (The upstream's own failures, retried with back-off, name it as their reason.)
    expect(other.stderr().split('\n').filter((l) => l.includes(`"msg":"${said}`))).toHaveLength(1);
    expect(await redis.cli('GET', 'keys:login:secure')).toBe(sealed);
  }, 120_000);

  it('without store.secretEnv logins stay in each daemon\'s state folder, and the daemon says so once', async () => {
    const redis = await startRedis();
    const as = await authServer();
    const config = await writeConfig({ store: { redis: { url: redis.url, keyPrefix: 'nokey:' } }, mcpServers: { secure: { url: as.url } } });
    const state = tempDir();
    const d = await startDaemon(config, { MCPMUX_STATE_DIR: state });
    await waitFor(() => d.stderr().includes("OAuth logins stay in this daemon's state folder"), { what: 'the info line' });
    const r = await runMux(['login', 'secure', '--config', config], { env: { MCPMUX_STATE_DIR: state, BROWSER } });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`the login is stored in ${path.join(state, 'oauth', 'secure.json')}`);
    expect(existsSync(path.join(state, 'oauth', 'secure.json'))).toBe(true);
    expect(await redis.cli('--scan', '--pattern', 'nokey:login:*')).toBe('');
    await hostOn(d);
    expect(d.stderr().split("OAuth logins stay in this daemon's state folder").length - 1).toBe(1);
  }, 120_000);
});
