// Remote upstreams behind OAuth 2.1 (issue 14), against a real authorization server and
// protected MCP server built from the official SDK's auth pieces (test/fixtures/oauth-upstream.mjs):
// a 401 puts the upstream in needs-login; `mcpmux login` (the browser step driven headlessly
// through $BROWSER) discovers, registers, authorizes with PKCE and stores the tokens 0600; the
// running daemon picks the login up and hosts hear list_changed; an expired access token is
// refreshed unseen; a revoked refresh token sends the upstream back to needs-login.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { awaitJsonLine, fixture, MUX_BIN, readEvents, ROOT, runMux, tempDir, tempFile, waitFor, writeConfig } from './helpers/harness.js';

const OAUTH = path.join(ROOT, 'test/fixtures/oauth-upstream.mjs');
const BROWSER = `${process.execPath} ${path.join(ROOT, 'test/fixtures/headless-browser.mjs')}`;

let server: ChildProcess;
let url: string;
let events: string;
let state: string;
let config: string;
let d: Daemon;

beforeAll(async () => {
  events = tempFile('oauth.jsonl');
  server = spawn(process.execPath, [OAUTH, JSON.stringify({ events })], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  server.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  url = await awaitJsonLine(server.stdout!, exited, (j) => j.url as string | undefined, { ms: 15_000, what: 'the OAuth fixture URL', log: () => err });
  state = tempDir();
  config = await writeConfig({ mcpServers: { secure: { url }, fx: fixture({ name: 'fx' }) } });
  d = await startDaemon(config, { MCPMUX_STATE_DIR: state });
});

afterAll(async () => {
  await stopAllDaemons();
  server?.kill('SIGKILL');
});

// Not spawnSync, which stops this process's event loop while the CLI runs: the host's keep-alive
// sockets to the daemon would not be seen closing meanwhile, and the next request on one fails.
const cli = (args: string[]) => runMux([...args, '--config', config], { env: { MCPMUX_STATE_DIR: state, BROWSER } });
const status = async () => (await fetch(`${d.base}/status`)).json() as Promise<any>;
const secure = async () => (await status()).upstreams.find((u: any) => u.name === 'secure');
const admin = (what: 'revoke-access' | 'revoke-all') => fetch(new URL(`/admin/${what}`, url), { method: 'POST' });

describe('OAuth upstreams', () => {
  it('needs-login, then login, then list_changed and calls; refresh unseen; a revoked refresh token is needs-login again; logout', async () => {
    // 1. From a clean state the protected upstream needs a login; the other one serves.
    await waitFor(async () => (await secure())?.state === 'needs-login', { what: 'needs-login', timeoutMs: 15_000 });
    expect((await secure()).lastError).toBe('needs a login: run mcpmux login secure');
    await waitFor(() => d.stderr().includes('server secure needs a login; run: mcpmux login secure'), { what: 'the login hint logged' });
    expect(d.stderr().split('needs a login; run').length - 1).toBe(1);

    let changes = 0;
    const host = new Client({ name: 'host', version: '0' });
    host.setNotificationHandler(ToolListChangedNotificationSchema, async () => void changes++);
    await host.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    const names = async () => (await host.listTools()).tools.map((t) => t.name);
    expect(await names()).toContain('fx__echo');
    expect((await names()).some((n) => n.startsWith('secure__'))).toBe(false);
    const refused = await host.callTool({ name: 'secure__whoami', arguments: {} }).catch((e: Error) => e.message);
    expect(refused).toMatch(/needs a login: run mcpmux login secure/);

    // 2. The login, with the browser step done headlessly.
    const login = await cli(['login', 'secure']);
    expect(login.status, login.stderr).toBe(0);
    expect(login.stdout).toMatch(/^logged in to secure \(scope: mcp:tools\); the login is stored in .*secure\.json\n$/);
    expect(login.stderr).toMatch(/code_challenge_method=S256/);
    expect(login.stderr).toMatch(/resource=http%3A%2F%2F127\.0\.0\.1%3A\d+%2Fmcp/);
    const file = path.join(state, 'oauth', 'secure.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const stored = JSON.parse(readFileSync(file, 'utf8'));
    expect(stored).toMatchObject({ server: url, resource: url });

    // 3. Without a restart: the daemon picks it up, hosts hear of the new tools, calls work.
    await waitFor(() => changes > 0, { what: 'tools/list_changed after the login', timeoutMs: 15_000 });
    await waitFor(async () => (await names()).includes('secure__whoami'), { what: 'the protected tools listed' });
    const who = await host.callTool({ name: 'secure__whoami', arguments: {} });
    expect((who.content as any)[0].text).toBe(stored.client.client_id);

    // 4. The access token stops working: refreshed once, retried, the host sees nothing.
    await admin('revoke-access');
    expect(((await host.callTool({ name: 'secure__whoami', arguments: {} })).content as any)[0].text).toBe(stored.client.client_id);
    expect(readEvents(events).filter((e) => e.type === 'token' && e.grant === 'refresh_token' && e.ok)).toHaveLength(1);

    // 5. Everything revoked: the refresh is refused, the upstream needs a login again, said clearly.
    const restartsBefore = (await secure()).restarts;
    await admin('revoke-all');
    const failed = await host.callTool({ name: 'secure__whoami', arguments: {} }).catch((e: Error) => e.message);
    expect(JSON.stringify(failed)).toMatch(/needs a login|not available/);
    await waitFor(async () => (await secure())?.state === 'needs-login', { what: 'needs-login again', timeoutMs: 15_000 });
    await waitFor(() => d.stderr().includes('the token refresh was refused; run: mcpmux login secure'), { what: 'the refusal logged' });
    // One refused refresh, and the upstream waits for a person: no refresh-restart loop.
    await waitFor(() => readEvents(events).filter((e) => e.type === 'token' && e.grant === 'refresh_token' && e.ok === false).length === 1, { what: 'one refused refresh' });
    expect((await secure()).restarts).toBe(restartsBefore);

    // 6. No token appears in anything mcpmux wrote or answered.
    const tokens = [stored.tokens.access_token, stored.tokens.refresh_token];
    const written = [d.stderr(), login.stdout, login.stderr, JSON.stringify(await status()), await (await fetch(`${d.base}/metrics`)).text()];
    for (const t of tokens) for (const text of written) expect(text.includes(t)).toBe(false);

    // 7. Logout forgets the login.
    const out = await cli(['logout', 'secure']);
    expect(out.status, out.stderr).toBe(0);
    expect(out.stdout).toBe('logged out of secure\n');
    expect(existsSync(file)).toBe(false);
    // check --probe says so too.
    const probe = await cli(['check', '--probe']);
    expect(probe.stdout + probe.stderr).toMatch(/secure.*needs a login: run mcpmux login secure/);
    await host.close();
  }, 90_000);

  it('a server refusing a configured Authorization header (an API key) is an error retried with backoff, not a login matter', async () => {
    const keyed = await writeConfig({ mcpServers: { keyed: { url, headers: { Authorization: 'Bearer not-a-token-it-knows' }, restart: { maxRetries: 5, backoffMs: 50 } } } });
    const k = await startDaemon(keyed, { MCPMUX_STATE_DIR: tempDir() });
    await waitFor(async () => ((await (await fetch(`${k.base}/status`)).json()).upstreams[0].restarts as number) >= 1, { what: 'a restart scheduled', timeoutMs: 15_000 });
    const up = (await (await fetch(`${k.base}/status`)).json()).upstreams[0];
    expect(up.state).not.toBe('needs-login');
    expect(up.lastError).toMatch(/401/);
    expect(k.stderr()).not.toContain('needs a login');
    await k.stop();
  });

  it('login refuses a server that is not a URL server, or one that asks for no login', async () => {
    const notRemote = await cli(['login', 'fx']);
    expect(notRemote.status).toBe(2);
    expect(notRemote.stderr).toMatch(/not a Streamable HTTP server/);
    const open = await writeConfig({ mcpServers: { plain: { url: `${d.url}` } } });
    const r = await runMux(['login', 'plain', '--config', open, '--no-browser'], { env: { MCPMUX_STATE_DIR: state } });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/asks for no login/);
  }, 60_000);
});

describe('OAuth upstreams: an access token close to its expiry', () => {
  it('is refreshed before it is sent (no 401 first): the host sees nothing', async () => {
    const ev = tempFile('oauth-short.jsonl');
    // Tokens that live 30 s: inside mcpmux's one-minute margin, so every use refreshes first.
    const short = spawn(process.execPath, [OAUTH, JSON.stringify({ events: ev, ttlSeconds: 30 })], { stdio: ['pipe', 'pipe', 'pipe'] });
    const exited = new Promise<void>((resolve) => short.once('exit', () => resolve()));
    try {
      const shortUrl = await awaitJsonLine(short.stdout!, exited, (j) => j.url as string | undefined, { ms: 15_000, what: 'the OAuth fixture URL', log: () => '' });
      const dir = tempDir();
      const cfg = await writeConfig({ mcpServers: { short: { url: shortUrl } } });
      const env = { ...process.env, MCPMUX_STATE_DIR: dir, BROWSER };
      const login = spawnSync(process.execPath, [MUX_BIN, 'login', 'short', '--config', cfg], { env, encoding: 'utf8', timeout: 60_000 });
      expect(login.status, login.stderr).toBe(0);
      const refusedBefore = readEvents(ev).filter((e) => e.type === 'mcp' && e.auth === 'refused').length;
      const tools = spawnSync(process.execPath, [MUX_BIN, 'tools', '--config', cfg, '--json'], { env, encoding: 'utf8', timeout: 60_000 });
      expect(JSON.parse(tools.stdout).map((t: { name: string }) => t.name)).toContain('short__whoami');
      expect(readEvents(ev).filter((e) => e.type === 'token' && e.grant === 'refresh_token' && e.ok).length).toBeGreaterThan(0);
      expect(readEvents(ev).filter((e) => e.type === 'mcp' && e.auth === 'refused').length).toBe(refusedBefore);
    } finally {
      short.kill('SIGKILL');
    }
  }, 60_000);
});
