// SessionPort.hostToken() (issue 22): the real HTTP front and the real host sessions of
// `mcpmux serve` (createRuntime + HttpServer, in this process so the sessions can be asked),
// a local OIDC issuer on loopback. Each authenticated request of a session renews its JWT, on
// Streamable HTTP, legacy SSE (/sse then /messages), WebSocket and 2026-07-28 requests alike;
// static-token sessions have none; another person's JWT on the session is refused and renews
// nothing.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { parseConfig } from '../src/config/load.js';
import { createRuntime, type Runtime } from '../src/cli/runtime.js';
import type { HostSession } from '../src/session/host-session.js';
import { HttpServer } from '../src/transport/http/server.js';
import { makeKey, OidcIssuer, type IssuerKey } from './helpers/oidc-issuer.js';
import { waitFor } from './helpers/harness.js';

const AUDIENCE = 'mcpmux-session-test';
const STATIC = 'static-token-for-ci-0123456789';
const issuer = new OidcIssuer();
let key: IssuerKey;
let runtime: Runtime;
let server: HttpServer;
let base = '';
const sessions: HostSession[] = [];

const jwt = (sub: string, extra: Record<string, unknown> = {}) => issuer.sign(key, AUDIENCE, { sub, ...extra });
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } };

function post(token: string, body: unknown, sessionId?: string, path = '/mcp'): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(sessionId && { 'mcp-session-id': sessionId }) },
    body: JSON.stringify(body),
  });
}

/** The host session the last request opened. */
const newest = () => sessions.at(-1)!;

beforeAll(async () => {
  await issuer.start();
  key = await makeKey('s1', 'ES256');
  issuer.published = [key.jwk];
  const config = parseConfig(
    JSON.stringify({ mcpServers: {}, listen: { auth: { tokens: [{ client: 'ci', tokenEnv: 'S_TOKEN' }], oidc: { issuer: issuer.url, audience: AUDIENCE } } } }),
    '/tmp/oidc-session.json',
    { S_TOKEN: STATIC },
  );
  runtime = createRuntime(config, { logLevel: 'warn', logFormat: 'json' });
  server = new HttpServer({
    host: '127.0.0.1',
    port: 0,
    allowedOrigins: [],
    tokens: config.listen.auth.tokens,
    oidc: config.listen.auth.oidc,
    toolsets: {},
    maxMessageBytes: 1 << 20,
    maxSessions: 16,
    maxSessionsPerClient: 16,
    log: runtime.log,
    readiness: () => ({ ready: true }),
    // What serve.ts does, keeping each session so the test can ask it.
    open: (transport, { client, toolset, stateless, hostToken }) => {
      const s = runtime.openSession(transport, 'http', { client, toolset, hostToken }, stateless);
      sessions.push(s);
      return s;
    },
  });
  runtime.router.start();
  base = `http://127.0.0.1:${(await server.listen()).port}`;
});

afterAll(async () => {
  await server?.close();
  await runtime?.router.close();
  await issuer.stop();
});

