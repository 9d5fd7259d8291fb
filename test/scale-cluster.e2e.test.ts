// Issue 21, point 4 and point 6's /status: several `mcpmux serve` daemons with `cluster` and one
// real redis-server. A 2026-07-28 host's requests may land on any daemon: a call parked by the
// era bridge (a legacy upstream asks the host something mid-call) stays with the daemon that
// parked it, and a retry that lands on another daemon is forwarded there. Raw HTTP hosts (the
// checks a client library would not make) and the SDK 2.x client with a fetch that sends each
// request to the next daemon in turn (no affinity at all).

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { freePort, readEvents, ROOT, runMux, tempFile, waitFor, WAIT_MS } from './helpers/harness.js';
import { startRedis, stopAllRedis, type RedisServer } from './helpers/redis.js';

const MODERN = '2026-07-28';
const BRIDGE = path.join(ROOT, 'test/fixtures/bridge-upstream.mjs');
const TOOL = 'b__ask_then_work';
const ACCEPT = { q1: { action: 'accept', content: { go: true } } };
const TOKENS = { MUX_A: 'token-a-0123456789', MUX_B: 'token-b-0123456789' };
const SECRET = randomBytes(32).toString('hex');
const ANSWERED_BY = 'x-mcpmux-answered-by';

interface Member {
  d: Daemon;
  id: string;
  events: string;
}

let redis: RedisServer;
/** A, B and C: C is the one killed at the end. */
let A: Member;
let B: Member;
let C: Member;

/** One daemon of the cluster on a port picked first (its advertiseUrl names it), with its own bridge upstream. */
async function member(): Promise<Member> {
  const port = await freePort();
  const events = tempFile('bridge.jsonl');
  const d = await startDaemon(
    {
      mcpServers: { b: { command: process.execPath, args: [BRIDGE, JSON.stringify({ events })] } },
      listen: { auth: { tokens: [{ client: 'a', tokenEnv: 'MUX_A' }, { client: 'b', tokenEnv: 'MUX_B' }] } },
      store: { redis: { url: redis.url } },
      cluster: { advertiseUrl: `http://127.0.0.1:${port}`, secretEnv: 'MCPMUX_CLUSTER_SECRET' },
    },
    { ...TOKENS, MCPMUX_CLUSTER_SECRET: SECRET, MCPMUX_INPUT_TTL_MS: '120000' },
    port,
  );
  const id = /"daemon":"([0-9a-f]{16})"[^\n]*"msg":"listening"/.exec(d.stderr())?.[1];
  expect(id, 'the listening line names the daemon').toBeDefined();
  return { d, id: id!, events };
}

beforeAll(async () => {
  redis = await startRedis();
  // One after the other: three cold starts at once on a loaded 2-core machine can each take long.
  A = await member();
  B = await member();
  C = await member();
}, 90_000);

afterAll(async () => {
  await stopAllDaemons();
  await stopAllRedis();
});

/** A modern request's `_meta`. */
const meta = (progressToken?: string) => ({
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } },
  'io.modelcontextprotocol/clientInfo': { name: 'raw-modern', version: '0' },
  ...(progressToken !== undefined && { progressToken }),
});

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKENS.MUX_A}`, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': TOOL };

/** The cluster's forwarding key, derived from the secret as every daemon does (src/cluster/identity.ts). */
const forwardKey = () => Buffer.from(hkdfSync('sha256', SECRET, 'mcpmux cluster v1', 'forwarded request', 32));

/** POSTs one tools/call of the bridge's tool to `to`; `retry`: the requestState to bring back (answered). */
async function call(to: Member, opts: { retry?: string; progressToken?: string; token?: string; headers?: Record<string, string> } = {}): Promise<Response> {
  const params = { name: TOOL, arguments: { steps: 2 }, _meta: meta(opts.progressToken), ...(opts.retry !== undefined && { requestState: opts.retry, inputResponses: ACCEPT }) };
  return fetch(to.d.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${opts.token ?? TOKENS.MUX_A}`,
      'mcp-protocol-version': MODERN,
      'mcp-method': 'tools/call',
      'mcp-name': TOOL,
      ...opts.headers,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: randomBytes(4).toString('hex'), method: 'tools/call', params }),
  });
}

/** The JSON-RPC messages of an answer: its JSON body, or each `data:` of its SSE stream. */
async function messages(res: Response): Promise<any[]> {
  const text = await res.text();
  if (!res.headers.get('content-type')?.startsWith('text/event-stream')) return [JSON.parse(text)];
  return text
    .split('\n')
    .filter((l) => l.startsWith('data:') && l.length > 5)
    .map((l) => JSON.parse(l.slice(5)));
}

