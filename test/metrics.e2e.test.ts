// /metrics through the real binary: valid exposition text, counters and histograms that move by
// exactly the number of calls, denials and limitings counted, upstream state, bounded labels;
// on `serve`, on its admin port, and on `stdio --admin-port`.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { closeAll, fixture, ROOT, startRawMux, waitFor, writeConfig, freePort } from './helpers/harness.js';
import { scrape, total, type Sample } from './helpers/prom.js';

afterEach(closeAll);
afterAll(stopAllDaemons);

const MODERN = '2026-07-28';

async function httpHost(d: Daemon): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'metrics-test', version: '0.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(d.url));
  await client.connect(transport);
  return { client, transport };
}

const ARG = 'argument-value-4c1d9e';
const calls = (s: Sample[], server: string, outcome = 'ok') => total(s, 'mcpmux_requests_total', { method: 'tools/call', server, outcome });
const count = (s: Sample[], name: string, server: string) => total(s, name, { method: 'tools/call', server });

describe('metrics on mcpmux serve', () => {
  it('counters and histograms grow by exactly the number of calls; denials and limitings move; labels stay bounded', async () => {
    const d = await startDaemon({
      mcpServers: { fx: fixture({ name: 'fx' }), other: fixture({ name: 'other' }) },
      policy: { tools: { deny: ['fx__whoami'] } },
      rateLimits: [{ server: 'other', perMinute: 1, burst: 1 }],
    });
    const { client, transport } = await httpHost(d);
    const first = await scrape(`${d.base}/metrics`);
    expect(first.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    const before = first.samples;

    const N = 7;
    for (let i = 0; i < N; i++) await client.callTool({ name: 'fx__echo', arguments: { value: ARG, i } });
    await expect(client.callTool({ name: 'fx__whoami' })).rejects.toThrow(/denied by policy/);
    expect((await client.callTool({ name: 'other__echo' })).isError).toBeFalsy();
    expect((await client.callTool({ name: 'other__echo' })).isError).toBe(true);

    const { samples: after, text } = await scrape(`${d.base}/metrics`);
    expect(calls(after, 'fx') - calls(before, 'fx')).toBe(N);
    expect(count(after, 'mcpmux_request_duration_seconds_count', 'fx') - count(before, 'mcpmux_request_duration_seconds_count', 'fx')).toBe(N + 1);
    expect(total(after, 'mcpmux_request_duration_seconds_count', { method: 'tools/call', server: 'fx', outcome: 'ok' })).toBe(N);
    expect(total(after, 'mcpmux_upstream_request_duration_seconds_count', { method: 'tools/call', server: 'fx' })).toBe(N);
    expect(calls(after, 'fx', 'denied')).toBe(1);
    expect(calls(after, 'other', 'limited')).toBe(1);
    expect(total(after, 'mcpmux_policy_denials_total', { server: 'fx', kind: 'tools', client: 'anonymous' })).toBe(1);
    expect(total(after, 'mcpmux_rate_limited_total', { server: 'other', client: 'anonymous' })).toBe(1);
    expect(total(after, 'mcpmux_request_bytes_total', { method: 'tools/call', server: 'fx', direction: 'in' })).toBeGreaterThan(N * ARG.length);
    expect(total(after, 'mcpmux_request_bytes_total', { method: 'tools/call', server: 'fx', direction: 'out' })).toBeGreaterThan(N * ARG.length);
    expect(total(after, 'mcpmux_upstream_up', { server: 'fx' })).toBe(1);
    expect(total(after, 'mcpmux_sessions', { transport: 'http' })).toBe(1);
    expect(total(after, 'mcpmux_requests_in_flight')).toBe(0);
    expect(total(after, 'mcpmux_build_info')).toBe(1);
    expect(total(after, 'process_resident_memory_bytes')).toBeGreaterThan(0);

    // No label value carries a session id or an argument value.
    const values = after.flatMap((s) => Object.values(s.labels));
    expect(transport.sessionId).toBeTruthy();
    expect(text).not.toContain(transport.sessionId!);
    expect(text).not.toContain(ARG);
    expect(values.filter((v) => /^[0-9a-f]{8}-[0-9a-f]{4}-/.test(v) || /^[A-Za-z0-9_-]{40,}$/.test(v))).toEqual([]);
  });

  it('an unknown method is counted as "other", and an upstream that dies is down, then up again', async () => {
    const d = await startDaemon({ mcpServers: { fx: { ...fixture({ name: 'fx' }), restart: { maxRetries: 3, backoffMs: 50 } } } });
    const { client } = await httpHost(d);
    await expect(client.request({ method: 'made/up-1', params: {} } as any, {} as any)).rejects.toThrow();
    await expect(client.request({ method: 'made/up-2', params: {} } as any, {} as any)).rejects.toThrow();
    await expect(client.callTool({ name: 'fx__crash' })).rejects.toThrow();
    const m = await waitFor(async () => {
      const { samples } = await scrape(`${d.base}/metrics`);
      return total(samples, 'mcpmux_upstream_restarts_total', { server: 'fx' }) >= 1 && total(samples, 'mcpmux_upstream_up', { server: 'fx' }) === 1 && samples;
    }, { timeoutMs: 10_000, what: 'fx restarted and up' });
    expect(total(m, 'mcpmux_requests_total', { method: 'other', outcome: 'error' })).toBe(2);
    expect(m.some((s) => Object.values(s.labels).some((v) => v.startsWith('made/')))).toBe(false);
    expect(calls(m, 'fx', 'unavailable')).toBe(1);
  });

  it('2026-07-28 methods (server/discover, subscriptions/listen) have their own method label, not "other"', async () => {
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) } });
    const envelope = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' } };
    const post = (method: string, params: object, signal?: AbortSignal) =>
      fetch(d.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN, 'mcp-method': method },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: envelope } }),
        signal,
      });
    expect((await post('server/discover', {})).status).toBe(200);
    // A listen stream is a request that lasts: it is counted when the host ends it.
    const ac = new AbortController();
    const listen = await post('subscriptions/listen', { notifications: { toolsListChanged: true } }, ac.signal);
    const reader = listen.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('notifications/subscriptions/acknowledged');
    ac.abort();
    const m = await waitFor(async () => {
      const { samples } = await scrape(`${d.base}/metrics`);
      return total(samples, 'mcpmux_requests_total', { method: 'subscriptions/listen' }) === 1 && samples;
    }, { what: 'the listen request counted' });
    expect(total(m, 'mcpmux_requests_total', { method: 'server/discover', outcome: 'ok' })).toBe(1);
    expect(total(m, 'mcpmux_requests_total', { method: 'other' })).toBe(0);
    await d.stop();
  });

  it('metrics.toolLabel adds the public tool name, up to toolLabelLimit names, then "other"', async () => {
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) }, metrics: { toolLabel: true, toolLabelLimit: 2 } });
    const { client } = await httpHost(d);
    for (const t of ['fx__echo', 'fx__whoami', 'fx__tool_0', 'fx__tool_1']) await client.callTool({ name: t, arguments: {} });
    const { samples } = await scrape(`${d.base}/metrics`);
    const tools = samples.filter((s) => s.name === 'mcpmux_requests_total' && s.labels.method === 'tools/call').map((s) => [s.labels.tool, s.value]);
    expect(tools.sort()).toEqual([['fx__echo', 1], ['fx__whoami', 1], ['other', 2]]);
  });

  it('moves to listen.adminPort with the other operator routes', async () => {
    const admin = await freePort();
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) }, listen: { adminPort: admin } });
    expect(d.stderr()).toContain(`"adminPort":${admin}`);
    // Listening comes before the upstream is ready: it is 0 while it starts.
    await waitFor(async () => total((await scrape(`http://127.0.0.1:${admin}/metrics`)).samples, 'mcpmux_upstream_up', { server: 'fx' }) === 1, { what: 'fx up' });
    expect((await fetch(`${d.base}/metrics`)).status).toBe(404);
  });
});

