// Issue 21, review of cluster forwarding and drain: real `mcpmux serve` daemons with `cluster`
// and one real redis-server. Where the forwarding daemon sends a retry (only to the address the
// owner signed, whatever Redis says), what it makes of the owner's refusals (503 while shutting
// down, 403 for its stamp), how long it waits for an owner that never answers, which headers it
// keeps to itself; and a SIGTERMed daemon that holds a parked call, or an open session.
// The "owners" other than real daemons are loopback listeners the test runs, named in tokens
// the test signs with the cluster's secret (as any daemon of the cluster could).

import { createHmac, hkdfSync, randomBytes } from 'node:crypto';
import http, { type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { freePort, ROOT, tempFile, waitFor, WAIT_MS } from './helpers/harness.js';
import { startRedis, stopAllRedis, type RedisServer } from './helpers/redis.js';

const MODERN = '2026-07-28';
const BRIDGE = path.join(ROOT, 'test/fixtures/bridge-upstream.mjs');
const TOOL = 'b__ask_then_work';
const ACCEPT = { q1: { action: 'accept', content: { go: true } } };
const TOKENS = { MUX_A: 'token-a-0123456789' };
const SECRET = randomBytes(32).toString('hex');
const ANSWERED_BY = 'x-mcpmux-answered-by';
const DRAIN_MS = 8000;
/** timeouts.maxMs of the daemons: a forward waits this + 5 s for the owner's answer to start. */
const MAX_MS = 3000;

interface Member {
  d: Daemon;
  id: string;
}

let redis: RedisServer;
/** The daemons every test sends retries to (A parks, B forwards). */
let A: Member;
let B: Member;

async function member(secret = SECRET): Promise<Member> {
  const port = await freePort();
  const d = await startDaemon(
    {
      mcpServers: { b: { command: process.execPath, args: [BRIDGE, JSON.stringify({ events: tempFile('bridge.jsonl') })] } },
      listen: { auth: { tokens: [{ client: 'a', tokenEnv: 'MUX_A' }] } },
      timeouts: { requestMs: MAX_MS, maxMs: MAX_MS },
      store: { redis: { url: redis.url } },
      cluster: { advertiseUrl: `http://127.0.0.1:${port}`, secretEnv: 'MCPMUX_CLUSTER_SECRET', drainMs: DRAIN_MS },
    },
    { ...TOKENS, MCPMUX_CLUSTER_SECRET: secret, MCPMUX_INPUT_TTL_MS: '120000' },
    port,
  );
  const id = /"daemon":"([0-9a-f]{16})"[^\n]*"msg":"listening"/.exec(d.stderr())?.[1];
  expect(id, 'the listening line names the daemon').toBeDefined();
  return { d, id: id! };
}

beforeAll(async () => {
  redis = await startRedis();
  A = await member();
  B = await member();
}, 90_000);

afterAll(async () => {
  await stopAllDaemons();
  await stopAllRedis();
});

/** Loopback listeners a test started: closed after it. */
const listeners: Server[] = [];
afterEach(async () => {
  for (const s of listeners.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

/** A loopback listener standing in for an owner: records what reaches it, answers with `answer` (or never). */
async function fakeOwner(answer?: (res: http.ServerResponse, body: string) => void): Promise<{ url: string; got: { headers: IncomingHttpHeaders; body: string }[] }> {
  const got: { headers: IncomingHttpHeaders; body: string }[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (c: string) => (body += c));
    req.on('end', () => {
      got.push({ headers: req.headers, body });
      answer?.(res, body);
    });
  });
  listeners.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, got };
}

/** A daemon record in Redis, as the registry writes it (src/cluster/registry.ts). */
async function record(id: string, advertiseUrl: string, ttlMs = 120_000): Promise<void> {
  await redis.cli('SET', `mcpmux:daemon:${id}`, JSON.stringify({ id, advertiseUrl, version: '0', startedAt: Date.now(), state: 'ready' }), 'PX', String(ttlMs));
}

/** A requestState naming daemon `o` at `u`, signed with the cluster's state key as any daemon of it would sign one. */
function token(o: string, u: string, exp = Date.now() + 60_000): string {
  const key = Buffer.from(hkdfSync('sha256', SECRET, 'mcpmux cluster v1', 'requestState', 32));
  const payload = Buffer.from(JSON.stringify({ id: randomBytes(16).toString('base64url'), c: 'a', t: 'x', exp, o, u })).toString('base64url');
  return `mcpmux1.${payload}.${createHmac('sha256', key).update(payload).digest('base64url')}`;
}

const meta = () => ({
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } },
  'io.modelcontextprotocol/clientInfo': { name: 'raw-modern', version: '0' },
});

