// The grants that need no person (issue 22), against a loopback IdP, authorization server and
// MCP servers that require its bearer (test/fixtures/grants-as.mjs, jose-signed tokens):
// Cross-App Access (jwt_bearer) through the real `mcpmux stdio` with a static ID token; token
// exchange through OAuthTokens with a host-subject function (the serve path that hands it the
// host's OIDC JWT is H1's and H2's); machine tokens renewed before they expire with discovery
// done once; refusals that fail the call with what to do, once, and no token anywhere; and
// the file lock that lets two processes refresh one login only once.

import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RemoteServerConfig } from '../src/config/types.js';
import { OAuthTokens } from '../src/upstream/oauth/tokens.js';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { awaitJsonLine, closeAll, MUX_BIN, readEvents, ROOT, runMux, startMux, tempDir, tempFile, waitFor, writeConfig } from './helpers/harness.js';
import { GRANTS, type GrantsFx, type GrantsStats } from './helpers/grants-fixture.js';

const OAUTH = path.join(ROOT, 'test/fixtures/oauth-upstream.mjs');

const children: ChildProcess[] = [];
let fx: GrantsFx;

async function startFixture(script: string, opts: object): Promise<{ child: ChildProcess; info: any }> {
  const child = spawn(process.execPath, [script, JSON.stringify(opts)], { stdio: ['pipe', 'pipe', 'pipe'] });
  children.push(child);
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const info = await awaitJsonLine(child.stdout!, exited, (j) => (j.url ? j : undefined), { ms: 15_000, what: `${path.basename(script)} URL`, log: () => err });
  return { child, info };
}

beforeAll(async () => {
  fx = (await startFixture(GRANTS, { ttl: { short: 2, 'cc-short': 2 } })).info as GrantsFx;
});

afterAll(async () => {
  await closeAll();
  await stopAllDaemons();
  for (const c of children) c.kill('SIGKILL');
});

const stats = async (): Promise<GrantsStats> => (await fetch(`${fx.url}/admin/stats`)).json() as Promise<GrantsStats>;
const sign = async (claims: { sub: string; aud?: string; expSeconds?: number; wrongKey?: boolean }): Promise<string> =>
  ((await (await fetch(`${fx.url}/admin/sign`, { method: 'POST', body: JSON.stringify(claims) })).json()) as { jwt: string }).jwt;
const xaa = (name: string, idToken = '${XAA_ID_TOKEN}', extra: object = {}) => ({
  url: `${fx.url}/mcp/${name}`,
  oauth: { grant: 'jwt_bearer', clientId: 'mux', clientSecret: '${XAA_CLIENT_SECRET}', idp: { issuer: fx.idpIssuer, tokenEndpoint: fx.idpTokenEndpoint, clientId: fx.idpClientId, idToken }, ...extra },
  restart: { maxRetries: 3, backoffMs: 50 },
});
const text = (r: any) => (r.content as Array<{ text: string }>)[0]!.text;

