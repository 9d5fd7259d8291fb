// Review R1 of issue 22, the grants that act for the host: where the host's JWT may go (only
// to the token endpoint the config names; an upstream's metadata cannot send it, or an ID-JAG,
// to a server it chose), what an exchange must say it issued, which failures make discovery run
// again, and a per-client connection that recovers as soon as a session of its client brings
// the host's identity. Against the loopback IdP/AS/MCP fixture (test/fixtures/grants-as.mjs),
// recording "attacker" servers in this file, and the real `mcpmux serve` with listen.auth.oidc.

import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RemoteServerConfig } from '../src/config/types.js';
import { OAuthTokens } from '../src/upstream/oauth/tokens.js';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { awaitJsonLine, tempDir, waitFor } from './helpers/harness.js';
import { GRANTS, type GrantsFx, type GrantsStats } from './helpers/grants-fixture.js';

let fixture: ChildProcess;
let fx: GrantsFx;
const servers: Server[] = [];
const hosts: Client[] = [];

beforeAll(async () => {
  process.env.MCPMUX_STATE_DIR = tempDir();
  fixture = spawn(
    process.execPath,
    [GRANTS, JSON.stringify({ issuedType: { 'jag-none': null, 'jag-wrong': 'urn:ietf:params:oauth:token-type:access_token', 'tx-none': null, 'tx-jwt': 'urn:ietf:params:oauth:token-type:jwt' }, refuseSubs: ['mallory'] })],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let err = '';
  fixture.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<void>((resolve) => fixture.once('exit', () => resolve()));
  fx = await awaitJsonLine(fixture.stdout!, exited, (j) => (j.url ? (j as GrantsFx) : undefined), { ms: 15_000, what: 'grants-as URL', log: () => err });
});

afterAll(async () => {
  await Promise.allSettled(hosts.map((h) => h.close()));
  await stopAllDaemons();
  for (const s of servers) s.closeAllConnections();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  fixture?.kill('SIGKILL');
});

const stats = async (): Promise<GrantsStats> => (await fetch(`${fx.url}/admin/stats`)).json() as Promise<GrantsStats>;
const sign = async (claims: { sub: string; aud?: string; wrongKey?: boolean }): Promise<string> =>
  ((await (await fetch(`${fx.url}/admin/sign`, { method: 'POST', body: JSON.stringify(claims) })).json()) as { jwt: string }).jwt;

const lines: string[] = [];
const log = pino({ level: 'debug' }, new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }));
const remote = (name: string, url: string, oauth: object) => ({ name, transport: 'http', url, headers: {}, oauth }) as unknown as RemoteServerConfig;
const xaa = (name: string, url = `${fx.url}/mcp/${name}`, idToken?: string) =>
  remote(name, url, { grant: 'jwt_bearer', clientId: 'mux', clientSecret: 'mux-secret', idp: { issuer: fx.idpIssuer, tokenEndpoint: fx.idpTokenEndpoint, clientId: fx.idpClientId, ...(idToken && { idToken }) } });
const failure = (p: Promise<unknown>) => p.then(() => 'no error', (e: Error) => e.message);

/** A loopback HTTP server recording every request it gets (method, path, body). */
async function recording(handle: (req: IncomingMessage, body: string, res: ServerResponse, base: string) => void): Promise<{ base: string; seen: Array<{ method: string; path: string; body: string }> }> {
  const seen: Array<{ method: string; path: string; body: string }> = [];
  let base = '';
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (c: string) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method!, path: req.url!, body });
      handle(req, body, res, base);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, seen };
}
const send = (res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}) =>
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(value));