/** Starts the bridge's call on `owner`: its input_required answer's requestState. `progressToken`: the upstream sends progress once resumed. */
async function park(owner: Member, progressToken?: string): Promise<string> {
  const [first] = await messages(await call(owner, progressToken === undefined ? {} : { progressToken }));
  expect(first.result).toMatchObject({ resultType: 'input_required', inputRequests: { q1: { method: 'elicitation/create' } }, requestState: expect.stringMatching(/^mcpmux1\./) });
  return first.result.requestState;
}

/** The tools/call requests an upstream received (its daemon ran the call). */
const callsAt = (m: Member) => readEvents(m.events).filter((e) => e.type === 'in' && e.method === 'tools/call').length;
/** Elicitation answers an upstream received (a parked call was resumed there). */
const answersAt = (m: Member) => readEvents(m.events).filter((e) => e.type === 'in' && e.method === undefined && e.params === undefined).length;

async function status(m: Member): Promise<any> {
  const res = await fetch(`${m.d.base}/status`, { headers: { authorization: `Bearer ${TOKENS.MUX_A}` } });
  expect(res.status).toBe(200);
  return res.json();
}

describe('the cluster\'s daemons as Redis knows them', () => {
  it('/status on any daemon lists all three (id, address, state, age), says which is itself, and the store\'s health', async () => {
    const ids = [A.id, B.id, C.id].sort();
    for (const m of [A, B, C]) {
      const s = await waitFor(async () => {
        const got = await status(m);
        return got.cluster?.daemons?.length === 3 ? got : undefined;
      }, { what: 'three daemons in /status', timeoutMs: WAIT_MS });
      expect(s.cluster).toMatchObject({ id: m.id, advertiseUrl: `http://127.0.0.1:${m.d.port}`, state: 'ready', store: { health: 'up' } });
      expect(s.cluster.daemons.map((d: any) => d.id).sort()).toEqual(ids);
      for (const d of s.cluster.daemons) {
        const who = [A, B, C].find((x) => x.id === d.id)!;
        expect(d).toMatchObject({ advertiseUrl: `http://127.0.0.1:${who.d.port}`, state: 'ready', self: d.id === m.id, uptimeS: expect.any(Number), seenMsAgo: expect.any(Number) });
        expect(d.seenMsAgo).toBeLessThan(5_000);
      }
    }
    // `mcpmux status` says the same in words.
    const out = await runMux(['status', '--url', B.d.base], { env: { ...process.env, MCPMUX_TOKEN: TOKENS.MUX_A } });
    expect(out.status).toBe(0);
    expect(out.stdout).toContain(`cluster: this daemon ${B.id} at http://127.0.0.1:${B.d.port} (ready), store up`);
    for (const m of [A, B, C]) expect(out.stdout).toMatch(new RegExp(`^  ${m.id}  http://127\\.0\\.0\\.1:${m.d.port}  ready .*${m === B ? '\\(this one\\)' : 'ms ago'}$`, 'm'));
    // In Redis, under the key prefix: one entry per daemon, with a TTL the heartbeat renews.
    const ttl = Number(await redis.cli('PTTL', `mcpmux:daemon:${A.id}`));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(5_000);
  }, 60_000);
});