describe('Cross-App Access (jwt_bearer) through mcpmux stdio', () => {
  it('exchanges the ID token for an ID-JAG at the IdP and that for the server token; the server sees only its own bearer', async () => {
    const idToken = await sign({ sub: 'alice' });
    const before = await stats();
    // The second finds the IdP's token endpoint from its issuer (OpenID discovery).
    const discovered = xaa('xaa-disc');
    const { tokenEndpoint: _, ...idpByIssuer } = discovered.oauth.idp;
    const config = await writeConfig({ mcpServers: { xaa: xaa('xaa'), 'xaa-disc': { ...discovered, oauth: { ...discovered.oauth, idp: idpByIssuer } } } });
    const mux = await startMux(config, { env: { MCPMUX_STATE_DIR: tempDir(), XAA_ID_TOKEN: idToken, XAA_CLIENT_SECRET: 'mux-secret' } });
    const { tools } = await mux.client.listTools();
    expect(tools.map((t) => t.name).sort(), mux.stderr()).toEqual(['xaa-disc__whoami', 'xaa__whoami']);
    // The server's token names the person the IdP vouched for.
    expect(text(await mux.client.callTool({ name: 'xaa__whoami', arguments: {} }))).toBe('alice');
    expect(text(await mux.client.callTool({ name: 'xaa__whoami', arguments: {} }))).toBe('alice');
    expect(text(await mux.client.callTool({ name: 'xaa-disc__whoami', arguments: {} }))).toBe('alice');
    const s = await stats();
    const tokens = s.tokens.slice(before.tokens.length);
    // One ID-JAG, one token per server: a token that lives an hour is kept, not asked for per call.
    expect(tokens.map((t) => `${t.kind}:${t.ok}`).sort()).toEqual(['idp:true', 'idp:true', 'jwt_bearer:true', 'jwt_bearer:true']);
    expect(s.discovery.slice(before.discovery.length)).toContain('/idp/.well-known/openid-configuration');
    const seen = s.mcp.slice(before.mcp.length).filter((m) => m.server === '/mcp/xaa');
    // The discovery probe (no token yet: its 401 names the resource metadata), then only good tokens.
    expect(seen.filter((m) => m.verdict !== 'ok').map((m) => m.verdict)).toEqual(['missing']);
    // Only the server's own bearer: never the ID token (nor an ID-JAG, which is a JWT too).
    for (const m of seen.filter((m) => m.authorization !== null)) expect(m.authorization).toMatch(/^Bearer at-/);
    expect(mux.stderr()).not.toContain(idToken);
    await mux.close();
  }, 60_000);
});

