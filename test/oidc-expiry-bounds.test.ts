// Review fixes of issue 22 for hosts signed in with OIDC: a WebSocket or legacy SSE session ends
// when its JWT expires (the real HTTP front and host sessions of `mcpmux serve`, in this
// process, a local issuer on loopback); the issuer's discovery document is read with a size
// bound (the real OidcVerifier against a loopback issuer that sends megabytes).

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { parseConfig } from '../src/config/load.js';
import { createRuntime, type Runtime } from '../src/cli/runtime.js';
import { HttpServer } from '../src/transport/http/server.js';
import { OidcVerifier } from '../src/transport/http/oidc.js';
import { makeKey, OidcIssuer, type IssuerKey } from './helpers/oidc-issuer.js';
import { WAIT_MS } from './helpers/harness.js';

const AUDIENCE = 'mcpmux-expiry-test';
const issuer = new OidcIssuer();
let key: IssuerKey;
let runtime: Runtime;
let server: HttpServer;
let base = '';

/** A JWT for `sub` that expires `seconds` from now. */
const jwt = (sub: string, seconds: number) => issuer.sign(key, AUDIENCE, { sub, exp: Math.floor(Date.now() / 1000) + seconds });

beforeAll(async () => {
  await issuer.start();
  key = await makeKey('e1', 'ES256');
  issuer.published = [key.jwk];
  const config = parseConfig(JSON.stringify({ mcpServers: {}, listen: { auth: { oidc: { issuer: issuer.url, audience: AUDIENCE } } } }), '/tmp/oidc-expiry.json', {});
  runtime = createRuntime(config, { logLevel: 'warn', logFormat: 'json' });
  server = new HttpServer({
    host: '127.0.0.1',
    port: 0,
    allowedOrigins: [],
    tokens: [],
    oidc: config.listen.auth.oidc,
    toolsets: {},
    maxMessageBytes: 1 << 20,
    maxSessions: 16,
    maxSessionsPerClient: 16,
    log: runtime.log,
    readiness: () => ({ ready: true }),
    open: (transport, { client, toolset, stateless, hostToken }) => runtime.openSession(transport, 'http', { client, toolset, hostToken }, stateless),
  });
  runtime.router.start();
  base = `http://127.0.0.1:${(await server.listen()).port}`;
});

afterAll(async () => {
  await server?.close();
  await runtime?.router.close();
  await issuer.stop();
});

const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } };

