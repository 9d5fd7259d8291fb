// Remote upstreams through the built mcpmux: Streamable HTTP, legacy HTTP+SSE (explicit and via
// the spec's probe) and WebSocket, against test/fixtures/http-upstream.mjs (the SDK fixture
// server logic over the network). One fixture process serves the whole file; every test marks
// its requests with its own X-Test-Run header so it reads only its own entries of the events file.
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { startHttpFixture, type Fixture } from './helpers/http-fixture.js';
import { closeAll, readEvents, startMux, startRawMux, tempFile, waitFor, waitForEvent, writeConfig, type RawPeer, freePort } from './helpers/harness.js';

/** The upstream credential in the config: must reach the fixture, never mcpmux's logs. */
const SECRET = 'upstream-secret-0f9c2e7a';

let fx: Fixture;
beforeAll(async () => {
  fx = await startHttpFixture({ name: 'web' });
});
afterAll(() => fx?.close());
afterEach(closeAll);

const textOf = (r: any) => r.content[0].text as string;
const jsonOf = (r: any) => JSON.parse(textOf(r));

/** A remote server entry carrying the secret and this test's marker header. */
function remote(entry: object, run: string, extra: object = {}): object {
  return { ...entry, headers: { Authorization: `Bearer ${SECRET}`, 'X-Test-Run': run }, ...extra };
}

/** mcpmux with these servers (and config keys), with an SDK Client as the host. */
function mux(servers: Record<string, object>, config: object = {}) {
  return startMux({ mcpServers: servers, ...config });
}

/**
 * mcpmux as a raw JSON-RPC peer, initialized with the sampling capability. The SDK Client is not
 * used where message order matters: it dispatches notifications a microtask late, so progress
 * that arrives in the same chunk as the result is dropped.
 */
async function rawMux(servers: Record<string, object>): Promise<RawPeer> {
  // Debug logs: the most chances for a secret to leak into them.
  const peer = startRawMux(await writeConfig({ mcpServers: servers }), { args: ['--log-level', 'debug'] });
  await peer.initialize({ protocolVersion: '2025-11-25', capabilities: { sampling: {} }, clientInfo: { name: 'raw-host', version: '0.0.0' } });
  return peer;
}

let callIds = 0;
/** tools/call with an id of its own (and a progress token if given); resolves with the response. */
function call(peer: RawPeer, name: string, args: object, progressToken?: string): Promise<any> {
  const id = `call-${++callIds}`;
  const params = { name, arguments: args, ...(progressToken && { _meta: { progressToken } }) };
  peer.send({ jsonrpc: '2.0', id, method: 'tools/call', params });
  return peer.next((m) => m.id === id && !('method' in m), 10_000);
}

/** The HTTP requests (and WebSocket upgrades) the fixture saw from test run `run`, in order. */
const httpOf = (run: string): any[] => readEvents(fx.events).filter((e) => e.type === 'http' && e.headers['x-test-run'] === run);

/** Whether an MCP event of the fixture belongs to a session that test run `run` opened. */
const isOurs = (run: string, e: any): boolean => httpOf(run).some((r) => r.headers['mcp-session-id'] === e.session);

const TRANSPORTS = [
  { label: 'Streamable HTTP', entry: () => ({ url: `${fx.url}/mcp` }), kind: 'http' },
  { label: 'legacy HTTP+SSE (type "sse")', entry: () => ({ url: `${fx.url}/sse`, type: 'sse' }), kind: 'sse' },
  { label: 'legacy HTTP+SSE found by the Streamable HTTP probe', entry: () => ({ url: `${fx.url}/sse`, type: 'http' }), kind: 'sse', probe: true },
  { label: 'WebSocket', entry: () => ({ url: `${fx.url.replace('http:', 'ws:')}/ws` }), kind: 'ws' },
];

describe.each(TRANSPORTS)('$label upstream', ({ entry, kind, probe }) => {
  it('lists, calls, relays progress and sampling, and sends the config headers', async () => {
    const run = randomUUID();
    const peer = await rawMux({ web: remote(entry(), run) });
    const names = (await peer.request('tools/list', {})).result.tools.map((t: any) => t.name);
    expect(names).toEqual(expect.arrayContaining(['web__tool_0', 'web__echo', 'web__progress', 'web__sample']));

    const echo = await peer.request('tools/call', { name: 'web__echo', arguments: { a: 1, b: ['x'] } });
    expect(echo.result.structuredContent).toEqual({ a: 1, b: ['x'] });
    expect(jsonOf((await peer.request('tools/call', { name: 'web__session_info' })).result).transport).toBe(kind);

    // Progress: every step, with the host's token, before the result.
    const done = await call(peer, 'web__progress', { steps: 3 }, 'tok-1');
    expect(textOf(done.result)).toBe('done 3');
    const progress = peer.messages.filter((m) => m.method === 'notifications/progress' && m.params.progressToken === 'tok-1');
    expect(progress.map((m) => m.params.progress)).toEqual([1, 2, 3]);
    expect(peer.messages.indexOf(progress[2])).toBeLessThan(peer.messages.indexOf(done));

    // Sampling: the upstream's request reaches the host, the host's answer reaches the upstream.
    const sampled = call(peer, 'web__sample', { text: 'hello' });
    const req = await peer.next((m) => m.method === 'sampling/createMessage');
    expect(req.params.messages[0].content.text).toBe('hello');
    peer.send({ jsonrpc: '2.0', id: req.id, result: { model: 'test-model', role: 'assistant', content: { type: 'text', text: 'sampled' } } });
    expect(jsonOf((await sampled).result)).toMatchObject({ model: 'test-model', content: { text: 'sampled' } });

    // The config's credential arrived on every request (for WebSocket: on the upgrade) ...
    const seen = httpOf(run);
    if (probe) {
      // initialize POSTed to the URL (405), then the legacy stream opened on the same URL.
      expect(seen.slice(0, 2).map((r) => `${r.method} ${r.path}`)).toEqual(['POST /sse', 'GET /sse']);
    }
    expect(seen.length).toBeGreaterThan(0);
    for (const r of seen) expect(r.headers.authorization).toBe(`Bearer ${SECRET}`);
    // ... and never appeared in mcpmux's logs.
    expect(peer.stderr()).not.toContain(SECRET);
  });
});