describe("the host's JWT goes only to the token endpoint the config names", () => {
  it('an upstream whose metadata names another authorization server gets neither the host JWT (token_exchange) nor an ID-JAG minted for another server (jwt_bearer)', async () => {
    // The "attacker": a token endpoint that answers like any other and keeps what it was sent.
    // Its metadata names the real authorization server as issuer (it claims to be it).
    const attacker = await recording((req, _body, res, base) => {
      if (req.url!.startsWith('/.well-known/')) return send(res, 200, { issuer: fx.url, token_endpoint: `${base}/token`, authorization_endpoint: `${base}/authorize` });
      send(res, 200, { access_token: 'stolen', token_type: 'Bearer', expires_in: 3600, issued_token_type: 'urn:ietf:params:oauth:token-type:access_token' });
    });
    // An MCP server whose resource metadata names the attacker as its authorization server.
    const named = await recording((req, _body, res, base) => {
      if (req.url!.startsWith('/.well-known/oauth-protected-resource')) return send(res, 200, { resource: `${base}/mcp`, authorization_servers: [attacker.base] });
      if (req.url!.startsWith('/.well-known/')) return send(res, 404, {});
      send(res, 401, { error: 'invalid_token' }, { 'www-authenticate': `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"` });
    });
    // A 2025-03-26-style server without resource metadata, whose own loose metadata names the
    // real authorization server's issuer with the attacker's token endpoint.
    const loose = await recording((req, _body, res) => {
      if (req.url === '/.well-known/oauth-authorization-server') return send(res, 200, { issuer: fx.url, token_endpoint: `${attacker.base}/token`, authorization_endpoint: `${attacker.base}/authorize` });
      if (req.url!.startsWith('/.well-known/')) return send(res, 404, {});
      send(res, 401, { error: 'invalid_token' }, { 'www-authenticate': 'Bearer' });
    });
    const before = await stats();
    const hostJwt = await sign({ sub: 'alice', aud: 'mcpmux' });
    const idToken = await sign({ sub: 'alice' });

    // token_exchange without oauth.tokenEndpoint (load.ts refuses it; the grant refuses it too).
    const tx = new OAuthTokens(remote('tx-named', `${named.base}/mcp`, { grant: 'token_exchange', clientId: 'mux', clientSecret: 'mux-secret' }), log, { client: 'alice', subject: () => hostJwt });
    expect(await failure(tx.header())).toMatch(/token_exchange needs oauth\.tokenEndpoint/);
    // jwt_bearer with the host's ID token: metadata the resource does not vouch for is not used.
    for (const [name, url] of [['xaa-named', `${named.base}/mcp`], ['xaa-loose', `${loose.base}/mcp`]] as const) {
      const t = new OAuthTokens(xaa(name, url), log, { client: 'alice', subject: () => idToken });
      expect(await failure(t.header()), name).toMatch(/publishes no (protected resource )?metadata|no metadata with that issuer/);
    }
    // The attacker never got a token request, let alone a subject token or an assertion.
    expect(attacker.seen.filter((r) => r.method === 'POST')).toEqual([]);
    for (const r of [...attacker.seen, ...named.seen, ...loose.seen]) for (const secret of [hostJwt, idToken]) expect(r.body.includes(secret)).toBe(false);
    // And the IdP minted no ID-JAG for any of it.
    expect((await stats()).tokens.slice(before.tokens.length)).toEqual([]);
  });
});