describe('a connection session lives no longer than its JWT', () => {
  it('WebSocket: answered before the exp; at the exp closed with 1008 "token expired"', async () => {
    const token = await jwt('hana', 3);
    const exp = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).exp * 1000;
    const ws = new WebSocket(`${base.replace('http', 'ws')}/ws`, 'mcp', { headers: { authorization: `Bearer ${token}` } });
    const closed = new Promise<{ code: number; reason: string; at: number }>((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString(), at: Date.now() })));
    try {
      await new Promise((resolve, reject) => {
        ws.once('open', resolve);
        ws.once('error', reject);
      });
      const answers: any[] = [];
      ws.on('message', (d) => answers.push(JSON.parse(d.toString())));
      ws.send(JSON.stringify(INIT));
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }));
      const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the socket was not closed at the exp')), exp - Date.now() + WAIT_MS));
      const c = await Promise.race([closed, timeout]);
      expect(answers.map((a) => a.id).sort()).toEqual([1, 2]);
      expect(c.code).toBe(1008);
      expect(c.reason).toBe('token expired');
      expect(c.at).toBeGreaterThanOrEqual(exp - 50);
    } finally {
      ws.terminate();
    }
  }, WAIT_MS + 10_000);

  it('legacy SSE: the stream ends at the exp of the latest JWT (a POST with a newer one keeps it open until that one expires)', async () => {
    const first = await jwt('ines', 2);
    const firstExp = JSON.parse(Buffer.from(first.split('.')[1]!, 'base64url').toString()).exp * 1000;
    const ac = new AbortController();
    const res = await fetch(`${base}/sse`, { headers: { authorization: `Bearer ${first}`, accept: 'text/event-stream' }, signal: ac.signal });
    try {
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      let text = '';
      while (!/event: endpoint\ndata: (\S+)/.test(text)) text += new TextDecoder().decode((await reader.read()).value);
      const endpoint = /event: endpoint\ndata: (\S+)/.exec(text)![1]!;
      const second = await jwt('ines', 5);
      const secondExp = JSON.parse(Buffer.from(second.split('.')[1]!, 'base64url').toString()).exp * 1000;
      const posted = await fetch(`${base}${endpoint}`, { method: 'POST', headers: { authorization: `Bearer ${second}`, 'content-type': 'application/json' }, body: JSON.stringify(INIT) });
      expect(posted.status).toBe(202);
      // Read to the end of the stream (bounded): it ends at the second JWT's exp, not the first's.
      const deadline = setTimeout(() => ac.abort(), secondExp - Date.now() + WAIT_MS);
      let ended = false;
      try {
        for (;;) {
          const { done } = await reader.read();
          if (done) break;
        }
        ended = true;
      } catch {
        // aborted by the deadline: never ended
      } finally {
        clearTimeout(deadline);
      }
      const at = Date.now();
      expect(ended).toBe(true);
      expect(at).toBeGreaterThan(firstExp);
      expect(at).toBeGreaterThanOrEqual(secondExp - 50);
    } finally {
      ac.abort();
    }
  }, WAIT_MS + 15_000);
});

