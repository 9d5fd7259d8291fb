// Per-client upstream logins (issue 22, point 1): a server with "oauth": {"perClient": true}
// keeps one login per host client of listen.auth.tokens, and one connection per client that only
// that client's sessions use. Real `mcpmux serve`, real SDK hosts for two clients (ci, ops), and
// the OAuth fixture (test/fixtures/oauth-upstream.mjs: authorization server and protected MCP
// server) logging every request with a fingerprint of the bearer token it carried, and whose
// `whoami` tool answers the OAuth client its token was issued to: each `mcpmux login` registers
// its own client, so an answer names whose login made the call.

import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { startRedis, stopAllRedis } from './helpers/redis.js';
import { loginKey as sealKey, openLogin } from '../src/upstream/oauth/seal.js';
import { awaitJsonLine, fixture, readEvents, ROOT, runMux, startMux, tempDir, tempFile, waitFor, writeConfig } from './helpers/harness.js';

const OAUTH = path.join(ROOT, 'test/fixtures/oauth-upstream.mjs');
const BROWSER = `${process.execPath} ${path.join(ROOT, 'test/fixtures/headless-browser.mjs')}`;
const TOKENS = { MUX_T_CI: 'perclient-ci-token-1', MUX_T_OPS: 'perclient-ops-token-2' };
const IDLE_MS = 3_000;

let server: ChildProcess;
let url: string;
let events: string;
let state: string;
let config: string;
let d: Daemon;
const hosts: Client[] = [];

beforeAll(async () => {
  events = tempFile('perclient.jsonl');
  // Stateful: sessions, a GET stream, and a tool that asks its client for a sampling unprompted.
  server = spawn(process.execPath, [OAUTH, JSON.stringify({ events, stateful: true })], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  server.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  url = await awaitJsonLine(server.stdout!, exited, (j) => j.url as string | undefined, { ms: 15_000, what: 'the OAuth fixture URL', log: () => err });
  state = tempDir();
  config = await writeConfig({
    mcpServers: { s: { url, oauth: { perClient: true } }, fx: fixture({ name: 'fx' }) },
    listen: { auth: { tokens: [{ client: 'ci', tokenEnv: 'MUX_T_CI' }, { client: 'ops', tokenEnv: 'MUX_T_OPS' }] } },
  });
  // A short idle grace: the test sees ci's connection close soon after its last session (and
  // long enough for what the upstream asks meanwhile).
  d = await startDaemon(config, { MCPMUX_STATE_DIR: state, MCPMUX_PER_CLIENT_IDLE_MS: String(IDLE_MS), ...TOKENS });
});

afterAll(async () => {
  await Promise.allSettled(hosts.map((h) => h.close()));
  await stopAllDaemons();
  server?.kill('SIGKILL');
  await stopAllRedis();
});

const cli = (args: string[]) => runMux([...args, '--config', config], { env: { MCPMUX_STATE_DIR: state, BROWSER, ...TOKENS } });
const status = async () => (await fetch(`${d.base}/status`, { headers: { authorization: `Bearer ${TOKENS.MUX_T_OPS}` } })).json() as Promise<any>;
/** The per-client connections to `s`, by client. */
const conns = async (): Promise<Record<string, any[]>> => {
  const out: Record<string, any[]> = {};
  for (const u of (await status()).upstreams) if (u.name === 's') (out[u.client ?? '(shared)'] ??= []).push(u);
  return out;
};
const stateOf = async (client: string) => (await conns())[client]?.map((u) => u.state).join(',');
const fp = (token: string) => createHash('sha256').update(token).digest('hex').slice(0, 12);
const loginFile = (client: string) => path.join(state, 'oauth', 'clients', client, 's.json');
const stored = (client: string) => JSON.parse(readFileSync(loginFile(client), 'utf8'));

const transports = new Map<Client, StreamableHTTPClientTransport>();
/** Sampling requests each host was asked (every host can take them: a misrouted one would be answered). */
const sampled = new Map<Client, number>();
async function host(token: string): Promise<Client> {
  const c = new Client({ name: 'host', version: '0' }, { capabilities: { sampling: {} } });
  sampled.set(c, 0);
  c.setRequestHandler(CreateMessageRequestSchema, async () => {
    sampled.set(c, sampled.get(c)! + 1);
    return { role: 'assistant', content: { type: 'text', text: `answered by ${token === TOKENS.MUX_T_CI ? 'ci' : 'ops'}` }, model: 'test' };
  });
  const t = new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: { authorization: `Bearer ${token}` } } });
  await c.connect(t);
  hosts.push(c);
  transports.set(c, t);
  return c;
}
/** Ends the host's session at the daemon (DELETE), as a host that is done does. */
async function leave(c: Client): Promise<void> {
  await transports.get(c)!.terminateSession();
  await c.close();
}
const names = async (c: Client) => (await c.listTools()).tools.map((t) => t.name);
const whoami = async (c: Client) => ((await c.callTool({ name: 's__whoami', arguments: {} })).content as any)[0].text as string;