describe('issued_token_type (RFC 8693 2.2.1; SEP-990: the ID-JAG type)', () => {
  it('an IdP answer without it or naming another type is refused with what to check, and not asked again', async () => {
    const idToken = await sign({ sub: 'ivy' });
    for (const [name, said] of [
      ['jag-none', /issued no ID-JAG \(urn:ietf:params:oauth:token-type:id-jag, SEP-990\) for jag-none; check .*: its answer has no issued_token_type/],
      ['jag-wrong', /issued no ID-JAG .* for jag-wrong; .*: it issued a urn:ietf:params:oauth:token-type:access_token, not urn:ietf:params:oauth:token-type:id-jag/],
    ] as const) {
      const before = await stats();
      const first = await failure(new OAuthTokens(xaa(name, undefined, idToken), log).header());
      expect(first).toMatch(said);
      // The same input a second time: the same message, nothing asked (no loop).
      expect(await failure(new OAuthTokens(xaa(name, undefined, idToken), log).header())).toBe(first);
      const tokens = (await stats()).tokens.slice(before.tokens.length);
      // One ID-JAG request, and what it answered never went on to the authorization server.
      expect(tokens.map((t) => `${t.kind}:${t.ok}`)).toEqual(['idp:true']);
      expect(first).not.toContain(idToken);
    }
  });

  it('a token exchange answer without it is refused once; one naming a JWT access token is taken', async () => {
    const subject = await sign({ sub: 'tom', aud: 'mcpmux' });
    const tx = (name: string) => remote(name, `${fx.url}/mcp/${name}`, { grant: 'token_exchange', clientId: 'mux', clientSecret: 'mux-secret', audience: 'mcp-audience', tokenEndpoint: `${fx.url}/token` });
    const before = await stats();
    const first = await failure(new OAuthTokens(tx('tx-none'), log, { client: 'tom', subject: () => subject }).header());
    expect(first).toMatch(/the token exchange for tx-none at .*\/token did not issue an access token: its answer has no issued_token_type/);
    expect(await failure(new OAuthTokens(tx('tx-none'), log, { client: 'tom', subject: () => subject }).header())).toBe(first);
    expect((await stats()).tokens.slice(before.tokens.length).filter((t) => t.name === 'tx-none')).toHaveLength(1);
    expect(await new OAuthTokens(tx('tx-jwt'), log, { client: 'tom', subject: () => subject }).header()).toMatch(/^Bearer at-/);
    expect(lines.join('')).not.toContain(subject);
  });
});

describe('a failed grant forgets the discovered metadata only when the authorization server is at fault', () => {
  it("one person's refusal at the IdP makes no one discover again; the AS refusing mcpmux's client does", async () => {
    const disco = (s: GrantsStats, from: GrantsStats, name: string) => s.discovery.slice(from.discovery.length).filter((p) => p.includes(`/mcp/${name}`)).length;
    const alice = await sign({ sub: 'alice' });
    const eve = await sign({ sub: 'eve', wrongKey: true });
    const bob = await sign({ sub: 'bob' });
    const cfg = xaa('disco-once');
    expect(await new OAuthTokens(cfg, log, { client: 'alice', subject: () => alice }).header()).toMatch(/^Bearer at-/);
    const s0 = await stats();
    expect(await failure(new OAuthTokens(cfg, log, { client: 'eve', subject: () => eve }).header())).toMatch(/identity provider .* refused the ID token for disco-once/);
    const s1 = await stats();
    expect(await new OAuthTokens(cfg, log, { client: 'bob', subject: () => bob }).header()).toMatch(/^Bearer at-/);
    const s2 = await stats();
    // Neither eve's grant nor bob's after it asked for any metadata again, nor probed the server.
    expect(disco(s2, s0, 'disco-once')).toBe(0);
    expect(s2.mcp.slice(s0.mcp.length).filter((m) => m.server === '/mcp/disco-once')).toEqual([]);
    expect(s1.tokens.slice(s0.tokens.length).map((t) => `${t.kind}:${t.ok}`)).toEqual(['idp:false']);

    // mcpmux's client refused by the authorization server (invalid_client): the server may have
    // moved to another one, whose metadata the next grant reads.
    const wrong = { ...xaa('disco-again', undefined, alice) };
    wrong.oauth = { ...wrong.oauth!, clientSecret: 'not-the-secret' };
    const s3 = await stats();
    expect(await failure(new OAuthTokens(wrong, log, { client: 'a' }).header())).toMatch(/authorization server of disco-again refused the ID-JAG/);
    const s4 = await stats();
    expect(disco(s4, s3, 'disco-again')).toBe(1);
    await failure(new OAuthTokens({ ...wrong, oauth: { ...wrong.oauth!, scopes: ['other'] } }, log, { client: 'a' }).header());
    expect(disco(await stats(), s4, 'disco-again')).toBe(1);
  });
});