describe('SessionPort.hostToken()', () => {
  it('Streamable HTTP: the initialize JWT, then each later request\'s; another person\'s JWT is 403 and changes nothing', async () => {
    const first = await jwt('carol', { jti: 'a' });
    const init = await post(first, INIT);
    expect(init.status).toBe(200);
    await init.text();
    const sid = init.headers.get('mcp-session-id')!;
    const carol = newest();
    expect(carol.client).toBe('oidc:carol');
    expect(carol.hostToken()).toBe(first);

    const second = await jwt('carol', { jti: 'b' });
    const ping = await post(second, { jsonrpc: '2.0', id: 2, method: 'ping' }, sid);
    expect(ping.status).toBe(200);
    await ping.text();
    expect(carol.hostToken()).toBe(second);

    const other = await post(await jwt('dave'), { jsonrpc: '2.0', id: 3, method: 'ping' }, sid);
    expect(other.status).toBe(403);
    expect(carol.hostToken()).toBe(second);

    // Overlapping requests: a JWT that expires sooner, arriving later, does not replace a newer one.
    const now = Math.floor(Date.now() / 1000);
    const longer = await jwt('carol', { jti: 'c', exp: now + 600 });
    const shorter = await jwt('carol', { jti: 'd', exp: now + 300 });
    for (const [i, t] of [longer, shorter].entries()) {
      const r = await post(t, { jsonrpc: '2.0', id: 10 + i, method: 'ping' }, sid);
      expect(r.status).toBe(200);
      await r.text();
    }
    expect(carol.hostToken()).toBe(longer);
  });

  it('a 2026-07-28 request (no session): its own JWT', async () => {
    const token = await jwt('hana');
    const envelope = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' } };
    const r = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: envelope } }),
    });
    expect(r.status).toBe(200);
    await r.text();
    const hana = newest();
    expect([hana.client, hana.stateless]).toEqual(['oidc:hana', true]);
    expect(hana.hostToken()).toBe(token);
  });

  it('a static-token session has none', async () => {
    const init = await post(STATIC, INIT);
    expect(init.status).toBe(200);
    await init.text();
    expect(newest().client).toBe('ci');
    expect(newest().hostToken()).toBeUndefined();
  });

  it('legacy SSE: the GET /sse JWT, renewed by each POST /messages', async () => {
    const first = await jwt('erin', { jti: 'a' });
    const ac = new AbortController();
    const res = await fetch(`${base}/sse`, { headers: { authorization: `Bearer ${first}`, accept: 'text/event-stream' }, signal: ac.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = '';
    while (!/event: endpoint\ndata: (\S+)/.test(text)) text += new TextDecoder().decode((await reader.read()).value);
    const endpoint = /event: endpoint\ndata: (\S+)/.exec(text)![1];
    const erin = newest();
    expect(erin.client).toBe('oidc:erin');
    expect(erin.hostToken()).toBe(first);
    const second = await jwt('erin', { jti: 'b' });
    expect((await post(second, INIT, undefined, endpoint)).status).toBe(202);
    expect(erin.hostToken()).toBe(second);
    expect((await post(await jwt('frank'), { jsonrpc: '2.0', id: 2, method: 'ping' }, undefined, endpoint)).status).toBe(403);
    expect(erin.hostToken()).toBe(second);
    ac.abort();
  });

  it('WebSocket: the upgrade\'s JWT', async () => {
    const token = await jwt('gwen');
    const ws = new WebSocket(`${base.replace('http', 'ws')}/ws`, 'mcp', { headers: { authorization: `Bearer ${token}` } });
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    const gwen = await waitFor(() => sessions.find((s) => s.client === 'oidc:gwen'));
    expect(gwen.hostToken()).toBe(token);
    ws.close();
    // A bad JWT never becomes a session: 401 at the upgrade.
    const refused = new WebSocket(`${base.replace('http', 'ws')}/ws`, 'mcp', { headers: { authorization: `Bearer ${await jwt('gwen', { exp: 1 })}` } });
    const status = await new Promise<number>((resolve) => refused.once('unexpected-response', (_req, res) => resolve(res.statusCode!)));
    expect(status).toBe(401);
  });

  it('limits.maxSessionsPerClient counts each unmapped person as the client oidc:<value>', async () => {
    const tight = new HttpServer({
      host: '127.0.0.1', port: 0, allowedOrigins: [], tokens: [], oidc: runtime.config.listen.auth.oidc, toolsets: {},
      maxMessageBytes: 1 << 20, maxSessions: 16, maxSessionsPerClient: 1, log: runtime.log, readiness: () => ({ ready: true }),
      open: (transport, { client, toolset, stateless, hostToken }) => runtime.openSession(transport, 'http', { client, toolset, hostToken }, stateless),
    });
    const at = `http://127.0.0.1:${(await tight.listen()).port}/mcp`;
    try {
      const status = async (sub: string) => {
        const r = await fetch(at, { method: 'POST', headers: { authorization: `Bearer ${await jwt(sub)}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify(INIT) });
        await r.text();
        return r.status;
      };
      expect(await status('ivy')).toBe(200);
      expect(await status('ivy')).toBe(503);
      expect(await status('jack')).toBe(200);
    } finally {
      await tight.close();
    }
  });
});