/** POSTs one tools/call of the bridge's tool to `to`; `retry`: the requestState to bring back. */
async function call(to: Member, retry?: string): Promise<Response> {
  const params = { name: TOOL, arguments: { steps: 1 }, _meta: meta(), ...(retry !== undefined && { requestState: retry, inputResponses: ACCEPT }) };
  return fetch(to.d.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKENS.MUX_A}`, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': TOOL },
    body: JSON.stringify({ jsonrpc: '2.0', id: randomBytes(4).toString('hex'), method: 'tools/call', params }),
  });
}

async function messages(res: Response): Promise<any[]> {
  const text = await res.text();
  if (!res.headers.get('content-type')?.startsWith('text/event-stream')) return [JSON.parse(text)];
  return text
    .split('\n')
    .filter((l) => l.startsWith('data:') && l.length > 5)
    .map((l) => JSON.parse(l.slice(5)));
}

async function park(owner: Member): Promise<string> {
  const [first] = await messages(await call(owner));
  expect(first.result).toMatchObject({ resultType: 'input_required', requestState: expect.stringMatching(/^mcpmux1\./) });
  return first.result.requestState;
}

const GONE = 'Invalid requestState: the daemon that held this call is gone; make the call again (without requestState)';

describe('where a retry is forwarded: only to the address its owner signed', () => {
  it('a daemon record rewritten in Redis to another address draws nothing there: the host is told the owner is gone, and the daemon warns', async () => {
    const thief = await fakeOwner((res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    let answer: any;
    // The owner's heartbeat (each second) may put its record back between the rewrite and the
    // lookup: then the retry resumes on A, and the test rewrites again with a new call.
    for (let i = 0; i < 5 && answer === undefined; i++) {
      const state = await park(A);
      await record(A.id, thief.url);
      const res = await call(B, state);
      if (res.headers.get(ANSWERED_BY) === A.id) {
        await res.text();
        continue;
      }
      answer = await res.json();
    }
    expect(thief.got).toHaveLength(0);
    expect(answer.error).toMatchObject({ code: -32602, message: GONE, data: { daemon: A.id, reason: 'its address in the shared store is not the one it signed' } });
    // The log is written asynchronously: looked for until it shows.
    await waitFor(() => /"level":40[^\n]*"inStore":"http:\/\/127\.0\.0\.1:\d+"[^\n]*another address than its signed requestState/.test(B.d.stderr()), { what: 'B\'s warning', timeoutMs: WAIT_MS });
  }, 60_000);

  it('an expired token is refused by the daemon that got it: no hop to its owner', async () => {
    const res = await call(B, token(A.id, `http://127.0.0.1:${A.d.port}`, Date.now() - 1000));
    expect(res.headers.get(ANSWERED_BY)).toBeNull();
    expect((await res.json()).error).toEqual({ code: -32602, message: 'Invalid requestState: expired' });
  }, 30_000);

  it('headers the host named in its Connection header stay on its connection (RFC 9110 7.6.1)', async () => {
    const owner = await fakeOwner((res, body) => {
      const { id } = JSON.parse(body);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id, result: { content: [], resultType: 'complete' } }));
    });
    const F = randomBytes(8).toString('hex');
    await record(F, owner.url);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 'hop', method: 'tools/call', params: { name: TOOL, arguments: {}, _meta: meta(), requestState: token(F, owner.url), inputResponses: ACCEPT } });
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(B.d.url, {
        method: 'POST',
        headers: {
          connection: 'keep-alive, x-hop-secret',
          'x-hop-secret': 'only-for-the-first-hop',
          'x-end-to-end': 'kept',
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${TOKENS.MUX_A}`,
          'mcp-protocol-version': MODERN,
          'mcp-method': 'tools/call',
          'mcp-name': TOOL,
        },
      });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      req.end(body);
    });
    expect(status).toBe(200);
    expect(owner.got).toHaveLength(1);
    expect(owner.got[0]!.headers['x-end-to-end']).toBe('kept');
    expect(owner.got[0]!.headers['x-hop-secret']).toBeUndefined();
  }, 30_000);
});

describe('what the owner answers, as the host sees it', () => {
  it('an owner answering 503 (shutting down) is "gone, call again" with a 200, never a 503 a balancer would replay', async () => {
    const owner = await fakeOwner((res) => res.writeHead(503, { 'content-type': 'application/json', connection: 'close' }).end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Service Unavailable: shutting down' } })));
    const F = randomBytes(8).toString('hex');
    await record(F, owner.url);
    const res = await call(B, token(F, owner.url));
    expect(owner.got).toHaveLength(1);
    expect(res.status).toBe(200);
    expect((await res.json()).error).toMatchObject({ code: -32602, message: GONE, data: { daemon: F, reason: 'it is shutting down' } });
  }, 30_000);

  it('an owner that refuses the stamp (another cluster.secret) is a logged warning on the forwarding daemon and an internal error for the host', async () => {
    const stranger = await member(randomBytes(32).toString('hex'));
    // Listed in Redis (its first heartbeat), so that B goes on to forward to it.
    await waitFor(async () => (await listed(B, stranger.id)) !== undefined, { what: 'the stranger in B\'s /status', timeoutMs: WAIT_MS });
    const res = await call(B, token(stranger.id, `http://127.0.0.1:${stranger.d.port}`));
    expect(res.status).toBe(200);
    expect((await res.json()).error).toMatchObject({ code: -32603, message: expect.stringContaining("the cluster's daemons disagree on cluster.secret or their clocks"), data: { daemon: stranger.id } });
    const warned = new RegExp(`"level":40[^\\n]*"owner":"${stranger.id}"[^\\n]*refused this daemon's forwarding stamp`);
    await waitFor(() => warned.test(B.d.stderr()), { what: 'B\'s warning', timeoutMs: WAIT_MS });
    await stranger.d.stop();
  }, 60_000);

  it('an owner that takes the connection and never answers is given up after timeouts.maxMs and a grace: "gone"', async () => {
    const owner = await fakeOwner();
    const F = randomBytes(8).toString('hex');
    await record(F, owner.url);
    const t0 = Date.now();
    const res = await call(B, token(F, owner.url));
    const took = Date.now() - t0;
    expect(owner.got).toHaveLength(1);
    expect((await res.json()).error).toMatchObject({ code: -32602, message: GONE, data: { daemon: F, reason: `it does not answer: no answer within ${MAX_MS + 5000} ms` } });
    expect(took).toBeGreaterThanOrEqual(MAX_MS + 5000 - 100);
  }, 60_000);
});