describe('Streamable HTTP upstream', () => {
  it('sends Mcp-Session-Id and MCP-Protocol-Version after initialize, opens the GET stream, DELETEs the session at the end', async () => {
    const run = randomUUID();
    const peer = await mux({ web: remote({ url: `${fx.url}/mcp` }, run) });
    const { session } = jsonOf(await peer.client.callTool({ name: 'web__session_info' }));
    await waitFor(() => httpOf(run).some((r) => r.method === 'GET'), { what: 'the GET stream' });
    await peer.close();
    await waitFor(() => httpOf(run).some((r) => r.method === 'DELETE'), { what: 'DELETE' });
    const [init, ...rest] = httpOf(run);
    expect(init).toMatchObject({ method: 'POST', path: '/mcp' });
    expect(init.headers.accept).toBe('application/json, text/event-stream');
    expect(init.headers['content-type']).toBe('application/json');
    expect(init.headers).not.toHaveProperty('mcp-session-id');
    expect(init.headers).not.toHaveProperty('mcp-protocol-version');
    expect(rest.length).toBeGreaterThan(2);
    for (const r of rest) expect(r.headers).toMatchObject({ 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' });
    expect(rest.find((r) => r.method === 'GET').headers.accept).toBe('text/event-stream');
  });

  it('delivers server-initiated messages from the GET stream', async () => {
    const run = randomUUID();
    let changed = 0;
    const { client } = await mux({ web: remote({ url: `${fx.url}/mcp` }, run) });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
    await client.listTools();
    await waitFor(() => httpOf(run).some((r) => r.method === 'GET'), { what: 'the GET stream' });
    await fetch(`${fx.url}/admin/notify`, { method: 'POST' });
    await waitFor(() => changed > 0, { what: 'tools/list_changed at the host' });
  });

  it('takes JSON answers from a server without streams (its GET 405 is fine)', async () => {
    const run = randomUUID();
    const { client } = await mux({ web: remote({ url: `${fx.url}/mcp-json` }, run) });
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('web__echo');
    expect((await client.callTool({ name: 'web__echo', arguments: { j: true } })).structuredContent).toEqual({ j: true });
    expect(jsonOf(await client.callTool({ name: 'web__session_info' })).transport).toBe('http-json');
    expect(httpOf(run).filter((r) => r.method === 'GET')).toHaveLength(1); // tried once, not retried
  });

  it('resumes a dropped answer stream with GET + Last-Event-ID after the server\'s retry delay', async () => {
    const run = randomUUID();
    const peer = await rawMux({ web: remote({ url: `${fx.url}/mcp` }, run) });
    const r = await call(peer, 'web__drop_stream', {}, 'tok-drop');
    expect(textOf(r.result)).toBe('resumed');
    const progress = peer.messages.filter((m) => m.method === 'notifications/progress' && m.params.progressToken === 'tok-drop');
    expect(progress.map((m) => m.params.progress)).toEqual([1, 2]);
    const resumes = httpOf(run).filter((e) => e.method === 'GET' && e.headers['last-event-id']);
    expect(resumes.length).toBeGreaterThanOrEqual(1);
  });

  // A 60 s backoff: only the immediate re-initialize of an expired session can pass these.
  const slowRestart = { restart: { maxRetries: 3, backoffMs: 60_000 } };

  it('re-initializes at once when the GET stream finds the session ended (HTTP 404); the next call works', async () => {
    const run = randomUUID();
    const { client } = await mux({ web: remote({ url: `${fx.url}/mcp` }, run, slowRestart) });
    const before = jsonOf(await client.callTool({ name: 'web__session_info' })).session;
    const [resource] = (await client.listResources()).resources;
    await client.subscribeResource({ uri: resource!.uri });
    await client.setLoggingLevel('warning');
    await waitFor(() => httpOf(run).some((r) => r.method === 'GET'), { what: 'the GET stream' });
    const expired = await (await fetch(`${fx.url}/admin/expire`, { method: 'POST' })).json();
    expect(expired.expired).toContain(before);
    // The GET stream ends, its reconnect gets 404, and a new session starts without any call.
    // mcpmux is ready once the new session's notifications/initialized goes out.
    await waitFor(() => httpOf(run).some((r) => r.headers['mcp-session-id'] && r.headers['mcp-session-id'] !== before), {
      what: 'a new session',
    });
    const initializes = httpOf(run).filter((r) => r.method === 'POST' && !r.headers['mcp-session-id']);
    expect(initializes).toHaveLength(2); // both without a session id
    const after = jsonOf(await client.callTool({ name: 'web__session_info' })).session;
    expect(after).not.toBe(before);
    // The new session got back the subscription and the log level the host had asked for.
    const inNew = (method: string) => (e: any) => e.type === 'request' && e.session === after && e.method === method;
    await waitForEvent(fx.events, inNew('resources/subscribe'));
    await waitForEvent(fx.events, inNew('logging/setLevel'));
  });

  it('re-initializes at once when a POST finds the session ended; only that call fails', async () => {
    const run = randomUUID();
    // /mcp-json has no GET stream, so the next call is what meets the 404.
    const { client } = await mux({ web: remote({ url: `${fx.url}/mcp-json` }, run, slowRestart) });
    const before = jsonOf(await client.callTool({ name: 'web__session_info' })).session;
    await fetch(`${fx.url}/admin/expire`, { method: 'POST' });
    await expect(client.callTool({ name: 'web__session_info' })).rejects.toThrow(/session expired \(HTTP 404\)/);
    await waitFor(() => httpOf(run).some((r) => r.headers['mcp-session-id'] && r.headers['mcp-session-id'] !== before), {
      what: 'a new session',
    });
    const after = jsonOf(await client.callTool({ name: 'web__session_info' })).session;
    expect(after).not.toBe(before);
  });

  it('forwards a host cancellation to the upstream', async () => {
    const run = randomUUID();
    const { client } = await mux({ web: remote({ url: `${fx.url}/mcp` }, run) });
    const ac = new AbortController();
    const call = client.callTool({ name: 'web__slow', arguments: { ms: 60_000 } }, undefined, { signal: ac.signal });
    const started = await waitForEvent(fx.events, (e) => e.type === 'request' && e.method === 'tools/call' && isOurs(run, e));
    ac.abort('host gave up');
    await expect(call).rejects.toThrow();
    await waitForEvent(fx.events, (e) => e.type === 'aborted' && e.tool === 'slow' && e.id === started.id);
  });

  it('fails a call fast with the HTTP status and body on a 500, and stays up', async () => {
    const run = randomUUID();
    // With a 60 s request timeout, only the synthetic error can end the call within the test.
    const { client } = await mux({ web: remote({ url: `${fx.url}/mcp` }, run) }, { timeouts: { requestMs: 60_000 } });
    await expect(client.callTool({ name: 'web__http_500' })).rejects.toThrow(/upstream HTTP 500: fixture refuses http_500/);
    expect((await client.callTool({ name: 'web__echo', arguments: { ok: 1 } })).structuredContent).toEqual({ ok: 1 });
  });

  it('fails a call whose answer exceeds limits.maxMessageBytes, and stays up', async () => {
    const run = randomUUID();
    const { client } = await mux({ web: remote({ url: `${fx.url}/mcp` }, run) }, { limits: { maxMessageBytes: 8192 } });
    // echo answers twice the arguments (text and structuredContent): the request fits, the answer does not.
    await expect(client.callTool({ name: 'web__echo', arguments: { pad: 'x'.repeat(5000) } })).rejects.toThrow(/too large/i);
    expect((await client.callTool({ name: 'web__echo', arguments: { ok: 2 } })).structuredContent).toEqual({ ok: 2 });
  });
});

describe('remote upstream failures', () => {
  it('an unreachable URL fails that upstream with a clear reason, without stopping the others', async () => {
    const run = randomUUID();
    const port = await freePort();
    const once = { restart: { maxRetries: 0 } };
    const { client } = await mux({
      web: remote({ url: `${fx.url}/mcp` }, run),
      gone: remote({ url: `http://127.0.0.1:${port}/mcp` }, run, once),
      goneold: remote({ url: `http://127.0.0.1:${port}/sse`, type: 'sse' }, run, once),
      gonews: remote({ url: `ws://127.0.0.1:${port}/ws` }, run, once),
    });
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toContain('web__echo');
    expect(names.filter((n) => n.startsWith('gone'))).toEqual([]);
    for (const server of ['gone', 'goneold', 'gonews']) {
      await expect(client.callTool({ name: `${server}__anything` })).rejects.toThrow(new RegExp(`"${server}".*not available.*ECONNREFUSED`));
    }
    expect((await client.callTool({ name: 'web__echo', arguments: { still: 'up' } })).structuredContent).toEqual({ still: 'up' });
  });
});