describe('perClient OAuth upstreams', () => {
  it('login refuses a perClient server without --client, and a client the config does not have', async () => {
    const bare = await cli(['login', 's', '--no-browser']);
    expect(bare.status).toBe(2);
    expect(bare.stderr).toBe('mcpmux: server s keeps one login per client: run mcpmux login s --client C, with C one of: ci, ops, anonymous\n');
    const typo = await cli(['login', 's', '--client', 'cj', '--no-browser']);
    expect(typo.status).toBe(2);
    expect(typo.stderr).toBe('mcpmux: no client named "cj" (did you mean "ci"?); clients: ci, ops, anonymous\n');
    const notPer = await runMux(['login', 'plain', '--client', 'ci', '--config', await writeConfig({ mcpServers: { plain: { url } } })], { env: { MCPMUX_STATE_DIR: state } });
    expect(notPer.status).toBe(2);
    expect(notPer.stderr).toMatch(/server plain has one login for all clients/);
  }, 60_000);

  it("each client's calls carry only its own token; a client without a login sees the server as needing one for itself alone", async () => {
    const ci = await host(TOKENS.MUX_T_CI);
    const ops = await host(TOKENS.MUX_T_OPS);
    // 1. No login yet: each client has its own connection, each needs a login, said per client.
    await waitFor(async () => (await stateOf('ci')) === 'needs-login' && (await stateOf('ops')) === 'needs-login', { what: 'ci and ops needs-login', timeoutMs: 15_000 });
    expect((await conns())['ci']![0].lastError).toBe('needs a login for client ci: run mcpmux login s --client ci');
    expect((await conns())['(shared)']).toBeUndefined();

    // 2. ci logs in (the browser step done headlessly): stored under oauth/clients/ci/, 0600 in 0700.
    const login = await cli(['login', 's', '--client', 'ci']);
    expect(login.status, login.stderr).toBe(0);
    expect(login.stdout).toBe(`logged in to s for client ci (scope: mcp:tools); the login is stored in ${loginFile('ci')}\n`);
    expect(statSync(loginFile('ci')).mode & 0o777).toBe(0o600);
    expect(statSync(path.dirname(loginFile('ci'))).mode & 0o777).toBe(0o700);
    expect(statSync(path.join(state, 'oauth', 'clients')).mode & 0o777).toBe(0o700);
    const ciLogin = stored('ci');

    // 3. The daemon restarts ci's connection only: ci sees and calls the tools, as its own OAuth client.
    await waitFor(async () => (await stateOf('ci')) === 'ready', { what: "ci's connection ready", timeoutMs: 15_000 });
    await waitFor(async () => (await names(ci)).includes('s__whoami'), { what: 'ci lists s__whoami' });
    expect(await whoami(ci)).toBe(ciLogin.client.client_id);
    // ops: still needs a login, the tool is not in its list, a call by name says what to run.
    expect(await stateOf('ops')).toBe('needs-login');
    const opsNames = await names(ops);
    expect(opsNames).toContain('fx__echo');
    expect(opsNames).not.toContain('s__whoami');
    const refused = await ops.callTool({ name: 's__whoami', arguments: {} }).then(
      () => 'answered',
      (e: Error) => e.message,
    );
    expect(refused).toMatch(/needs a login for client ops: run mcpmux login s --client ops/);
    // mcpmux status: a row per client's connection, each with its state.
    const shown = await runMux(['status', '--url', d.base], { env: { MCPMUX_TOKEN: TOKENS.MUX_T_CI } });
    expect(shown.status, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/^s \(client ci\) +ready /m);
    expect(shown.stdout).toMatch(/^s \(client ops\) +needs-login .*needs a login for client ops: run mcpmux login s --client ops$/m);

    // 4. ops logs in: its own login, its own connection, its own OAuth client.
    const opsIn = await cli(['login', 's', '--client', 'ops']);
    expect(opsIn.status, opsIn.stderr).toBe(0);
    await waitFor(async () => (await stateOf('ops')) === 'ready', { what: "ops's connection ready", timeoutMs: 15_000 });
    const opsLogin = stored('ops');
    expect(opsLogin.client.client_id).not.toBe(ciLogin.client.client_id);
    await waitFor(async () => (await names(ops)).includes('s__whoami'), { what: 'ops lists s__whoami' });
    expect(await whoami(ops)).toBe(opsLogin.client.client_id);
    expect(await whoami(ci)).toBe(ciLogin.client.client_id);

    // 5. The upstream's own record: every call carried the caller's token, never the other's.
    // (The fixture writes its line as its answer finishes: perhaps a moment after the host has it.)
    const callsSeen = () => readEvents(events).filter((e) => e.type === 'mcp' && e.method === 'tools/call' && e.auth === 'ok');
    await waitFor(() => callsSeen().length === 3, { what: 'three calls in the upstream record' });
    const calls = callsSeen();
    const ciFp = fp(ciLogin.tokens.access_token);
    const opsFp = fp(opsLogin.tokens.access_token);
    expect(calls.map((c) => c.token)).toEqual([ciFp, opsFp, ciFp]);

    // 6. A second ci session shares ci's connection: no new connection, no second initialize with ci's token.
    const ci2 = await host(TOKENS.MUX_T_CI);
    expect(await whoami(ci2)).toBe(ciLogin.client.client_id);
    expect((await conns())['ci']).toHaveLength(1);
    expect(readEvents(events).filter((e) => e.type === 'mcp' && e.method === 'initialize' && e.token === ciFp)).toHaveLength(1);

    // 7. A refresh for ci touches ci's login only: ops's stored tokens are byte for byte the same.
    const opsBefore = readFileSync(loginFile('ops'), 'utf8');
    await fetch(new URL('/admin/revoke-access', url), { method: 'POST' });
    expect(await whoami(ci)).toBe(ciLogin.client.client_id);
    await waitFor(() => readEvents(events).filter((e) => e.type === 'token' && e.grant === 'refresh_token' && e.ok).length === 1, { what: "ci's refresh" });
    expect(stored('ci').tokens.access_token).not.toBe(ciLogin.tokens.access_token);
    expect(readFileSync(loginFile('ops'), 'utf8')).toBe(opsBefore);

    // 8. No token in anything mcpmux wrote or answered.
    const written = [d.stderr(), login.stdout, login.stderr, opsIn.stdout, opsIn.stderr, JSON.stringify(await status())];
    for (const t of [ciLogin.tokens.access_token, ciLogin.tokens.refresh_token, opsLogin.tokens.access_token, stored('ci').tokens.access_token]) {
      for (const text of written) expect(text.includes(t)).toBe(false);
    }

    // 9. What ci's connection asks unprompted goes to ci's sessions only: with one ci session
    // left (and ops's open too), to that one.
    await leave(ci);
    expect((await conns())['ci']).toHaveLength(1);
    const asked = () => readEvents(events).filter((e) => e.type === 'asked');
    await ci2.callTool({ name: 's__askLater', arguments: { delayMs: 200 } });
    await waitFor(() => asked().length === 1, { what: 'the first unprompted sampling answered' });
    expect(asked()[0]).toMatchObject({ token: fp(stored('ci').tokens.access_token), ok: true, text: 'answered by ci' });
    expect([sampled.get(ci2), sampled.get(ops)]).toEqual([1, 0]);

    // 10. ci's last session ends while ci's connection has a question on the way: nobody of ci's
    // is there to take it, and ops (now the only session) is never asked: refused.
    await ci2.callTool({ name: 's__askLater', arguments: { delayMs: 1_000 } });
    await leave(ci2);
    expect(asked(), 'ci2 left before the question came').toHaveLength(1);
    await waitFor(() => asked().length === 2, { what: 'the second unprompted sampling refused' });
    expect(asked()[1]).toMatchObject({ ok: false });
    expect(sampled.get(ops)).toBe(0);
    // The connection closes after the idle grace; ops's stays.
    await waitFor(async () => (await conns())['ci'] === undefined, { what: "ci's connection closed", timeoutMs: 15_000 });
    expect(await stateOf('ops')).toBe('ready');
    expect(await whoami(ops)).toBe(opsLogin.client.client_id);

    // 11. ops logs out: its login is revoked and gone, ci's stays; ops needs a login again.
    const out = await cli(['logout', 's', '--client', 'ops']);
    expect(out.status, out.stderr).toBe(0);
    expect(out.stdout).toBe('logged out of s for client ops (tokens revoked)\n');
    expect(existsSync(loginFile('ops'))).toBe(false);
    expect(existsSync(loginFile('ci'))).toBe(true);
    await ops.callTool({ name: 's__whoami', arguments: {} }).catch(() => {});
    await waitFor(async () => (await stateOf('ops')) === 'needs-login', { what: 'ops needs a login again', timeoutMs: 15_000 });
  }, 120_000);

  it('in stdio every session is the client anonymous: one connection, with the login of plain mcpmux login', async () => {
    const home = tempDir();
    const file = await writeConfig({ mcpServers: { s: { url, oauth: { perClient: true } } } });
    const env = { MCPMUX_STATE_DIR: home, BROWSER };
    // No client in the config: no --client needed, and the login is the server's plain one.
    const login = await runMux(['login', 's', '--config', file], { env });
    expect(login.status, login.stderr).toBe(0);
    expect(login.stdout).toBe(`logged in to s (scope: mcp:tools); the login is stored in ${path.join(home, 'oauth', 's.json')}\n`);
    const mux = await startMux(file, { env });
    try {
      const text = ((await mux.client.callTool({ name: 's__whoami', arguments: {} })).content as any)[0].text;
      expect(text).toBe(JSON.parse(readFileSync(path.join(home, 'oauth', 's.json'), 'utf8')).client.client_id);
    } finally {
      await mux.close();
    }
  }, 60_000);

  it('a reload that adds a perClient server opens it for the clients connected; one that removes it closes theirs', async () => {
    // The same state folder: ci's login from the test above is there.
    const base = { mcpServers: { fx: fixture({ name: 'fx' }) }, listen: { auth: { tokens: [{ client: 'ci', tokenEnv: 'MUX_T_CI' }, { client: 'ops', tokenEnv: 'MUX_T_OPS' }] } } };
    const file = await writeConfig(base);
    const r = await startDaemon(file, { MCPMUX_STATE_DIR: state, ...TOKENS });
    const st = async () => (await fetch(`${r.base}/status`, { headers: { authorization: `Bearer ${TOKENS.MUX_T_CI}` } })).json() as Promise<any>;
    const reload = async (cfg: object) => {
      const before = (await st()).lastReload?.at;
      writeFileSync(file, JSON.stringify(cfg, null, 2));
      r.child.kill('SIGHUP');
      const last = await waitFor(async () => {
        const l = (await st()).lastReload;
        return l && l.at !== before && l;
      }, { what: 'the reload done', timeoutMs: 20_000 });
      expect(last).toMatchObject({ result: 'applied' });
    };
    const c = new Client({ name: 'host', version: '0' });
    const t = new StreamableHTTPClientTransport(new URL(r.url), { requestInit: { headers: { authorization: `Bearer ${TOKENS.MUX_T_CI}` } } });
    await c.connect(t);
    hosts.push(c);
    try {
      await reload({ ...base, mcpServers: { ...base.mcpServers, s: { url, oauth: { perClient: true } } } });
      await waitFor(async () => (await st()).upstreams.some((u: any) => u.name === 's' && u.client === 'ci' && u.state === 'ready'), { what: "ci's connection after the reload", timeoutMs: 15_000 });
      // Only ci has a session: ops gets no connection of its own until it comes.
      expect((await st()).upstreams.filter((u: any) => u.name === 's').map((u: any) => u.client)).toEqual(['ci']);
      await waitFor(async () => (await names(c)).includes('s__whoami'), { what: 'ci lists s__whoami after the reload' });
      expect(await whoami(c)).toBe(stored('ci').client.client_id);
      await reload(base);
      await waitFor(async () => !(await st()).upstreams.some((u: any) => u.name === 's'), { what: "ci's connection closed by the reload" });
    } finally {
      await t.terminateSession().catch(() => {});
      await c.close();
      await r.stop();
    }
  }, 90_000);

  it('per-client connections count against limits.maxSessionUpstreams: a client whose first session would pass it is refused, later sessions of a client that has its connection are not', async () => {
    const file = await writeConfig({
      mcpServers: { s: { url, oauth: { perClient: true } } },
      listen: { auth: { tokens: [{ client: 'ci', tokenEnv: 'MUX_T_CI' }, { client: 'ops', tokenEnv: 'MUX_T_OPS' }] } },
      limits: { maxSessionUpstreams: 1 },
    });
    const l = await startDaemon(file, { MCPMUX_STATE_DIR: state, ...TOKENS });
    const open = async (token: string) => {
      const c = new Client({ name: 'host', version: '0' });
      hosts.push(c);
      await c.connect(new StreamableHTTPClientTransport(new URL(l.url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      return c;
    };
    try {
      await open(TOKENS.MUX_T_CI);
      await open(TOKENS.MUX_T_CI);
      const refused = await open(TOKENS.MUX_T_OPS).then(() => 'connected', (e: Error) => e.message);
      expect(refused).toMatch(/Too many per-session upstream connections: 1 running, this session needs 1 \(limits.maxSessionUpstreams = 1; per-client connections count too\)/);
    } finally {
      await l.stop();
    }
  }, 60_000);

  it('with the shared store, each client\'s login is its own sealed Redis entry, and a daemon uses it for that client only', async () => {
    const redis = await startRedis();
    const KEY = 'k'.repeat(40);
    const file = await writeConfig({
      mcpServers: { s: { url, oauth: { perClient: true } } },
      listen: { auth: { tokens: [{ client: 'ci', tokenEnv: 'MUX_T_CI' }, { client: 'ops', tokenEnv: 'MUX_T_OPS' }] } },
      store: { redis: { url: redis.url, keyPrefix: 'pc:' }, secretEnv: 'MCPMUX_STORE_KEY' },
    });
    const env = { MCPMUX_STORE_KEY: KEY, ...TOKENS };
    const r = await runMux(['login', 's', '--client', 'ci', '--config', file], { env: { ...env, MCPMUX_STATE_DIR: tempDir(), BROWSER } });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^logged in to s for client ci \(scope: mcp:tools\); the login is stored in the shared store \(Redis\)/);
    // Its own key, sealed to it: not the server's plain one, and it opens under that key only.
    const sealed = await redis.cli('GET', 'pc:login:s@ci');
    expect(sealed).toMatch(/^v1\./);
    expect((await redis.cli('EXISTS', 'pc:login:s')).trim()).toBe('0');
    const login = openLogin(sealKey(KEY), 'pc:', 's@ci', sealed.trim());
    expect(() => openLogin(sealKey(KEY), 'pc:', 's@ops', sealed.trim())).toThrow();
    expect(sealed.includes(login.tokens.access_token)).toBe(false);
    const rd = await startDaemon(file, { MCPMUX_STATE_DIR: tempDir(), ...env });
    try {
      const c = new Client({ name: 'host', version: '0' });
      hosts.push(c);
      await c.connect(new StreamableHTTPClientTransport(new URL(rd.url), { requestInit: { headers: { authorization: `Bearer ${TOKENS.MUX_T_CI}` } } }));
      await waitFor(async () => (await names(c)).includes('s__whoami'), { what: 'ci lists s__whoami from the shared login', timeoutMs: 15_000 });
      expect(await whoami(c)).toBe(login.client.client_id);
    } finally {
      await rd.stop();
    }
  }, 60_000);
});
