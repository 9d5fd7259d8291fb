// Three clustered daemons (one shared real redis-server) behind a real HAProxy running the file
// users copy, contrib/haproxy/haproxy.cfg (issue 21, point 5): a 2026-07-28 host's stateless
// requests spread over the daemons; legacy hosts (Streamable HTTP with Mcp-Session-Id, HTTP+SSE
// with /messages?sessionId=, WebSocket) keep their session on one daemon; a daemon sent SIGTERM
// leaves the balancer at once but serves its open sessions for cluster.drainMs, then exits 0;
// a daemon killed with SIGKILL costs modern hosts nothing and its legacy hosts a 404, after
// which they initialize again on another daemon.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport as LegacyHttp } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { fixture, freePort, readEvents, ROOT, tempFile, waitFor } from './helpers/harness.js';
import path from 'node:path';
import { startHaproxy, stopAllHaproxy, type Haproxy } from './helpers/haproxy.js';
import { openLegacySse } from './helpers/legacy-sse.js';
import { scrape, total } from './helpers/prom.js';
import { startRedis, stopAllRedis, type RedisServer } from './helpers/redis.js';

// The SDK's WebSocket client transport expects a global WebSocket (Node 20 has none).
(globalThis as any).WebSocket ??= WebSocket;

const MODERN = '2026-07-28';
const SECRET_ENV = 'MCPMUX_CLUSTER_SECRET';
const ENV = { [SECRET_ENV]: 'haproxy-test-cluster-secret-0123456789abcdef' };
const NAMES = ['mcpmux1', 'mcpmux2', 'mcpmux3'] as const;
/** A legacy upstream whose tool asks the host (elicitation) before it works: the era bridge parks the call. */
const BRIDGE = path.join(ROOT, 'test/fixtures/bridge-upstream.mjs');

interface Member {
  name: string;
  daemon: Daemon;
  audit: string;
}

interface Cluster {
  redis: RedisServer;
  members: Member[];
  haproxy: Haproxy;
}

const clients: { close(): Promise<unknown> }[] = [];
/** The test's cluster, stopped after it (each test starts its own: two of them kill a daemon). */
let current: Cluster | undefined;
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
  if (!current) return;
  const { haproxy, members, redis } = current;
  current = undefined;
  await haproxy.stop();
  await Promise.allSettled(members.map((m) => m.daemon.stop()));
  await redis.stop();
});
afterAll(async () => {
  await stopAllHaproxy();
  await stopAllDaemons();
  await stopAllRedis();
});

/** Redis, three daemons configured as one cluster, and HAProxy in front of them, every server UP. */
async function startCluster(drainMs = 10_000): Promise<Cluster> {
  const redis = await startRedis();
  const members = await Promise.all(
    NAMES.map(async (name) => {
      const port = await freePort();
      const audit = tempFile(`${name}-audit.jsonl`);
      const daemon = await startDaemon(
        {
          mcpServers: { fx: fixture({ name: 'fx' }), b: { command: process.execPath, args: [BRIDGE, JSON.stringify({ events: tempFile(`${name}-bridge.jsonl`) })] } },
          store: { redis: { url: redis.url } },
          cluster: { advertiseUrl: `http://127.0.0.1:${port}`, secretEnv: SECRET_ENV, drainMs },
          audit: { path: audit, arguments: 'full' },
        },
        ENV,
        port,
      );
      return { name, daemon, audit };
    }),
  );
  const haproxy = await startHaproxy(Object.fromEntries(members.map((m) => [m.name, m.daemon.port])));
  current = { redis, members, haproxy };
  return current;
}

/** The SDK 2.x client pinned to 2026-07-28: every request stateless, no session. */
async function modernHost(h: Haproxy): Promise<Client> {
  const c = new Client({ name: 'modern-host', version: '0' }, { versionNegotiation: { mode: { pin: MODERN } }, capabilities: {} });
  await c.connect(new StreamableHTTPClientTransport(new URL(h.url)));
  clients.push(c);
  return c;
}