describe('a 2026-07-28 host needs no affinity: a retry on another daemon is forwarded to the one holding its call', () => {
  it('raw: the call parked on A, its retry sent to B, resumes on A; A\'s progress and answer come back through B as an SSE stream', async () => {
    const callsBefore = [callsAt(A), callsAt(B)];
    const state = await park(A, 'first');
    expect(callsAt(A)).toBe(callsBefore[0]! + 1);
    const res = await call(B, { retry: state, progressToken: 'via-b' });
    expect(res.status).toBe(200);
    expect(res.headers.get(ANSWERED_BY)).toBe(A.id);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const all = await messages(res);
    const progress = all.filter((m) => m.method === 'notifications/progress');
    expect(progress.map((p) => [p.params.progressToken, p.params.progress])).toEqual([
      ['via-b', 1],
      ['via-b', 2],
    ]);
    const done = all.at(-1);
    expect(done.result.resultType).toBe('complete');
    expect(JSON.parse(done.result.content[0].text)).toEqual({ action: 'accept', content: { go: true } });
    // A's upstream got the answer and worked; B's upstream never saw the call.
    expect(readEvents(A.events).filter((e) => e.type === 'progress_sent').length).toBeGreaterThanOrEqual(2);
    expect(callsAt(B)).toBe(callsBefore[1]);
  }, 60_000);

  it('the SDK 2.x client with every request sent to the next daemon in turn: list, call, and an elicitation answered across daemons', async () => {
    const members = [A, B, C];
    let turn = 0;
    const answeredBy: (string | null)[] = [];
    const roundRobin = async (url: string | URL, init?: RequestInit): Promise<Response> => {
      const to = members[turn++ % members.length]!;
      const res = await fetch(new URL(new URL(url).pathname + new URL(url).search, to.d.base), init);
      answeredBy.push(res.headers.get(ANSWERED_BY));
      return res;
    };
    const c = new Client({ name: 'modern-host', version: '0' }, { versionNegotiation: { mode: { pin: MODERN } }, capabilities: { elicitation: { form: {} } } });
    const asked: string[] = [];
    c.setRequestHandler('elicitation/create', async (req: { params: { message: string } }) => {
      asked.push(req.params.message);
      return { action: 'accept', content: { go: true } };
    });
    await c.connect(new StreamableHTTPClientTransport(new URL(A.d.url), { fetch: roundRobin, requestInit: { headers: { authorization: `Bearer ${TOKENS.MUX_A}` } } }));
    try {
      expect((await c.listTools()).tools.map((t) => t.name)).toContain(TOOL);
      for (let i = 0; i < 3; i++) {
        const r = await c.callTool({ name: TOOL, arguments: { steps: 1 } });
        expect(JSON.parse((r.content as any)[0].text)).toEqual({ action: 'accept', content: { go: true } });
      }
      expect(asked).toEqual(['Go on?', 'Go on?', 'Go on?']);
      // Each retry went to the daemon after the one that parked its call: each was forwarded.
      expect(answeredBy.filter((x) => x !== null)).toHaveLength(3);
    } finally {
      await c.close();
    }
  }, 60_000);

  it('20 retries sent to their owner and 20 sent to another daemon all complete (the cost of the hop is logged)', async () => {
    // Interleaved, so that warm-up and the machine's load fall on both alike.
    const direct: number[] = [];
    const forwarded: number[] = [];
    for (let i = 0; i < 40; i++) {
      const state = await park(A);
      const t0 = performance.now();
      const [done] = await messages(await call(i % 2 ? B : A, { retry: state }));
      (i % 2 ? forwarded : direct).push(performance.now() - t0);
      expect(done.result.resultType).toBe('complete');
    }
    direct.sort((a, b) => a - b);
    forwarded.sort((a, b) => a - b);
    const p50 = (xs: number[]) => xs[Math.floor(xs.length / 2)]!.toFixed(1);
    console.log(`[scale-cluster] retry p50: ${p50(direct)} ms on the owner, ${p50(forwarded)} ms forwarded from another daemon`);
  }, 120_000);

  it('a replayed token (already redeemed on its owner) is refused by the owner, and that answer comes back through whichever daemon got it', async () => {
    const state = await park(A);
    const [done] = await messages(await call(B, { retry: state }));
    expect(done.result.resultType).toBe('complete');
    for (const via of [B, C]) {
      const res = await call(via, { retry: state });
      expect(res.headers.get(ANSWERED_BY)).toBe(A.id);
      expect((await res.json()).error).toEqual({ code: -32602, message: 'Invalid requestState: already used, or its call has ended' });
    }
    // On the owner itself, as before.
    expect((await (await call(A, { retry: state })).json()).error).toEqual({ code: -32602, message: 'Invalid requestState: already used, or its call has ended' });
  }, 60_000);

  it('a forged token and an altered one sent to B are refused there and never forwarded; the real one still resumes the call afterwards', async () => {
    const answersBefore = answersAt(A);
    const state = await park(A);
    const [payload, mac] = state.slice('mcpmux1.'.length).split('.') as [string, string];
    // Altered: the payload made to name another client (its MAC no longer matches).
    const p = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const altered = `mcpmux1.${Buffer.from(JSON.stringify({ ...p, c: 'b' })).toString('base64url')}.${mac}`;
    // Forged: a well-formed token naming A as its owner, signed with a key that is not the cluster's.
    const fake = Buffer.from(JSON.stringify({ ...p, id: randomBytes(16).toString('base64url') })).toString('base64url');
    const forged = `mcpmux1.${fake}.${createHmac('sha256', randomBytes(32)).update(fake).digest('base64url')}`;
    for (const token of [altered, forged]) {
      const res = await call(B, { retry: token });
      expect(res.headers.get(ANSWERED_BY)).toBeNull();
      expect((await res.json()).error).toEqual({ code: -32602, message: 'Invalid requestState: not issued by this mcpmux, or altered' });
    }
    // A another client's token: checked on the owner (the token is genuine), refused there.
    const other = await call(C, { retry: state, token: TOKENS.MUX_B });
    expect(other.headers.get(ANSWERED_BY)).toBe(A.id);
    expect((await other.json()).error).toEqual({ code: -32602, message: 'Invalid requestState: issued to another client' });
    expect(answersAt(A)).toBe(answersBefore);
    // The parked call is still there for the real retry.
    const [done] = await messages(await call(B, { retry: state }));
    expect(JSON.parse(done.result.content[0].text)).toEqual({ action: 'accept', content: { go: true } });
    expect(answersAt(A)).toBe(answersBefore + 1);
  }, 60_000);

  it('a host cannot pass for a daemon: a made-up X-Mcpmux-Forwarded stamp is refused (403); a genuine stamp whose token names a third daemon is answered "gone", never forwarded again', async () => {
    const state = await park(A);
    for (const stamp of [`v1 ${B.id} ${Date.now()} ${randomBytes(32).toString('base64url')}`, 'v1 nonsense', `v1 ${B.id} 1 x`]) {
      const res = await call(A, { retry: state, headers: { 'x-mcpmux-forwarded': stamp } });
      expect(res.status).toBe(403);
      expect((await res.json()).error.message).toMatch(/^Forbidden: x-mcpmux-forwarded is (malformed|stale|not signed with this cluster's secret)/);
    }
    // A genuine stamp (made here with the cluster's secret, as B would) on a retry whose token names
    // C, sent to A: A is not C (C restarted at A's address, as far as the stamp knows); never forwarded again.
    const misrouted = await park(C);
    const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 'm', method: 'tools/call', params: { name: TOOL, arguments: {}, _meta: meta(), requestState: misrouted, inputResponses: ACCEPT } }));
    const ts = String(Date.now());
    const digest = createHash('sha256').update(body).digest('base64url');
    const sig = createHmac('sha256', forwardKey()).update(`v1\n${B.id}\n${ts}\nPOST\n/mcp\n${digest}`).digest('base64url');
    const res = await fetch(A.d.url, { method: 'POST', headers: { ...HEADERS, 'x-mcpmux-forwarded': `v1 ${B.id} ${ts} ${sig}` }, body });
    expect(res.status).toBe(200);
    expect(res.headers.get(ANSWERED_BY)).toBeNull();
    expect((await res.json()).error).toMatchObject({ code: -32602, data: { daemon: C.id, reason: 'the daemon at its address is another one now (it restarted)' } });
    // Nothing was redeemed: the real retries resume the calls.
    for (const [token, via] of [[state, C], [misrouted, A]] as const) {
      const [done] = await messages(await call(via, { retry: token }));
      expect(done.result.resultType).toBe('complete');
    }
  }, 60_000);

  it('over a WebSocket (no forwarding there) another daemon\'s token is refused, saying to retry over HTTP /mcp', async () => {
    const state = await park(A);
    const ws = new WebSocket(`ws://127.0.0.1:${B.d.port}/ws`, ['mcp'], { headers: { authorization: `Bearer ${TOKENS.MUX_A}` } });
    try {
      await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
      const answer = new Promise<any>((resolve) => ws.on('message', (m) => void (JSON.parse(String(m)).id === 'ws' && resolve(JSON.parse(String(m))))));
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: 'ws', method: 'tools/call', params: { name: TOOL, arguments: {}, _meta: meta(), requestState: state, inputResponses: ACCEPT } }));
      expect((await answer).error).toEqual({
        code: -32602,
        message: 'Invalid requestState: its call is held by another mcpmux daemon of this cluster; send the retry over HTTP (/mcp), which forwards it there',
      });
    } finally {
      ws.close();
    }
    const [done] = await messages(await call(B, { retry: state }));
    expect(done.result.resultType).toBe('complete');
  }, 60_000);
});