describe("a per-client connection acting for the host recovers when a session of its client brings the host's identity", () => {
  const TOKENS = { REVIEW_T_CI: 'review-ci-static-token-1', REVIEW_T_TEAM: 'review-team-static-token-2' };

  async function host(token: string, base: string): Promise<Client> {
    const c = new Client({ name: 'review-host', version: '0' });
    await c.connect(new StreamableHTTPClientTransport(new URL(base), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    hosts.push(c);
    return c;
  }
  const whoami = (c: Client) =>
    c.callTool({ name: 's__whoami', arguments: {} }).then(
      (r) => (r.content as Array<{ text: string }>)[0]!.text,
      (e: Error) => `error: ${e.message}`,
    );

  it('needs-login for a static-token session, then a signed-in session of that client is served at once; a refused identity given up on, then another person of that client is served', async () => {
    const d = await startDaemon(
      {
        mcpServers: {
          s: {
            url: `${fx.url}/mcp/s`,
            oauth: { grant: 'token_exchange', clientId: 'mux', clientSecret: '${REVIEW_SECRET}', audience: 'mcp-audience', tokenEndpoint: `${fx.url}/token` },
            restart: { maxRetries: 1, backoffMs: 50 },
          },
        },
        listen: {
          auth: {
            tokens: [
              { client: 'ci', tokenEnv: 'REVIEW_T_CI' },
              { client: 'team', tokenEnv: 'REVIEW_T_TEAM' },
            ],
            oidc: { issuer: fx.idpIssuer, audience: 'mcpmux', jwksUrl: `${fx.url}/idp/jwks`, clients: { alice: 'ci', mallory: 'team', bob: 'team' } },
          },
        },
      },
      { MCPMUX_STATE_DIR: tempDir(), REVIEW_SECRET: 'mux-secret', ...TOKENS },
    );
    // 1. ci's first session has a static token: no identity to exchange, needs-login for ci.
    const ci = await host(TOKENS.REVIEW_T_CI, d.url);
    await waitFor(() => d.stderr().includes('server s needs a login for client ci'), { what: "ci's connection needs-login", timeoutMs: 20_000 });
    const refused = await whoami(ci);
    // What to do: sign in with OIDC; `mcpmux login` refuses these grants, so it is not offered.
    expect(refused).toMatch(/needs a login for client ci: the host must sign in with OIDC \(listen\.auth\.oidc\)/);
    expect(refused).not.toMatch(/mcpmux login/);

    // 2. alice (mapped to ci) signs in: ci's connection starts again with her identity.
    const jwts = { alice: await sign({ sub: 'alice', aud: 'mcpmux' }), mallory: await sign({ sub: 'mallory', aud: 'mcpmux' }), bob: await sign({ sub: 'bob', aud: 'mcpmux' }) };
    const alice = await host(jwts.alice, d.url);
    expect(await whoami(alice)).toBe('alice');

    // 3. mallory (team) is refused by the authorization server: team's connection is given up on.
    const mallory = await host(jwts.mallory, d.url);
    // (ci's connection never gives up: needs-login is no failure that counts.)
    await waitFor(() => d.stderr().includes('giving up on upstream'), { what: "team's connection given up", timeoutMs: 20_000 });
    expect(await whoami(mallory)).toMatch(/^error: .*refused the token exchange/);
    // bob (team too) signs in: a new identity, a new try at once, and his call is served.
    const bob = await host(jwts.bob, d.url);
    expect(await whoami(bob)).toBe('bob');
    // The hosts' JWTs went to the configured token endpoint only: never to the MCP server, nor to a log.
    for (const jwt of Object.values(jwts)) {
      for (const m of (await stats()).mcp) expect(m.authorization ?? '').not.toContain(jwt);
      expect(d.stderr()).not.toContain(jwt);
    }
    await d.stop();
  }, 90_000);
});