type LegacyKind = 'http' | 'sse' | 'ws';

/** An SDK 1.x host over Streamable HTTP (Mcp-Session-Id), legacy SSE or WebSocket, through HAProxy. */
async function legacyHost(h: Haproxy, kind: LegacyKind): Promise<{ client: LegacyClient; transport: LegacyHttp | SSEClientTransport | WebSocketClientTransport }> {
  const client = new LegacyClient({ name: `legacy-${kind}`, version: '0' });
  const transport =
    kind === 'http'
      ? new LegacyHttp(new URL(h.url))
      : kind === 'sse'
        ? new SSEClientTransport(new URL(`${h.base}/sse`))
        : new WebSocketClientTransport(new URL(`ws://127.0.0.1:${h.port}/ws`));
  await client.connect(transport);
  clients.push(client);
  return { client, transport };
}

/** Calls fx__echo with a tag only this call carries (the daemons' audit files record it). */
async function echo(c: { callTool(p: { name: string; arguments: Record<string, unknown> }): Promise<unknown> }, tag: string): Promise<void> {
  const r = (await c.callTool({ name: 'fx__echo', arguments: { tag } })) as { structuredContent?: { tag?: string } };
  expect(r.structuredContent?.tag).toBe(tag);
}

/** The members whose audit file has the call tagged `tag` (audit lines are written shortly after the answer). */
async function servedBy(cluster: Cluster, tag: string): Promise<string[]> {
  const has = (m: Member) => readEvents(m.audit).some((e) => e.method === 'tools/call' && e.arguments?.tag === tag);
  await waitFor(() => cluster.members.some(has), { what: `the audit line of ${tag}` });
  return cluster.members.filter(has).map((m) => m.name);
}

/** tools/call requests a daemon answered, from its /metrics. */
async function callsOn(m: Member): Promise<number> {
  return total((await scrape(`${m.daemon.base}/metrics`)).samples, 'mcpmux_requests_total', { method: 'tools/call' });
}

async function readyz(m: Member): Promise<{ status: number; body: any }> {
  const res = await fetch(`${m.daemon.base}/readyz`);
  return { status: res.status, body: await res.json() };
}