describe('Streamable HTTP re-authenticates each request; its GET stream (one request that lasts) ends at the exp', () => {
  it('the GET stream ends when the latest JWT expires; the session goes on with a new JWT', async () => {
    const headers = (token: string, sid?: string) => ({
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(sid && { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' }),
    });
    const token = await jwt('kai', 3);
    const exp = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).exp * 1000;
    const init = await fetch(`${base}/mcp`, { method: 'POST', headers: headers(token), body: JSON.stringify({ ...INIT, params: { ...INIT.params, protocolVersion: '2025-11-25' } }) });
    expect(init.status).toBe(200);
    const sid = init.headers.get('mcp-session-id')!;
    await init.text();
    const done = await fetch(`${base}/mcp`, { method: 'POST', headers: headers(token, sid), body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
    expect(done.status).toBe(202);
    const ac = new AbortController();
    const deadline = setTimeout(() => ac.abort(), exp - Date.now() + WAIT_MS);
    let ended = false;
    try {
      const get = await fetch(`${base}/mcp`, { headers: { ...headers(token, sid), accept: 'text/event-stream' }, signal: ac.signal });
      expect(get.status).toBe(200);
      const reader = get.body!.getReader();
      for (;;) if ((await reader.read()).done) break;
      ended = true;
    } catch {
      // aborted by the deadline: never ended
    } finally {
      clearTimeout(deadline);
    }
    expect(ended).toBe(true);
    expect(Date.now()).toBeGreaterThanOrEqual(exp - 50);
    // The session itself stays: the next request with a new JWT of the same person is answered.
    const ping = await fetch(`${base}/mcp`, { method: 'POST', headers: headers(await jwt('kai', 60), sid), body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }) });
    expect(ping.status).toBe(200);
    expect(await ping.text()).toContain('"id":2');
  }, WAIT_MS + 15_000);
});

describe('the issuer discovery document', () => {
  let huge: Server;
  let hugeUrl = '';
  let sentBytes = 0;
  const MB = 1 << 20;

  beforeAll(async () => {
    // A discovery document of 50 MB (valid JSON, chunked: no content-length to refuse up front).
    huge = createServer((req, res) => {
      if (req.url !== '/.well-known/openid-configuration') return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(`{"issuer":"${hugeUrl}","jwks_uri":"${issuer.url}/jwks","padding":"`);
      const chunk = 'x'.repeat(MB);
      let left = 50;
      const more = (): void => {
        while (left > 0) {
          left--;
          sentBytes += MB;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end('"}');
      };
      res.on('close', () => (left = 0));
      more();
    });
    await new Promise<void>((r) => huge.listen(0, '127.0.0.1', r));
    hugeUrl = `http://127.0.0.1:${(huge.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    huge.closeAllConnections();
    await new Promise((r) => huge.close(r));
  });

  it('one larger than 256 KiB is not read on: the JWT is refused, and the log says why', async () => {
    const lines: any[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        cb();
      },
    });
    const verifier = new OidcVerifier(
      { issuer: hugeUrl, audience: [AUDIENCE], clientClaim: 'sub', clients: {}, algorithms: ['ES256', 'RS256'] },
      pino({ level: 'info' }, sink),
    );
    const token = await new (await import('jose')).SignJWT({ sub: 'jon' })
      .setProtectedHeader({ alg: 'ES256', kid: 'e1', typ: 'JWT' })
      .setIssuer(hugeUrl)
      .setAudience(AUDIENCE)
      .setExpirationTime('1m')
      .sign(key.privateKey);
    const result = await verifier.verify(token);
    expect(result).toEqual({ ok: false, reason: "the issuer's discovery document is larger than 262144 bytes" });
    expect(lines.some((l) => l.msg === 'OIDC discovery failed: JWTs are refused until it succeeds' && /larger than/.test(l.reason))).toBe(true);
    expect(lines.some((l) => l.msg === 'host JWT refused' && /larger than/.test(l.reason))).toBe(true);
    // It stopped reading long before the end (the server gave up writing when the socket closed).
    expect(sentBytes).toBeLessThan(50 * MB);
  }, 30_000);

  it('a jwks_uri that stops answering is discovered again (the IdP moved its keys)', async () => {
    // An issuer whose discovery document names /keys-a, later /keys-b; /keys-a then goes away.
    let keysAt = '/keys-a';
    const moved = createServer((req, res) => {
      if (req.url === '/.well-known/openid-configuration') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer: url, jwks_uri: `${url}${keysAt}` }));
      if (req.url === keysAt) return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: keysAt === '/keys-a' ? [key.jwk] : [key.jwk, rotated.jwk] }));
      req.socket.destroy(); // the old address: unreachable
    });
    const rotated = await makeKey('e2', 'ES256');
    await new Promise<void>((r) => moved.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(moved.address() as AddressInfo).port}`;
    const saved = process.env.MCPMUX_JWKS_COOLDOWN_MS;
    process.env.MCPMUX_JWKS_COOLDOWN_MS = '0';
    try {
      const verifier = new OidcVerifier({ issuer: url, audience: [AUDIENCE], clientClaim: 'sub', clients: {}, algorithms: ['ES256'] }, pino({ level: 'silent' }));
      const { SignJWT } = await import('jose');
      const signed = (k: IssuerKey) => new SignJWT({ sub: 'lea' }).setProtectedHeader({ alg: 'ES256', kid: k.kid }).setIssuer(url).setAudience(AUDIENCE).setExpirationTime('1m').sign(k.privateKey);
      expect((await verifier.verify(await signed(key))).ok).toBe(true);
      keysAt = '/keys-b';
      // A new kid: the old key set is fetched again and fails; the next JWT discovers /keys-b.
      expect(await verifier.verify(await signed(rotated))).toMatchObject({ ok: false });
      expect((await verifier.verify(await signed(rotated))).ok).toBe(true);
    } finally {
      if (saved === undefined) delete process.env.MCPMUX_JWKS_COOLDOWN_MS;
      else process.env.MCPMUX_JWKS_COOLDOWN_MS = saved;
      moved.closeAllConnections();
      await new Promise((r) => moved.close(r));
    }
  }, 30_000);
});