describe('a grant that acts for the host, without a host identity', () => {
  it('mcpmux stdio with jwt_bearer and no idp.idToken: needs-login, nothing asked of the IdP, and login says why there is none', async () => {
    const before = await stats();
    const entry = xaa('nohost');
    const { idToken: _, ...idp } = entry.oauth.idp;
    const config = await writeConfig({ mcpServers: { nohost: { ...entry, oauth: { ...entry.oauth, idp } } } });
    const state = tempDir();
    const mux = await startMux(config, { env: { MCPMUX_STATE_DIR: state, XAA_CLIENT_SECRET: 'mux-secret' } });
    await waitFor(() => mux.stderr().includes('needs a login'), { what: 'needs-login' });
    expect(mux.stderr()).toContain('no host identity to exchange: the host must sign in with OIDC');
    expect((await mux.client.listTools()).tools).toEqual([]);
    const r = await mux.client.callTool({ name: 'nohost__whoami', arguments: {} }).then((x) => JSON.stringify(x), (e: Error) => e.message);
    expect(r).toMatch(/needs a login/);
    expect((await stats()).tokens.length).toBe(before.tokens.length);
    await mux.close();
    const login = await runMux(['login', 'nohost', '--config', config], { env: { MCPMUX_STATE_DIR: state, XAA_CLIENT_SECRET: 'mux-secret' } });
    expect(login.status).toBe(2);
    expect(login.stderr).toMatch(/uses the jwt_bearer grant: mcpmux gets its tokens itself from the host's OIDC sign-in \(listen\.auth\.oidc\), there is no login/);
  }, 60_000);
});

describe('machine tokens renew before they expire, discovering once', () => {
  it('client_credentials and jwt_bearer tokens living 2 s: a new one before each use, no 401 for expiry, discovery once per server', async () => {
    const idToken = await sign({ sub: 'bob' });
    const before = await stats();
    const config = await writeConfig({
      mcpServers: {
        short: xaa('short'),
        'cc-short': { url: `${fx.url}/mcp/cc-short`, oauth: { grant: 'client_credentials', clientId: 'mux', clientSecret: '${XAA_CLIENT_SECRET}' } },
      },
    });
    const mux = await startMux(config, { env: { MCPMUX_STATE_DIR: tempDir(), XAA_ID_TOKEN: idToken, XAA_CLIENT_SECRET: 'mux-secret' } });
    expect((await mux.client.listTools()).tools.map((t) => t.name).sort()).toEqual(['cc-short__whoami', 'short__whoami']);
    const CALLS = 4;
    for (let i = 0; i < CALLS; i++) {
      expect(text(await mux.client.callTool({ name: 'short__whoami', arguments: {} }))).toBe('bob');
      expect(text(await mux.client.callTool({ name: 'cc-short__whoami', arguments: {} }))).toBe('mux');
    }
    const s = await stats();
    const tokens = s.tokens.slice(before.tokens.length);
    const seen = s.mcp.slice(before.mcp.length);
    // Each renewal is a token request only: several of them...
    expect(tokens.filter((t) => t.kind === 'jwt_bearer' && t.ok).length).toBeGreaterThanOrEqual(CALLS);
    expect(tokens.filter((t) => t.kind === 'client_credentials' && t.ok).length).toBeGreaterThanOrEqual(CALLS);
    // ...and discovery (resource metadata, then the AS's) once per server, not once per token.
    const discovery = s.discovery.slice(before.discovery.length);
    expect(discovery.filter((p) => p.startsWith('/.well-known/oauth-protected-resource/mcp/short'))).toHaveLength(1);
    expect(discovery.filter((p) => p.startsWith('/.well-known/oauth-protected-resource/mcp/cc-short'))).toHaveLength(1);
    expect(discovery.filter((p) => p === '/.well-known/oauth-authorization-server')).toHaveLength(2);
    // The only 401s are the discovery probes (no token yet): never an expired token sent.
    expect(seen.filter((m) => m.verdict === 'expired')).toEqual([]);
    expect(seen.filter((m) => m.verdict === 'unknown')).toEqual([]);
    expect(seen.filter((m) => m.verdict === 'missing')).toHaveLength(2);
    await mux.close();
  }, 60_000);
});

describe('refusals: the call fails with what to do, once, and no token anywhere', () => {
  it('an IdP refusing the ID token and an authorization server refusing the client: the error says what to fix; one request each; no token in logs, errors, /status or audit', async () => {
    const badIdToken = await sign({ sub: 'mallory', wrongKey: true });
    const goodIdToken = await sign({ sub: 'dave' });
    const audit = tempFile('audit.jsonl');
    const before = await stats();
    const config = await writeConfig({
      audit: { path: audit, arguments: 'full' },
      mcpServers: {
        'idp-no': xaa('idp-no', '${BAD_ID_TOKEN}'),
        'as-no': { ...xaa('as-no', '${GOOD_ID_TOKEN}'), oauth: { ...xaa('as-no').oauth, clientSecret: '${WRONG_CLIENT_SECRET}', idp: { ...xaa('as-no').oauth.idp, idToken: '${GOOD_ID_TOKEN}' } } },
      },
    });
    const d = await startDaemon(config, { MCPMUX_STATE_DIR: tempDir(), BAD_ID_TOKEN: badIdToken, GOOD_ID_TOKEN: goodIdToken, XAA_CLIENT_SECRET: 'mux-secret', WRONG_CLIENT_SECRET: 'not-the-secret' });
    const status = async () => (await fetch(`${d.base}/status`)).json() as Promise<any>;
    // Both try, fail, are retried with backoff (3 times) and given up: no loop.
    await waitFor(async () => (await status()).upstreams.every((u: any) => u.state === 'failed'), { what: 'both upstreams failed', timeoutMs: 20_000 });
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const host = new Client({ name: 'host', version: '0' });
    await host.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    const errors: string[] = [];
    for (const name of ['idp-no__whoami', 'as-no__whoami', 'idp-no__whoami']) {
      const r = await host.callTool({ name, arguments: {} }).then((x) => JSON.stringify(x), (e: Error) => e.message);
      errors.push(r);
    }
    expect(errors[0]).toMatch(/identity provider .* refused the ID token for idp-no; set a fresh oauth\.idp\.idToken/);
    expect(errors[1]).toMatch(/authorization server of as-no refused the ID-JAG; check oauth\.clientId and oauth\.clientSecret/);
    const s = await stats();
    const tokens = s.tokens.slice(before.tokens.length);
    // One refused request each, though the upstreams were started four times and called: the
    // same input is not asked again for a minute.
    expect(tokens.filter((t) => t.kind === 'idp' && !t.ok)).toHaveLength(1);
    expect(tokens.filter((t) => t.kind === 'jwt_bearer' && !t.ok)).toHaveLength(1);
    expect((await status()).upstreams.map((u: any) => u.restarts).every((n: number) => n >= 1)).toBe(true);
    // The IdP echoed the ID token in its error: mcpmux said what to fix without it.
    const everything = [d.stderr(), JSON.stringify(await status()), readFileSync(audit, 'utf8'), ...errors, await (await fetch(`${d.base}/metrics`)).text()];
    for (const secret of [badIdToken, goodIdToken, 'not-the-secret', 'mux-secret']) for (const t of everything) expect(t.includes(secret)).toBe(false);
    expect(d.stderr()).toContain('[REDACTED]');
    await host.close();
    await d.stop();
  }, 60_000);
});

describe('token exchange (RFC 8693) through OAuthTokens with the host subject', () => {
  const lines: string[] = [];
  const log = pino({ level: 'debug' }, new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }));
  const server = (name: string, more: object = {}) =>
    ({ name, transport: 'http', url: `${fx.url}/mcp/${name}`, headers: {}, oauth: { grant: 'token_exchange', clientId: 'mux', clientSecret: 'mux-secret', audience: 'mcp-audience', tokenEndpoint: `${fx.url}/token`, ...more } }) as unknown as RemoteServerConfig;
  const call = (bearer: string, url: string) =>
    fetch(url, { method: 'POST', headers: { authorization: bearer, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'whoami', arguments: {} } }) }).then(
      async (r) => ((await r.json()) as any).result.content[0].text as string,
    );

  beforeAll(() => {
    process.env.MCPMUX_STATE_DIR = tempDir();
  });

  it("exchanges the host's JWT for a token of this server's resource, kept until it expires; the host's JWT never goes to the server", async () => {
    const subject = await sign({ sub: 'carol', aud: 'mcpmux' });
    const before = await stats();
    const t = new OAuthTokens(server('tx'), log, { client: 'ci', subject: () => subject });
    expect(t.machine).toBe(true);
    const bearer = await t.header();
    expect(bearer).toMatch(/^Bearer at-/);
    expect(await call(bearer!, `${fx.url}/mcp/tx`)).toBe('carol');
    // Cached for the login key: the next request asks nothing.
    expect(await t.header()).toBe(bearer);
    const s = await stats();
    expect(s.tokens.slice(before.tokens.length).map((x) => `${x.kind}:${x.ok}:${x.sub}`)).toEqual(['token_exchange:true:carol']);
    // Asked for the configured audience and, by default, the server's URL as the resource; no
    // scope when none is configured.
    const [asked] = s.tokens.slice(before.tokens.length);
    expect({ audience: asked.audience, resource: asked.resource, scope: asked.scope }).toEqual({ audience: 'mcp-audience', resource: `${fx.url}/mcp/tx`, scope: undefined });
    for (const m of s.mcp) expect(m.authorization ?? '').not.toContain(subject);
    expect(lines.join('')).not.toContain(subject);
  });

  it('asks for oauth.scopes and the oauth.resource that overrides the server URL; the token is for that resource', async () => {
    const subject = await sign({ sub: 'carol', aud: 'mcpmux' });
    const before = await stats();
    const t = new OAuthTokens(server('tx-url', { scopes: ['files:read', 'files:write'], resource: `${fx.url}/mcp/tx-res` }), log, { client: 'scoped', subject: () => subject });
    const bearer = await t.header();
    const s = await stats();
    expect(s.tokens.slice(before.tokens.length).map(({ kind, ok, audience, resource, scope }) => ({ kind, ok, audience, resource, scope }))).toEqual([
      { kind: 'token_exchange', ok: true, audience: 'mcp-audience', resource: `${fx.url}/mcp/tx-res`, scope: 'files:read files:write' },
    ]);
    // The AS bound the token to the resource asked for: it works there.
    expect(await call(bearer!, `${fx.url}/mcp/tx-res`)).toBe('carol');
  });

  it('no host identity (a static-token or stdio session): needs-login for that client, no request, said once', async () => {
    const before = await stats();
    const t = new OAuthTokens(server('tx'), log, { client: 'static-client', subject: () => undefined });
    expect(t.machine).toBe(false);
    expect(await t.header()).toBeUndefined();
    expect(await t.refresh()).toBe(false);
    expect((await stats()).tokens.length).toBe(before.tokens.length);
    expect(lines.filter((l) => l.includes('no host identity to exchange: the host must sign in with OIDC'))).toHaveLength(1);
  });

  it('refused by the authorization server: the error says what to fix, without the subject it echoed, and is not asked again', async () => {
    const subject = await sign({ sub: 'eve', aud: 'mcpmux', wrongKey: true });
    const before = await stats();
    const t = new OAuthTokens(server('tx'), log, { client: 'eve', subject: () => subject });
    const first = await t.header().then(() => 'no error', (e: Error) => e.message);
    expect(first).toMatch(/authorization server of tx refused the token exchange; check oauth\.clientId, clientSecret, audience and subjectTokenType.*invalid_grant/);
    expect(first).toContain('[REDACTED]');
    expect(first).not.toContain(subject);
    const again = await new OAuthTokens(server('tx'), log, { client: 'eve', subject: () => subject }).header().then(() => 'no error', (e: Error) => e.message);
    expect(again).toBe(first);
    expect((await stats()).tokens.slice(before.tokens.length).map((x) => `${x.kind}:${x.ok}`)).toEqual(['token_exchange:false']);
    expect(lines.join('')).not.toContain(subject);
  });
});