describe('behind HAProxy: spreading and affinity', () => {
  it('a 2026-07-28 host: stateless lists and calls spread round-robin over the three daemons, all succeed', async () => {
    const cluster = await startCluster();
    const c = await modernHost(cluster.haproxy);
    const before = await Promise.all(cluster.members.map(callsOn));
    const CALLS = 12;
    for (let i = 0; i < CALLS; i++) {
      expect((await c.listTools()).tools.map((t) => t.name)).toContain('fx__echo');
      await echo(c, `modern-${i}`);
    }
    const after = await Promise.all(cluster.members.map(callsOn));
    const each = after.map((n, i) => n - before[i]!);
    expect(each.reduce((a, b) => a + b, 0)).toBe(CALLS);
    // Round-robin with every daemon UP: each gets a share, none gets them all.
    expect(each.every((n) => n > 0), `calls per daemon: ${each}`).toBe(true);
  }, 120_000);

  it('a 2026-07-28 host: an era-bridge elicitation whose retry lands on another daemon is forwarded to the one holding the call, and completes', async () => {
    const cluster = await startCluster();
    const answeredBy: (string | null)[] = [];
    // The SDK's own fetch, watched: which retries another daemon answered (X-Mcpmux-Answered-By).
    const watched = async (url: string | URL, init?: RequestInit): Promise<Response> => {
      const res = await fetch(url, init);
      answeredBy.push(res.headers.get('x-mcpmux-answered-by'));
      return res;
    };
    const c = new Client({ name: 'modern-host', version: '0' }, { versionNegotiation: { mode: { pin: MODERN } }, capabilities: { elicitation: { form: {} } } });
    const asked: string[] = [];
    c.setRequestHandler('elicitation/create', async (req: { params: { message: string } }) => {
      asked.push(req.params.message);
      return { action: 'accept', content: { go: true } };
    });
    await c.connect(new StreamableHTTPClientTransport(new URL(cluster.haproxy.url), { fetch: watched }));
    clients.push(c);
    const CALLS = 6;
    for (let i = 0; i < CALLS; i++) {
      const r = await c.callTool({ name: 'b__ask_then_work', arguments: { steps: 1 } });
      expect(JSON.parse((r.content as { text: string }[])[0]!.text)).toEqual({ action: 'accept', content: { go: true } });
    }
    expect(asked).toHaveLength(CALLS);
    // Round-robin sends each retry to the daemon after the one that parked its call: forwarded.
    expect(answeredBy.filter((x) => x !== null).length, `forwarded retries of ${CALLS}`).toBeGreaterThan(0);
  }, 120_000);

  it('legacy hosts keep their session on one daemon: Streamable HTTP (Mcp-Session-Id), HTTP+SSE (/messages?sessionId=) and WebSocket', async () => {
    const cluster = await startCluster();
    for (const kind of ['http', 'sse', 'ws'] as const) {
      // Three sessions of each kind: round-robin puts them on different daemons.
      const hosts = await Promise.all([0, 1, 2].map(() => legacyHost(cluster.haproxy, kind)));
      const homes = new Set<string>();
      for (const [s, { client }] of hosts.entries()) {
        const tags = Array.from({ length: 10 }, (_, i) => `${kind}-${s}-${i}`);
        for (const tag of tags) await echo(client, tag);
        expect((await client.listTools()).tools.map((t) => t.name)).toContain('fx__echo');
        const served = new Set((await Promise.all(tags.map((t) => servedBy(cluster, t)))).flat());
        expect([...served], `${kind} session ${s}: one daemon served all its calls`).toHaveLength(1);
        homes.add([...served][0]!);
      }
      // Not three sessions on one daemon by luck: the balancer spread the sessions, not their requests.
      expect(homes.size, `${kind} sessions' daemons`).toBeGreaterThan(1);
    }
    // The table HAProxy learned: one entry per Streamable HTTP and SSE session (WebSocket needs none).
    const table = await cluster.haproxy.command('show table mcpmux');
    expect(/size:\d+, used:(\d+)/.exec(table)?.[1]).toBe('6');
  }, 120_000);
});

