// The enterprise path end to end (issue 22): the real `mcpmux serve` with hosts signed in through
// the organisation's identity provider (listen.auth.oidc) beside static tokens, real SDK clients
// sending `Authorization: Bearer <JWT>`, and upstreams behind a loopback IdP and authorization
// server (test/fixtures/grants-as.mjs, whose MCP servers record every Authorization header and
// the person the AS minted its token for). The host's JWT is exchanged per person (RFC 8693
// token_exchange, and Cross-App Access: jwt_bearer with the JWT as the ID token), never shown to
// an upstream. One daemon and one fixture serve the whole file.

import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { awaitJsonLine, freePort, tempDir, tempFile, waitFor } from './helpers/harness.js';
import { GRANTS, type GrantsFx, type GrantsStats } from './helpers/grants-fixture.js';
import { parseProm } from './helpers/prom.js';

const OPS_TOKEN = 'ops-static-token-0123456789';
const CI_TOKEN = 'ci-static-token-0123456789';

let fx: GrantsFx;
let child: ChildProcess;
let daemon: Daemon;
let adminBase: string;
const audit = tempFile('enterprise-audit.jsonl');
/** Every host JWT this file made: none may ever reach an upstream, a log or the audit. */
const hostJwts: string[] = [];
const clients: Client[] = [];

const stats = async (): Promise<GrantsStats> => (await fetch(`${fx.url}/admin/stats`)).json() as Promise<GrantsStats>;

/**
 * A host JWT of the IdP for `sub`: its audience is mcpmux (listen.auth.oidc and the AS's token
 * exchange check that) and the IdP client (the IdP checks that of an ID token, Cross-App Access).
 */
async function jwt(sub: string, expSeconds = 600): Promise<string> {
  const r = await fetch(`${fx.url}/admin/sign`, { method: 'POST', body: JSON.stringify({ sub, aud: ['mcpmux', fx.idpClientId], expSeconds }) });
  const token = ((await r.json()) as { jwt: string }).jwt;
  hostJwts.push(token);
  return token;
}