describe('file logins: one refresh across processes', () => {
  it('two processes refreshing one login at once: one refresh_token grant, the other process uses its result', async () => {
    const events = tempFile('lock.jsonl');
    const { info } = await startFixture(OAUTH, { events, holdRefreshes: 1 });
    const state = tempDir();
    const config = await writeConfig({ mcpServers: { secure: { url: info.url } } });
    const env = { ...process.env, MCPMUX_STATE_DIR: state, BROWSER: `${process.execPath} ${path.join(ROOT, 'test/fixtures/headless-browser.mjs')}` };
    const run = (args: string[]) => {
      const child = spawn(process.execPath, [MUX_BIN, ...args, '--config', config], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      children.push(child);
      let out = '';
      let err = '';
      child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
      child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
      const done = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      return { out: () => out, err: () => err, done };
    };
    const login = run(['login', 'secure']);
    expect(await login.done, login.err()).toBe(0);
    // The stored access token looks about to expire: each process refreshes before using it.
    const file = path.join(state, 'oauth', 'secure.json');
    const stored = JSON.parse(readFileSync(file, 'utf8'));
    writeFileSync(file, JSON.stringify({ ...stored, tokens: { ...stored.tokens, expires_at: Date.now() - 1000 } }));

    const a = run(['tools', '--json', '--log-level', 'debug']);
    await waitFor(() => readEvents(events).some((e) => e.grant === 'refresh_token' && e.held), { what: "the first process's refresh at the AS (held there)" });
    const b = run(['tools', '--json', '--log-level', 'debug']);
    // The second process either waits for the first (the lock) or, without one, refreshes too.
    const refreshes = () => readEvents(events).filter((e) => e.grant === 'refresh_token' && e.ok !== undefined);
    await waitFor(() => b.err().includes('waiting for another process changing this login') || refreshes().length > 0, { what: 'the second process at the lock, or its own refresh' });
    await fetch(new URL('/admin/release-refreshes', info.url), { method: 'POST' });
    expect(await a.done, a.err()).toBe(0);
    expect(await b.done, b.err()).toBe(0);
    for (const p of [a, b]) expect(JSON.parse(p.out()).map((t: { name: string }) => t.name)).toContain('secure__whoami');
    // One refresh_token grant reached the AS, and it succeeded (no second one with the spent refresh token).
    expect(refreshes().map((e) => e.ok)).toEqual([true]);
    expect(b.err()).toContain('waiting for another process changing this login');
    // The lock is gone with its holder; the login has the one refreshed token.
    expect(readdirSafe(path.join(state, 'oauth')).filter((n) => n.endsWith('.lock'))).toEqual([]);
    expect(JSON.parse(readFileSync(file, 'utf8')).tokens.refresh_token).not.toBe(stored.tokens.refresh_token);
  }, 90_000);
});

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