describe('behind HAProxy: draining a daemon (SIGTERM)', () => {
  it('its /readyz is 503 at once, HAProxy sends its new sessions elsewhere, its open session works until drainMs, then it exits 0', async () => {
    const DRAIN_MS = 8000;
    const cluster = await startCluster(DRAIN_MS);
    const { haproxy } = cluster;
    const { client: held } = await legacyHost(haproxy, 'http');
    await echo(held, 'held-0');
    const [home] = await servedBy(cluster, 'held-0');
    const draining = cluster.members.find((m) => m.name === home)!;
    const others = cluster.members.filter((m) => m !== draining);

    const t0 = Date.now();
    draining.daemon.child.kill('SIGTERM');
    // At once: 503 "draining" (the signal is handled within a moment; nothing else is waited for).
    const r = await waitFor(async () => ((await readyz(draining)).status === 503 ? readyz(draining) : undefined), { what: 'readyz 503', timeoutMs: 5000, intervalMs: 10 });
    expect(r.body.status).toBe('draining');
    // Asked directly, it refuses a new session with a 503 (nothing ran: HAProxy may retry it elsewhere).
    const refused = await fetch(draining.daemon.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'direct', version: '0' } } }),
    });
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as any).error.code).toBe(-31004);

    // New sessions opened right away, before HAProxy's checks even noticed: none on the
    // draining daemon (it refuses them with 503 and HAProxy retries them on another).
    const fresh = await Promise.all([0, 1, 2, 3].map(() => legacyHost(haproxy, 'http')));
    for (const [i, { client }] of fresh.entries()) await echo(client, `fresh-${i}`);
    for (let i = 0; i < fresh.length; i++) expect(others.map((m) => m.name)).toContain((await servedBy(cluster, `fresh-${i}`))[0]);

    // HAProxy takes it out of the round-robin within its checks (about 2 s).
    await haproxy.waitServer(draining.name, (s) => s.status.startsWith('DOWN'), DRAIN_MS);
    const outAfter = Date.now() - t0;
    expect(outAfter).toBeLessThan(DRAIN_MS);

    // The open session still reaches it, through HAProxy, while it drains. Until half of
    // drainMs only (and twice at least): an echo started later could, on a loaded machine,
    // still run when it exits.
    let n = 1;
    while (n <= 2 || Date.now() - t0 < DRAIN_MS / 2) {
      const tag = `held-${n++}`;
      await echo(held, tag);
      expect(await servedBy(cluster, tag)).toEqual([draining.name]);
    }
    expect(n).toBeGreaterThan(2);
    // Stateless requests meanwhile go to the others only.
    const modern = await modernHost(haproxy);
    for (let i = 0; i < 6; i++) await echo(modern, `during-${i}`);
    for (let i = 0; i < 6; i++) expect(others.map((m) => m.name)).toContain((await servedBy(cluster, `during-${i}`))[0]);

    // Then it exits 0, not before drainMs (a session was open all along).
    const exit = await draining.daemon.exited;
    const took = Date.now() - t0;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(took).toBeGreaterThanOrEqual(DRAIN_MS - 100);
    expect(draining.daemon.stderr()).toContain('leaving the load balancer');

    // Its session is gone: 404, and the host initializes again, on another daemon.
    await expect(held.callTool({ name: 'fx__echo', arguments: { tag: 'held-after' } })).rejects.toThrow(/404|Session not found/);
    const { client: again } = await legacyHost(haproxy, 'http');
    await echo(again, 'again-0');
    expect(others.map((m) => m.name)).toContain((await servedBy(cluster, 'again-0'))[0]);
  }, 120_000);

  it('Ctrl-C (SIGINT) does not drain: a clustered daemon with an open session stops at once', async () => {
    const cluster = await startCluster(60_000);
    const { client } = await legacyHost(cluster.haproxy, 'sse');
    await echo(client, 'sigint-0');
    const [home] = await servedBy(cluster, 'sigint-0');
    const m = cluster.members.find((x) => x.name === home)!;
    const t0 = Date.now();
    m.daemon.child.kill('SIGINT');
    expect(await m.daemon.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - t0).toBeLessThan(30_000);
    expect(m.daemon.stderr()).not.toContain('leaving the load balancer');
  }, 120_000);

  it('without open sessions a draining daemon exits as soon as nothing is in flight', async () => {
    const cluster = await startCluster(30_000);
    const m = cluster.members[0]!;
    const t0 = Date.now();
    m.daemon.child.kill('SIGTERM');
    expect(await m.daemon.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - t0).toBeLessThan(15_000);
  }, 120_000);
});

