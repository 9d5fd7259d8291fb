// Load through the real daemon: 5 000 concurrent tool calls across 4 upstreams from 20 sessions
// on mixed transports (Streamable HTTP, legacy SSE, WebSocket), every result checked; the
// daemon's peak RSS is printed for docs/robustness.md. And the in-flight limit: a host past it
// gets a clear error at once, never a queue.

import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';
import { afterAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { fixture, waitFor } from './helpers/harness.js';
import { scrape, total } from './helpers/prom.js';

afterAll(stopAllDaemons);

// The SDK's WebSocket client transport expects a global WebSocket (Node 20 has none).
(globalThis as any).WebSocket ??= WebSocket;

const UPSTREAMS = ['u0', 'u1', 'u2', 'u3'];
const SESSIONS = 20;
const CALLS = 5000;

const peakRssMb = (pid: number): number => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

it('5 000 concurrent calls across 4 upstreams from 20 sessions on three transports all complete with the right results', async () => {
  const d = await startDaemon({ mcpServers: Object.fromEntries(UPSTREAMS.map((u) => [u, fixture({ name: u, tools: 0, prompts: 0, resources: 0, templates: 0 })])) });
  const kinds = ['http', 'sse', 'ws'] as const;
  const clients = await Promise.all(
    Array.from({ length: SESSIONS }, async (_, i) => {
      const kind = kinds[i % kinds.length]!;
      const client = new Client({ name: `load-${i}`, version: '0.0.0' });
      const transport =
        kind === 'http' ? new StreamableHTTPClientTransport(new URL(d.url)) : kind === 'sse' ? new SSEClientTransport(new URL(`${d.base}/sse`)) : new WebSocketClientTransport(new URL(`ws://127.0.0.1:${d.port}/ws`));
      await client.connect(transport);
      return client;
    }),
  );
  const t0 = Date.now();
  const results = await Promise.all(
    Array.from({ length: CALLS }, async (_, n) => {
      const client = clients[n % SESSIONS]!;
      const upstream = UPSTREAMS[n % UPSTREAMS.length]!;
      const r: any = await client.callTool({ name: `${upstream}__echo`, arguments: { n, session: n % SESSIONS } }, undefined, { timeout: 120_000 });
      return r.structuredContent?.n === n && r.structuredContent?.session === n % SESSIONS;
    }),
  );
  const ms = Date.now() - t0;
  expect(results.filter((ok) => !ok)).toHaveLength(0);
  const metrics = (await scrape(`${d.base}/metrics`)).samples;
  for (const u of UPSTREAMS) expect(total(metrics, 'mcpmux_requests_total', { method: 'tools/call', server: u, outcome: 'ok' })).toBe(CALLS / UPSTREAMS.length);
  await waitFor(async () => total((await scrape(`${d.base}/metrics`)).samples, 'mcpmux_requests_in_flight') === 0, { what: 'nothing left in flight' });
  // For docs/robustness.md: how long, and the daemon's peak memory (its upstreams not included).
  console.log(`load: ${CALLS} calls, ${SESSIONS} sessions, ${UPSTREAMS.length} upstreams in ${ms} ms; mcpmux peak RSS ${peakRssMb(d.child.pid!).toFixed(1)} MB`);
  await Promise.all(clients.map((c) => c.close()));
  expect((await d.stop()).code).toBe(0);
}, 180_000);

it('past limits.maxInFlightPerSession a request gets -31003 at once; the ones within complete', async () => {
  const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) }, limits: { maxInFlightPerSession: 8 } });
  const client = new Client({ name: 'limit', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(d.url)));
  // Outcomes in the order they came. The calls take 5 s: room for all 20 to arrive on a busy machine.
  const settled: string[] = [];
  const outcomes = await Promise.all(
    Array.from({ length: 20 }, () =>
      client.callTool({ name: 'fx__slow', arguments: { ms: 5000 } }).then(
        () => 'ok',
        (e: Error & { code?: number }) => (e.code === -31003 && /Too many requests in flight \(limit 8\)/.test(e.message) ? 'refused' : `other: ${e.message}`),
      ).then((o) => (settled.push(o), o)),
    ),
  );
  expect(outcomes.filter((o) => o === 'ok')).toHaveLength(8);
  expect(outcomes.filter((o) => o === 'refused')).toHaveLength(12);
  // Refused at once, not after waiting for a slot: every refusal came before any call ended.
  expect(settled.slice(0, 12)).toEqual(Array(12).fill('refused'));
  await client.close();
  await d.stop();
}, 60_000);