/** A real SDK host; `headers` stays the transport's own object, so a test can hand it a new JWT. */
async function host(token: string, headers: Record<string, string> = {}): Promise<Client> {
  headers.authorization = `Bearer ${token}`;
  const c = new Client({ name: 'enterprise-test', version: '0.0.0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(daemon.url), { requestInit: { headers } }));
  clients.push(c);
  return c;
}

const whoami = async (c: Client, server: string): Promise<string> => {
  const r = (await c.callTool({ name: `${server}__whoami`, arguments: {} })) as { content: Array<{ text: string }>; isError?: boolean };
  if (r.isError) throw new Error(r.content[0]!.text);
  return r.content[0]!.text;
};
const failure = (p: Promise<unknown>): Promise<string> => p.then((x) => `resolved: ${JSON.stringify(x)}`, (e: Error) => e.message);
const toolNames = async (c: Client) => (await c.listTools()).tools.map((t) => t.name).sort();

const since = (before: GrantsStats, now: GrantsStats) => ({ tokens: now.tokens.slice(before.tokens.length), mcp: now.mcp.slice(before.mcp.length) });

beforeAll(async () => {
  child = spawn(process.execPath, [GRANTS, JSON.stringify({ ttl: { short: 2 }, refuseSubs: ['mallory'] })], { stdio: ['pipe', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  fx = await awaitJsonLine(child.stdout!, exited, (j) => (j.url ? (j as GrantsFx) : undefined), { ms: 15_000, what: 'grants fixture URL', log: () => '' });
  const exchange = (name: string) => ({
    url: `${fx.url}/mcp/${name}`,
    oauth: { grant: 'token_exchange', clientId: 'mux', clientSecret: '${ENT_SECRET}', audience: 'mcp-audience', tokenEndpoint: `${fx.url}/token` },
  });
  const adminPort = await freePort();
  daemon = await startDaemon(
    {
      mcpServers: {
        te: exchange('te'),
        short: exchange('short'),
        xaa: {
          url: `${fx.url}/mcp/xaa`,
          oauth: { grant: 'jwt_bearer', clientId: 'mux', clientSecret: '${ENT_SECRET}', idp: { issuer: fx.idpIssuer, tokenEndpoint: fx.idpTokenEndpoint, clientId: fx.idpClientId } },
        },
      },
      listen: {
        adminPort,
        auth: {
          tokens: [
            { client: 'ci', tokenEnv: 'ENT_CI_TOKEN' },
            { client: 'ops', tokenEnv: 'ENT_OPS_TOKEN' },
          ],
          oidc: { issuer: fx.idpIssuer, audience: 'mcpmux', jwksUrl: `${fx.url}/idp/jwks`, clientClaim: 'sub', clients: { alice: 'ci' } },
        },
      },
      audit: { path: audit },
    },
    { ENT_SECRET: 'mux-secret', ENT_CI_TOKEN: CI_TOKEN, ENT_OPS_TOKEN: OPS_TOKEN, MCPMUX_STATE_DIR: tempDir() },
  );
  adminBase = `http://127.0.0.1:${adminPort}`;
}, 30_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await stopAllDaemons();
  child?.kill('SIGKILL');
});

describe('token_exchange per person through mcpmux serve', () => {
  it('alice (mapped to ci) and bob (oidc:bob) each get a token minted for them, exchanged once per client and cached; no host JWT reaches the upstream', async () => {
    const before = await stats();
    const alice = await host(await jwt('alice'));
    const bob = await host(await jwt('bob'));
    expect(await toolNames(alice), daemon.stderr()).toContain('te__whoami');
    for (let i = 0; i < 3; i++) {
      expect(await whoami(alice, 'te')).toBe('alice');
      expect(await whoami(bob, 'te')).toBe('bob');
    }
    // A second session of alice's client shares its connection and its token.
    const alice2 = await host(await jwt('alice'));
    expect(await whoami(alice2, 'te')).toBe('alice');
    const s = since(before, await stats());
    const exchanges = s.tokens.filter((t) => t.kind === 'token_exchange' && t.name === 'te');
    expect(exchanges.map((t) => `${t.ok}:${t.sub}`).sort()).toEqual(['true:alice', 'true:bob']);
    // Every call the upstream accepted was made with a token minted for the person who called.
    const calls = s.mcp.filter((m) => m.server === '/mcp/te' && m.verdict === 'ok');
    expect(new Set(calls.map((m) => m.sub))).toEqual(new Set(['alice', 'bob']));
    const tokenOf = (sub: string) => new Set(calls.filter((m) => m.sub === sub).map((m) => m.authorization));
    expect(tokenOf('alice').size).toBe(1);
    expect(tokenOf('bob').size).toBe(1);
    expect([...tokenOf('alice')][0]).not.toBe([...tokenOf('bob')][0]);
  }, 60_000);

  it('a host with a static token (no JWT) sees the server as needing a login for itself, with a clear error if it calls', async () => {
    const before = await stats();
    const ops = await host(OPS_TOKEN);
    expect(await toolNames(ops)).not.toContain('te__whoami');
    const err = await failure(whoami(ops, 'te'));
    expect(err).toMatch(/needs a login/);
    // Nothing was asked of the AS for ops: there is no one to exchange.
    expect(since(before, await stats()).tokens.filter((t) => t.name === 'te' || t.kind === 'token_exchange')).toEqual([]);
    // alice's connection is untouched, and /status says whose connection is in which state.
    expect(await whoami(await host(await jwt('alice')), 'te')).toBe('alice');
    const status = (await (await fetch(`${adminBase}/status`, { headers: { authorization: `Bearer ${CI_TOKEN}` } })).json()) as { upstreams: Array<{ name: string; client?: string; state: string }> };
    const te = status.upstreams.filter((u) => u.name === 'te');
    expect(te.find((u) => u.client === 'ops')?.state).toBe('needs-login');
    expect(te.find((u) => u.client === 'ci')?.state).toBe('ready');
  }, 60_000);
});

describe('Cross-App Access (jwt_bearer) with the host\'s OIDC JWT as the ID token', () => {
  it('each OIDC host gets an ID-JAG from the IdP and a server token for itself', async () => {
    const before = await stats();
    // People with no session so far: a client's first session opens all its per-client connections.
    const erin = await host(await jwt('erin'));
    const carol = await host(await jwt('carol'));
    expect(await whoami(erin, 'xaa')).toBe('erin');
    expect(await whoami(carol, 'xaa')).toBe('carol');
    expect(await whoami(carol, 'xaa')).toBe('carol');
    const s = since(before, await stats());
    expect(s.tokens.filter((t) => t.kind === 'idp').map((t) => t.ok), JSON.stringify(s.tokens)).toEqual([true, true]);
    expect(s.tokens.filter((t) => t.kind === 'jwt_bearer').map((t) => `${t.ok}:${t.sub}`).sort()).toEqual(['true:carol', 'true:erin']);
  }, 60_000);
});

describe('a JWT that expires', () => {
  it('once its exp has passed the session has no host token (nothing is exchanged for it); a new JWT on the same session works', async () => {
    const headers: Record<string, string> = {};
    const dave = await host(await jwt('dave', 3), headers);
    expect(await whoami(dave, 'short')).toBe('dave');
    // Past the JWT's exp and past the 2 s server token. mcpmux still lets the expired JWT in for its
    // clock tolerance (oidc.ts CLOCK_TOLERANCE_S), but never hands it on as the session's hostToken.
    const expired = Date.now() + 3_500;
    await waitFor(async () => Date.now() > expired, { what: 'the JWT to expire', ms: 15_000 });
    const before = await stats();
    const err = await failure(whoami(dave, 'short'));
    // (http.ts sends the call without a bearer and reports the server's 401: one request, no loop.)
    expect(err).toMatch(/"short".*needs a login/);
    // Nothing asked of the AS with the expired JWT.
    expect(since(before, await stats()).tokens.filter((t) => t.kind === 'token_exchange')).toEqual([]);
    headers.authorization = `Bearer ${await jwt('dave')}`;
    expect(await whoami(dave, 'short')).toBe('dave');
    const after = since(before, await stats()).tokens.filter((t) => t.kind === 'token_exchange');
    expect(after.length).toBeGreaterThan(0);
    expect(new Set(after.map((t) => `${t.ok}:${t.sub}`))).toEqual(new Set(['true:dave']));
  }, 60_000);
});

describe('a person the authorization server refuses', () => {
  it('mallory\'s call fails saying what to do, asked once, no token anywhere; bob is unaffected', async () => {
    const before = await stats();
    const mallory = await host(await jwt('mallory'));
    const first = await failure(whoami(mallory, 'te'));
    const second = await failure(whoami(mallory, 'te'));
    expect(first).toMatch(/refused the token exchange/);
    expect(second).toMatch(/refused|needs a login/);
    const s = since(before, await stats());
    // One refused exchange per server for two calls (te and short both exchange her JWT): no loop.
    const refusedFor = (name: string) => s.tokens.filter((t) => t.kind === 'token_exchange' && t.sub === 'mallory' && t.name === name);
    expect(refusedFor('te').map((t) => t.ok)).toEqual([false]);
    expect(refusedFor('short').map((t) => t.ok)).toEqual([false]);
    const bob = await host(await jwt('bob'));
    expect(await whoami(bob, 'te')).toBe('bob');
    const status = await (await fetch(`${adminBase}/status`, { headers: { authorization: `Bearer ${CI_TOKEN}` } })).text();
    const auditText = readFileSync(audit, 'utf8');
    for (const t of hostJwts) {
      expect(daemon.stderr()).not.toContain(t);
      expect(status).not.toContain(t);
      expect(auditText).not.toContain(t);
      expect(first).not.toContain(t);
    }
    // The AS's own tokens never reach the logs either.
    expect(daemon.stderr()).not.toMatch(/at-[0-9a-f]{8}-/);
  }, 60_000);
});

describe('/status and /metrics with OIDC hosts', () => {
  it('an unmapped OIDC host gets 403 on /status (the admin listener serves it here); a mapped one and a static token read it; /metrics says only client="oidc"', async () => {
    const bobJwt = await jwt('bob');
    const aliceJwt = await jwt('alice');
    // With listen.adminPort the operator routes move there: the main listener has no /status.
    expect((await fetch(`${daemon.base}/status`, { headers: { authorization: `Bearer ${CI_TOKEN}` } })).status).toBe(404);
    for (const base of [adminBase]) {
      const get = (token: string) => fetch(`${base}/status`, { headers: { authorization: `Bearer ${token}` } });
      const bob = await get(bobJwt);
      expect(bob.status, base).toBe(403);
      const body = await bob.text();
      expect(body).toMatch(/Forbidden/);
      expect(body).not.toContain('oidc:alice');
      expect((await get(aliceJwt)).status, base).toBe(200);
      const ci = await get(CI_TOKEN);
      expect(ci.status, base).toBe(200);
      const seen = (await ci.json()) as { upstreams: unknown[]; sessions: { byClient: Record<string, number> } };
      expect(seen.upstreams.length).toBeGreaterThan(0);
      // What bob may not read: other people's identities.
      expect(Object.keys(seen.sessions.byClient)).toContain('oidc:bob');
      // A restart is refused to bob as well (403, before anything is named).
      const restart = await fetch(`${base}/status/restart?server=te`, { method: 'POST', headers: { authorization: `Bearer ${bobJwt}` } });
      expect(restart.status).toBe(403);
    }
    const text = await (await fetch(`${adminBase}/metrics`)).text();
    expect(parseProm(text).some((s) => s.labels.client === 'oidc')).toBe(true);
    expect(text).not.toMatch(/oidc:/);
  }, 60_000);

  it('no host JWT was ever seen by an upstream', async () => {
    const s = await stats();
    const seen = s.mcp.map((m) => m.authorization ?? '').join('\n');
    expect(hostJwts.length).toBeGreaterThan(10);
    for (const t of hostJwts) expect(seen).not.toContain(t);
    for (const m of s.mcp) if (m.authorization) expect(m.authorization).toMatch(/^Bearer at-/);
  });
});
