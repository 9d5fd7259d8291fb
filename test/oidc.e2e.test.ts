// Hosts signed in with an OIDC identity provider (issue 22, listen.auth.oidc) through the real
// `mcpmux serve`: a local issuer on loopback (discovery document and JWKS, keys made with jose),
// real SDK clients sending `Authorization: Bearer <JWT>`. One daemon serves the whole file.

import { createHmac, randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { exportSPKI } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { fixture, freePort, tempFile, waitFor, writeConfig } from './helpers/harness.js';
import { parseProm } from './helpers/prom.js';
import { makeKey, OidcIssuer, type IssuerKey } from './helpers/oidc-issuer.js';

const AUDIENCE = 'mcpmux-test';
const CI_TOKEN = 'ci-static-token-0123456789';

const issuer = new OidcIssuer();
let k1: IssuerKey; // published from the start
let k2: IssuerKey; // published later: a rotation
let stranger: IssuerKey; // never published
let daemon: Daemon;
const audit = tempFile('oidc-audit.jsonl');

/** A JWT of the test issuer for mcpmux's audience, signed with `key` (k1 by default). */
const jwt = (claims: Record<string, unknown>, key: IssuerKey = k1, kid?: string) => issuer.sign(key, AUDIENCE, claims, kid);

const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

async function host(token: string): Promise<Client> {
  const client = new Client({ name: 'oidc-test', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(daemon.url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
}

/** An initialize POST with this bearer token (a ping when it names a session): the raw HTTP answer. */
async function initialize(token: string, sessionId?: string, d: Daemon = daemon): Promise<Response> {
  return fetch(d.url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(sessionId && { 'mcp-session-id': sessionId }),
    },
    body: JSON.stringify(
      sessionId
        ? { jsonrpc: '2.0', id: 2, method: 'ping' }
        : { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } },
    ),
  });
}

function logLines(d: Daemon = daemon): any[] {
  return d
    .stderr()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
}

const refusals = (d: Daemon = daemon) => logLines(d).filter((l) => l.msg === 'host JWT refused');

function auditLines(): any[] {
  try {
    return readFileSync(audit, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  } catch {
    return [];
  }
}

/** The generated tools a host sees (policy hides tool_1 from ci, tool_2 from oidc). */
const toolNames = async (c: Client) => (await c.listTools()).tools.map((t) => t.name).filter((n) => /^fx__tool_\d$/.test(n)).sort();

beforeAll(async () => {
  [k1, k2, stranger] = await Promise.all([makeKey('k1', 'RS256'), makeKey('k2', 'ES256'), makeKey('k1', 'RS256')]);
  await issuer.start();
  issuer.published = [k1.jwk];
  daemon = await startDaemon(
    {
      mcpServers: { fx: fixture({ name: 'fx' }) },
      listen: {
        auth: {
          tokens: [
            { client: 'ci', tokenEnv: 'OIDC_TEST_CI_TOKEN' },
            // Clients only people signed in with OIDC become (their static tokens go unused here).
            { client: 'team', tokenEnv: 'OIDC_TEST_TEAM_TOKEN', toolset: 'narrow' },
            { client: 'ops', tokenEnv: 'OIDC_TEST_OPS_TOKEN', admin: true },
          ],
          // No jwksUrl: it is discovered from the issuer.
          oidc: { issuer: issuer.url, audience: AUDIENCE, clients: { alice: 'ci', tina: 'team', olga: 'ops' } },
        },
      },
      policy: { clients: { ci: { deny: ['fx__tool_1'] }, oidc: { deny: ['fx__tool_2'] } } },
      toolsets: { narrow: { tools: ['fx__echo', 'fx__tool_0'] } },
      // Client team only: 2 calls of a tool at once.
      rateLimits: [{ client: 'team', server: 'fx', perMinute: 1, burst: 2 }],
      audit: { path: audit },
    },
    // Every unknown kid fetches the JWKS again (production waits 30 s between fetches).
    { OIDC_TEST_CI_TOKEN: CI_TOKEN, OIDC_TEST_TEAM_TOKEN: 'team-static-token-0123456789', OIDC_TEST_OPS_TOKEN: 'ops-static-token-0123456789', MCPMUX_JWKS_COOLDOWN_MS: '0' },
  );
}, 30_000);

afterAll(async () => {
  await stopAllDaemons();
  await issuer.stop();
});

describe('listen.auth.oidc: who a JWT makes a host', () => {
  it('an unmapped claim value: tools work, the client is oidc:<value> in the audit log, "oidc" policy applies, and metrics say only client="oidc"', async () => {
    const c = await host(await jwt({ sub: 'bob' }));
    expect(await toolNames(c)).toEqual(['fx__tool_0', 'fx__tool_1']); // policy.clients.oidc denies tool_2
    const r = await c.callTool({ name: 'fx__echo', arguments: { who: 'bob' } });
    expect(r.structuredContent).toEqual({ who: 'bob' });
    const denied = await c.callTool({ name: 'fx__tool_2', arguments: {} }).catch((e: Error) => e);
    expect(String((denied as Error).message ?? JSON.stringify(denied))).toMatch(/policy/);
    await c.close();
    const line = await waitFor(() => auditLines().find((l) => l.method === 'tools/call' && l.arguments === undefined && l.client === 'oidc:bob'), { what: 'audit line of bob' });
    expect(line).toMatchObject({ client: 'oidc:bob', server: 'fx', outcome: 'ok' });
    const text = await (await fetch(`${daemon.base}/metrics`)).text();
    const samples = parseProm(text);
    expect(samples.some((s) => s.name === 'mcpmux_requests_total' && s.labels.client === 'oidc' && s.labels.method === 'tools/call')).toBe(true);
    expect(samples.some((s) => s.name === 'mcpmux_policy_denials_total' && s.labels.client === 'oidc')).toBe(true);
    expect(text).not.toContain('oidc:bob');
  });

  it('a mapped claim value is that configured client, with its policy; a claim equal to a static client name does not take it over', async () => {
    const alice = await host(await jwt({ sub: 'alice' }));
    expect(await toolNames(alice)).toEqual(['fx__tool_0', 'fx__tool_2']); // policy.clients.ci denies tool_1
    await alice.callTool({ name: 'fx__echo', arguments: { who: 'alice' } });
    await alice.close();

    const impostor = await host(await jwt({ sub: 'ci' }));
    expect(await toolNames(impostor)).toEqual(['fx__tool_0', 'fx__tool_1']); // oidc's policy, not ci's
    await impostor.callTool({ name: 'fx__echo', arguments: { who: 'impostor' } });
    await impostor.close();

    const calls = await waitFor(() => {
      const l = auditLines().filter((x) => x.method === 'tools/call' && x.server === 'fx');
      return l.some((x) => x.client === 'oidc:ci') && l.some((x) => x.client === 'ci') ? l : undefined;
    }, { what: 'audit lines of alice and the impostor' });
    expect(calls.map((l) => l.client)).not.toContain('oidc:alice');
  });

  it("a mapped claim value gets its client's toolset and rate limits, exactly as its static token would", async () => {
    const tina = await host(await jwt({ sub: 'tina' }));
    // team's toolset narrows what it sees (others see fx__tool_1, fx__tool_2, ...).
    expect((await tina.listTools()).tools.map((t) => t.name).sort()).toEqual(['fx__echo', 'fx__tool_0']);
    // team's rule: burst 2, the third call is refused; an unmapped person has no such rule.
    const limited = async (c: Client) => (await c.callTool({ name: 'fx__echo', arguments: {} })).isError === true;
    expect([await limited(tina), await limited(tina), await limited(tina)]).toEqual([false, false, true]);
    const refused = await tina.callTool({ name: 'fx__echo', arguments: {} });
    expect(JSON.stringify(refused.content)).toMatch(/rate limit/i);
    await tina.close();
    const bob = await host(await jwt({ sub: 'bob' }));
    expect([await limited(bob), await limited(bob), await limited(bob)]).toEqual([false, false, false]);
    await bob.close();
    const metrics = await (await fetch(`${daemon.base}/metrics`)).text();
    expect(metrics).toMatch(/mcpmux_rate_limited_total\{server="fx",client="team"\} [1-9]/);
  });

  it("a mapped claim value gets its client's admin flag: the operator client may restart upstreams, a non-admin one is 403", async () => {
    const restart = async (token: string) => fetch(`${daemon.base}/status/restart?server=nope`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    // Past the operator check: told only that no such server exists (nothing is restarted).
    const olga = await restart(await jwt({ sub: 'olga' }));
    expect(olga.status).toBe(404);
    await olga.text();
    const alice = await restart(await jwt({ sub: 'alice' }));
    expect(alice.status).toBe(403);
    expect(((await alice.json()) as { error: { message: string } }).error.message).toMatch(/client "ci" may not restart upstreams/);
    // A claim value equal to the operator client's name is not that client.
    expect((await restart(await jwt({ sub: 'ops' }))).status).toBe(403);
  });

  it('static tokens keep working beside OIDC', async () => {
    const c = await host(CI_TOKEN);
    expect(await toolNames(c)).toEqual(['fx__tool_0', 'fx__tool_2']);
    await c.close();
    // A token that is no JWT is refused without reaching the JWT check at all.
    const before = refusals().length;
    const r = await initialize('not-a-jwt-and-not-a-token');
    expect(r.status).toBe(401);
    expect(refusals().length).toBe(before);
  });

  it('/status on the main listener: 403 for an unmapped claim value (it lists other people\'s oidc:<value> clients); a mapped one and a static token read it', async () => {
    const get = async (token: string) => fetch(`${daemon.base}/status`, { headers: { authorization: `Bearer ${token}` } });
    const stranger = await get(await jwt({ sub: 'eve' }));
    expect(stranger.status).toBe(403);
    expect(await stranger.text()).toMatch(/Forbidden: \/status is for the clients of the config/);
    expect((await get(await jwt({ sub: 'alice' }))).status).toBe(200);
    expect((await get(CI_TOKEN)).status).toBe(200);
  });

  it('a session stays its person\'s: a later request with another JWT (or the static token) is 403; the same person\'s new JWT is accepted', async () => {
    const opened = await initialize(await jwt({ sub: 'carol' }));
    expect(opened.status).toBe(200);
    const sid = opened.headers.get('mcp-session-id')!;
    await opened.text();
    expect((await initialize(await jwt({ sub: 'dave' }), sid)).status).toBe(403);
    expect((await initialize(CI_TOKEN, sid)).status).toBe(403);
    // alice and bob-as-ci are one client (ci), yet two people: refused too.
    const a = await initialize(await jwt({ sub: 'alice' }));
    const aid = a.headers.get('mcp-session-id')!;
    await a.text();
    expect((await initialize(CI_TOKEN, aid)).status).toBe(403);
    const again = await initialize(await jwt({ sub: 'carol', jti: randomUUID() }), sid);
    expect(again.status).toBe(200);
    await again.text();
  });
});

describe('listen.auth.oidc: bad JWTs are 401 and only the reason is logged', () => {
  it('bad signature, alg none, unknown kid, wrong aud or iss, expired, not yet valid, HS256 with the public key, a claim that is no string or no safe name', async () => {
    const now = Math.floor(Date.now() / 1000);
    const good = await jwt({ sub: 'eve' });
    const [h, p] = good.split('.');
    const pem = await exportSPKI(k1.publicKey);
    const hsHeader = b64({ alg: 'HS256', kid: 'k1', typ: 'JWT' });
    const hsPayload = b64({ sub: 'eve', iss: issuer.url, aud: AUDIENCE, exp: now + 60 });
    const cases: [string, string, string][] = [
      ['bad signature', await jwt({ sub: 'eve' }, stranger), 'bad signature'],
      ['alg none', `${b64({ alg: 'none', typ: 'JWT' })}.${p}.`, 'algorithm not allowed'],
      ['unknown kid', await jwt({ sub: 'eve' }, stranger, 'nobody-knows'), "no key of the issuer's JWKS matches (unknown kid)"],
      ['wrong aud', await jwt({ sub: 'eve', aud: 'someone-else' }), 'wrong audience'],
      ['wrong iss', await jwt({ sub: 'eve', iss: 'https://evil.example.com' }), 'wrong issuer'],
      ['expired', await jwt({ sub: 'eve', exp: now - 120 }), 'expired'],
      ['nbf in the future', await jwt({ sub: 'eve', nbf: now + 600 }), 'not valid yet (nbf)'],
      ['HS256 with the public key', `${hsHeader}.${hsPayload}.${createHmac('sha256', pem).update(`${hsHeader}.${hsPayload}`).digest('base64url')}`, 'algorithm not allowed'],
      ['a claim that is no string', await jwt({ sub: 42 }), 'claim "sub" is not a non-empty string'],
      ['a claim too long', await jwt({ sub: 'x'.repeat(257) }), 'claim "sub" is not 1 to 256 visible ASCII characters'],
      ['a claim with a line break', await jwt({ sub: 'bob\n{"msg":"forged"}' }), 'claim "sub" is not 1 to 256 visible ASCII characters'],
      ['a tampered payload', `${h}.${b64({ sub: 'alice', iss: issuer.url, aud: AUDIENCE, exp: now + 60 })}.${good.split('.')[2]}`, 'bad signature'],
    ];
    for (const [what, token, reason] of cases) {
      const before = refusals().length;
      const r = await initialize(token);
      expect(r.status, what).toBe(401);
      expect(r.headers.get('www-authenticate'), what).toBe('Bearer realm="mcpmux", error="invalid_token"');
      const body = (await r.json()) as { error: { message: string } };
      expect(body.error.message, what).toBe(`Unauthorized: invalid bearer token (${reason})`);
      const logged = await waitFor(() => refusals().slice(before).find((l) => l.reason === reason), { what: `the log line for ${what}` });
      // The line is the reason and the usual fields, nothing of the token.
      expect(Object.keys(logged).sort(), what).toEqual(expect.arrayContaining(['msg', 'reason']));
      expect(JSON.stringify(logged)).not.toContain(token.split('.')[1]);
    }
    const all = daemon.stderr();
    for (const [, token] of cases) {
      expect(all).not.toContain(token);
      expect(all).not.toContain(token.split('.')[1]);
    }
    expect(all).not.toContain(good);
  });
});

describe('listen.auth.oidc: the issuer\'s keys', () => {
  it('a rotated key (a kid not in the cached JWKS) is fetched; an unreachable JWKS is a 401, not a crash', async () => {
    const ok = await initialize(await jwt({ sub: 'frank' }));
    expect(ok.status).toBe(200);
    await ok.text();
    const fetches = issuer.jwksFetches;
    issuer.published = [k1.jwk, k2.jwk];
    const c = await host(await jwt({ sub: 'frank' }, k2));
    expect((await c.callTool({ name: 'fx__echo', arguments: { rotated: true } })).structuredContent).toEqual({ rotated: true });
    await c.close();
    expect(issuer.jwksFetches).toBeGreaterThan(fetches);

    issuer.down = true;
    try {
      const before = refusals().length;
      const r = await initialize(await jwt({ sub: 'frank' }, stranger, 'k3-not-seen-yet'));
      expect(r.status).toBe(401);
      await r.text();
      const line = await waitFor(() => refusals().slice(before)[0], { what: 'the refusal line' });
      expect(line.reason).toMatch(/JWKS is unreachable/);
    } finally {
      issuer.down = false;
    }
    // Still serving: a known key needs no fetch.
    const after = await initialize(await jwt({ sub: 'frank' }));
    expect(after.status).toBe(200);
    await after.text();
  });

  it('an issuer whose JWKS never answers (jwksUrl on a closed port): 401 with the reason, the daemon serves on; a reload to the right jwksUrl lets the JWT in', async () => {
    const closed = await freePort();
    const cfg = (jwksUrl: string) => ({
      mcpServers: {},
      listen: { auth: { tokens: [{ client: 'ops', tokenEnv: 'OIDC_TEST_OPS_TOKEN' }], oidc: { issuer: issuer.url, audience: AUDIENCE, jwksUrl } } },
    });
    const file = await writeConfig(cfg(`http://127.0.0.1:${closed}/jwks`));
    const d = await startDaemon(file, { OIDC_TEST_OPS_TOKEN: CI_TOKEN });
    const token = await jwt({ sub: 'gina' });
    const r = await initialize(token, undefined, d);
    expect(r.status).toBe(401);
    expect(((await r.json()) as { error: { message: string } }).error.message).toBe("Unauthorized: invalid bearer token (the issuer's JWKS is unreachable)");
    expect((await fetch(`${d.base}/healthz`)).status).toBe(200);

    const status = async () => (await (await fetch(`${d.base}/status`, { headers: { authorization: `Bearer ${CI_TOKEN}` } })).json()) as any;
    const before = (await status()).lastReload?.at;
    writeFileSync(file, JSON.stringify(cfg(`${issuer.url}/jwks`)));
    d.child.kill('SIGHUP');
    const last = await waitFor(async () => {
      const l = (await status()).lastReload;
      return l && l.at !== before && l;
    }, { what: 'the reload applied' });
    expect(last).toMatchObject({ result: 'applied', needsRestart: [] });
    const again = await initialize(token, undefined, d);
    expect(again.status).toBe(200);
    await again.text();
    expect(d.stderr()).not.toContain(token);
    await d.stop();
  });
});