describe('contrib/: the dashboard and the alert rules', () => {
  it('name only metrics that mcpmux exports', async () => {
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) } });
    const { text } = await scrape(`${d.base}/metrics`);
    // Every family mcpmux declares, with the series names a histogram or summary expands to.
    const exported = new Set<string>();
    for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      exported.add(name!);
      if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exported.add(name! + suffix);
    }
    const dashboard = JSON.parse(readFileSync(path.join(ROOT, 'contrib/grafana/mcpmux-dashboard.json'), 'utf8'));
    const exprs: string[] = dashboard.panels.flatMap((p: { targets?: { expr: string }[] }) => (p.targets ?? []).map((t) => t.expr));
    const rules = readFileSync(path.join(ROOT, 'contrib/prometheus/alerts.yml'), 'utf8');
    const used = new Set([...exprs.join('\n').matchAll(/\b(?:mcpmux|process|nodejs)_[a-z0-9_]+/g), ...rules.matchAll(/\b(?:mcpmux|process|nodejs)_[a-z0-9_]+/g)].map((m) => m[0]));
    expect(exprs.length).toBeGreaterThan(10);
    expect(used.size).toBeGreaterThan(10);
    expect([...used].filter((name) => !exported.has(name))).toEqual([]);
  });
});

describe('metrics on mcpmux stdio', () => {
  it('--admin-port serves /metrics, /healthz and /readyz beside the stdio session', async () => {
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) } }), { args: ['--admin-port', '0'] });
    const port = await waitFor(() => /"msg":"admin listening"/.test(peer.stderr()) && Number(/"port":(\d+),[^\n]*"admin listening"/.exec(peer.stderr())?.[1]), {
      what: 'the admin port',
    });
    await peer.initialize();
    for (let i = 0; i < 3; i++) await peer.request('tools/call', { name: 'fx__echo', arguments: { i } });
    const base = `http://127.0.0.1:${port}`;
    const { samples } = await scrape(`${base}/metrics`);
    expect(calls(samples, 'fx')).toBe(3);
    expect(total(samples, 'mcpmux_sessions', { transport: 'stdio' })).toBe(1);
    expect(total(samples, 'mcpmux_requests_total', { method: 'initialize', server: '', client: 'anonymous', outcome: 'ok' })).toBe(1);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect(await (await fetch(`${base}/readyz`)).json()).toEqual({ status: 'ready', sessions: 1 });
    expect((await fetch(`${base}/mcp`)).status).toBe(404);
    expect((await fetch(`${base}/metrics`, { headers: { origin: 'https://evil.example' } })).status).toBe(403);
    expect((await peer.close()).code).toBe(0);
  });
});