/** The daemon `id` as `via`'s /status lists it. */
async function listed(via: Member, id: string): Promise<any> {
  const res = await fetch(`${via.d.base}/status`, { headers: { authorization: `Bearer ${TOKENS.MUX_A}` } });
  return ((await res.json()) as any).cluster?.daemons?.find((d: any) => d.id === id);
}

describe('a SIGTERMed daemon of the cluster', () => {
  it('holding a parked call and no session, drains until the call\'s retry (forwarded by another daemon) is served, then exits before drainMs', async () => {
    const V = await member();
    const state = await park(V);
    const t0 = Date.now();
    V.d.child.kill('SIGTERM');
    // Once the others see it draining, a daemon that did not wait for its parked calls is already closing.
    await waitFor(async () => (await listed(B, V.id))?.state === 'draining', { what: 'V draining in B\'s /status', timeoutMs: WAIT_MS });
    const res = await call(B, state);
    expect(res.headers.get(ANSWERED_BY)).toBe(V.id);
    const [done] = await messages(res);
    expect(done.result.resultType).toBe('complete');
    expect(JSON.parse(done.result.content[0].text)).toEqual({ action: 'accept', content: { go: true } });
    expect(await V.d.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - t0).toBeLessThan(DRAIN_MS);
    expect(V.d.stderr()).toMatch(/"parked":1[^\n]*leaving the load balancer/); // flushed: it exited
  }, 60_000);

  it('says "draining" to the others at once, not once its drain is over (an open session keeps it draining)', async () => {
    const W = await member();
    const init = await fetch(W.d.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKENS.MUX_A}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'legacy', version: '0' } } }),
    });
    expect(init.headers.get('mcp-session-id')).toBeTruthy();
    await init.text();
    expect((await listed(B, W.id))?.state).toBe('ready');
    const t0 = Date.now();
    W.d.child.kill('SIGTERM');
    await waitFor(async () => (await listed(B, W.id))?.state === 'draining', { what: 'W draining in B\'s /status', timeoutMs: DRAIN_MS / 2 });
    const seenAfter = Date.now() - t0;
    // Still serving its session (it exits only after drainMs).
    expect(await Promise.race([W.d.exited.then(() => 'exited'), Promise.resolve('running')])).toBe('running');
    console.log(`[scale-cluster-review] another daemon saw "draining" ${seenAfter} ms after SIGTERM (drainMs ${DRAIN_MS})`);
    W.d.child.kill('SIGKILL');
    await W.d.exited;
  }, 60_000);
});