describe('behind HAProxy: a daemon killed (SIGKILL) mid-traffic', () => {
  it('modern hosts carry on through the others; its legacy sessions get 404 and initialize again on another daemon', async () => {
    const cluster = await startCluster();
    const { haproxy } = cluster;
    // One legacy Streamable HTTP session and one legacy SSE session on each daemon.
    const http = await Promise.all([0, 1, 2].map(() => legacyHost(haproxy, 'http')));
    const homes = new Map<string, LegacyClient>();
    for (const [i, { client }] of http.entries()) {
      await echo(client, `pre-${i}`);
      homes.set((await servedBy(cluster, `pre-${i}`))[0]!, client);
    }
    const victim = cluster.members.find((m) => homes.has(m.name))!;
    const others = cluster.members.filter((m) => m !== victim);
    const doomed = homes.get(victim.name)!;

    const sseData: string[] = [];
    const sse = await Promise.all([0, 1, 2].map(() => openLegacySse(haproxy.base, (d) => sseData.push(d))));
    clients.push(...sse);
    const init = (id: number) => JSON.stringify({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'sse', version: '0' } } });
    for (const [i, s] of sse.entries()) expect((await s.post(init(100 + i))).status).toBe(202);
    await waitFor(() => [0, 1, 2].every((i) => sseData.some((d) => d.includes(`"id":${100 + i}`))), { what: 'the SSE sessions initialized' });
    for (const [i, s] of sse.entries()) {
      expect((await s.post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }))).status).toBe(202);
      expect((await s.post(JSON.stringify({ jsonrpc: '2.0', id: 200 + i, method: 'tools/call', params: { name: 'fx__echo', arguments: { tag: `sse-${i}` } } }))).status).toBe(202);
    }
    const sseOnVictim = [];
    for (let i = 0; i < sse.length; i++) if ((await servedBy(cluster, `sse-${i}`))[0] === victim.name) sseOnVictim.push(sse[i]!);
    expect(sseOnVictim).toHaveLength(1);

    // A modern host calling all along.
    const modern = await modernHost(haproxy);
    let ok = 0;
    const failed: string[] = [];
    let stop = false;
    let okAfterKill = 0;
    let killed = false;
    const traffic = (async () => {
      for (let i = 0; !stop; i++) {
        try {
          await echo(modern, `traffic-${i}`);
          ok++;
          if (killed) okAfterKill++;
        } catch (err) {
          failed.push((err as Error).message);
        }
      }
    })();
    await waitFor(() => ok >= 10, { what: 'modern traffic under way' });
    victim.daemon.child.kill('SIGKILL');
    killed = true;
    await victim.daemon.exited;
    // HAProxy notices it (connection refused, twice) and takes it out.
    await haproxy.waitServer(victim.name, (s) => s.status.startsWith('DOWN'));
    await waitFor(() => okAfterKill >= 30, { what: 'modern calls after the kill', timeoutMs: 30_000 });
    stop = true;
    await traffic;
    // The call in flight on the killed daemon may fail, and one sent on a kept-alive connection
    // to it before its reset reached HAProxy; every other call went through the others.
    console.log(`SIGKILL mid-traffic: ${ok} modern calls answered (${okAfterKill} after the kill), ${failed.length} failed`);
    expect(failed.length, failed.join('\n')).toBeLessThanOrEqual(2);

    // Its Streamable HTTP session: 404 through HAProxy (the request went to another daemon),
    // then the host initializes again, on a daemon that is alive.
    await expect(doomed.callTool({ name: 'fx__echo', arguments: { tag: 'doomed' } })).rejects.toThrow(/404|Session not found/);
    const { client: again } = await legacyHost(haproxy, 'http');
    await echo(again, 'again-http');
    expect(others.map((m) => m.name)).toContain((await servedBy(cluster, 'again-http'))[0]);
    // The sessions on the other daemons are untouched.
    for (const [name, client] of homes) if (name !== victim.name) await echo(client, `still-${name}`);

    // Its SSE session: the POST of its session now gets 404 too; a new /sse stream works elsewhere.
    const lost = await sseOnVictim[0]!.post(JSON.stringify({ jsonrpc: '2.0', id: 300, method: 'tools/list' }));
    expect(lost.status).toBe(404);
    const { client: againSse } = await legacyHost(haproxy, 'sse');
    await echo(againSse, 'again-sse');
    expect(others.map((m) => m.name)).toContain((await servedBy(cluster, 'again-sse'))[0]);
  }, 180_000);
});