describe('through the forward, as on the owner', () => {
  it('the host closing the retry\'s response on B cancels the call on A (its upstream is told to stop)', async () => {
    const events = () => readEvents(A.events);
    const abortedBefore = events().filter((e) => e.type === 'aborted').length;
    const [first] = await messages(
      await fetch(A.d.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKENS.MUX_A}`, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': TOOL },
        body: JSON.stringify({ jsonrpc: '2.0', id: 'held', method: 'tools/call', params: { name: TOOL, arguments: { steps: 1, hold: true }, _meta: meta('held-1') } }),
      }),
    );
    const ac = new AbortController();
    const res = await fetch(B.d.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKENS.MUX_A}`, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': TOOL },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'held-retry', method: 'tools/call', params: { name: TOOL, arguments: { steps: 1, hold: true }, _meta: meta('held-2'), requestState: first.result.requestState, inputResponses: ACCEPT } }),
      signal: ac.signal,
    });
    expect(res.headers.get(ANSWERED_BY)).toBe(A.id);
    // The first progress notice (A's upstream working on) arrives through B; then the host gives up.
    const reader = res.body!.getReader();
    let seen = '';
    while (!seen.includes('notifications/progress')) seen += new TextDecoder().decode((await reader.read()).value);
    expect(seen).toContain('"progressToken":"held-2"');
    ac.abort();
    await waitFor(() => events().filter((e) => e.type === 'aborted').length > abortedBefore, { what: 'the upstream on A told to stop', timeoutMs: WAIT_MS });
  }, 60_000);
});

