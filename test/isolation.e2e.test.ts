// What one host or one upstream does must not reach the others (issue 11): a slow upstream
// blocks neither another server nor another session's calls to the same server, and a
// Streamable HTTP session that never opens a GET stream holds at most 1 MB (256 messages) of
// what waits for it.

import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { fixture, ROOT, waitFor } from './helpers/harness.js';

afterAll(stopAllDaemons);

const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');

async function host(d: Daemon, name: string): Promise<Client> {
  const c = new Client({ name, version: '0' }, { capabilities: {} });
  await c.connect(new StreamableHTTPClientTransport(new URL(d.url)));
  return c;
}

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' };

describe('isolation', () => {
  it('no head-of-line blocking: while a call to one server hangs, the same session calls another server and another session calls the same one', async () => {
    const d = await startDaemon({ mcpServers: { one: fixture({ name: 'one' }), two: fixture({ name: 'two' }) } });
    const a = await host(d, 'a');
    const b = await host(d, 'b');
    let slowSettled = false;
    const slow = a.callTool({ name: 'one__slow', arguments: { ms: 60_000 } }, undefined, { timeout: 90_000 }).finally(() => (slowSettled = true));
    slow.catch(() => {});
    // The hanging call is with the upstream (counted in flight there) before the others start.
    await waitFor(async () => (await (await fetch(`${d.base}/status`)).json()).upstreams.find((u: any) => u.name === 'one').inFlight === 1, { what: 'the slow call in flight' });
    const answers = await Promise.all([
      a.callTool({ name: 'two__echo', arguments: { who: 'a-two' } }),
      b.callTool({ name: 'one__echo', arguments: { who: 'b-one' } }),
      b.callTool({ name: 'two__echo', arguments: { who: 'b-two' } }),
      ...Array.from({ length: 20 }, (_, i) => b.callTool({ name: 'one__echo', arguments: { i } })),
    ]);
    expect(answers.slice(0, 3).map((r) => r.structuredContent)).toEqual([{ who: 'a-two' }, { who: 'b-one' }, { who: 'b-two' }]);
    expect(answers.slice(3).map((r) => (r.structuredContent as { i: number }).i)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(slowSettled).toBe(false);
    await a.close();
    await b.close();
    await d.stop();
  }, 60_000);

  it('a Streamable HTTP session without a GET stream holds at most 1 MB (and 256 messages) of log messages for it, said once; a GET then gets the newest', async () => {
    // "logs": "broadcast": the loud host's calls log to every session, the idle one's too.
    const d = await startDaemon({ mcpServers: { bad: { command: process.execPath, args: [BAD, '{}'], logs: 'broadcast' } } });
    // The idle host: initialized, then never opens a GET stream while the flood goes by.
    const init = await fetch(d.url, {
      method: 'POST',
      headers: HEADERS,
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'idle', version: '0' } } }),
    });
    const sid = init.headers.get('mcp-session-id')!;
    await init.text();
    const post = (body: object) => fetch(d.url, { method: 'POST', headers: { ...HEADERS, 'mcp-session-id': sid }, body: JSON.stringify(body) });
    expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);

    // Another host floods every session with 3 MB of log messages (3 000 of ~1 KB).
    const loud = await host(d, 'loud');
    await loud.callTool({ name: 'bad__misbehave', arguments: { mode: 'notify-flood', n: 3000, pad: 1000 } });
    await waitFor(() => d.stderr().includes('SSE buffer full: undelivered messages are being dropped (said once per session)'), { what: 'the drop said' });

    // The idle host opens its GET stream now: what waited comes first, then a marker.
    const ac = new AbortController();
    const get = await fetch(d.url, { headers: { accept: 'text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' }, signal: ac.signal });
    expect(get.status).toBe(200);
    const reader = get.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    await loud.callTool({ name: 'bad__misbehave', arguments: { mode: 'notify-flood', n: 1, tag: 'marker' } });
    const deadline = Date.now() + 15_000;
    while (!text.includes('marker 0') && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    ac.abort();
    expect(text).toContain('marker 0');
    const waited = text.slice(0, text.indexOf('marker 0'));
    const floods = waited.match(/flood (\d+)/g) ?? [];
    // Bounded: at most 1 MB and at most 256 messages (the replay window), the newest, the last included.
    expect(Buffer.byteLength(waited)).toBeLessThan(1024 * 1024);
    expect(floods.length).toBe(256);
    expect(floods[0]).toBe('flood 2744');
    expect(floods.at(-1)).toBe('flood 2999');
    expect(d.stderr().split('SSE buffer full').length - 1).toBe(1);
    await loud.close();
    await d.stop();
  }, 60_000);
});