describe('Redis down', () => {
  it('a retry on another daemon is still forwarded (the owner\'s address is in the signed token); /status says the list cannot be read; back, the daemons register again', async () => {
    const state = await park(A);
    await redis.kill();
    try {
      const s = await waitFor(async () => {
        const got = await status(B);
        return got.cluster.store.health === 'down' ? got : undefined;
      }, { what: 'B sees the store down', timeoutMs: WAIT_MS });
      expect(s.cluster.daemons).toBeNull();
      expect(s.cluster.error).toMatch(/^cannot read the cluster's daemons from the shared store/);
      const res = await call(B, { retry: state });
      expect(res.headers.get(ANSWERED_BY)).toBe(A.id);
      const [done] = await messages(res);
      expect(JSON.parse(done.result.content[0].text)).toEqual({ action: 'accept', content: { go: true } });
    } finally {
      await redis.restart();
    }
    // A Redis that lost everything (no persistence) learns the daemons again from their next heartbeats.
    await waitFor(async () => {
      const got = await status(C);
      return got.cluster.store.health === 'up' && got.cluster.daemons?.length === 3 ? true : undefined;
    }, { what: 'three daemons listed again', timeoutMs: WAIT_MS });
  }, 60_000);
});

describe('a daemon killed with SIGKILL', () => {
  it('its parked calls fail clearly on the others (the host is told to call again), and it leaves the list within the TTL', async () => {
    const state = await park(C);
    C.d.child.kill('SIGKILL');
    await C.d.exited;
    const killedAt = Date.now();
    // At once (Redis still lists it for up to 5 s): it does not answer.
    const res = await call(B, { retry: state });
    expect(res.headers.get(ANSWERED_BY)).toBeNull();
    const { error } = await res.json();
    expect(error).toMatchObject({
      code: -32602,
      message: 'Invalid requestState: the daemon that held this call is gone; make the call again (without requestState)',
      data: { daemon: C.id, reason: expect.stringMatching(/^it does not answer: (ECONNREFUSED|ECONNRESET|EPIPE)/) },
    });
    // Within the TTL (5 s; bound generous for a loaded machine) the others' /status no longer lists it.
    await waitFor(async () => {
      const s = await status(A);
      return s.cluster.daemons.length === 2 && !s.cluster.daemons.some((d: any) => d.id === C.id) ? true : undefined;
    }, { what: 'C gone from the list', timeoutMs: 15_000 });
    const leftAfterMs = Date.now() - killedAt;
    expect(leftAfterMs).toBeLessThan(10_000);
    console.log(`[scale-cluster] a SIGKILLed daemon left the list after ${leftAfterMs} ms (TTL 5000 ms)`);
    // Now the registry says so before anything is tried.
    const again = await (await call(A, { retry: state })).json();
    expect(again.error).toMatchObject({ code: -32602, data: { daemon: C.id, reason: 'it is no longer in the cluster' } });
    // The others carry on: a new call on B completes through A.
    const [done] = await messages(await call(A, { retry: await park(B) }));
    expect(done.result.resultType).toBe('complete');
  }, 60_000);
});
