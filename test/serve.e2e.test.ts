// `mcpmux serve` end to end: the built binary on 127.0.0.1 (port 0), the upstream fixture behind
// it, and the official SDK clients (Streamable HTTP, legacy SSE, WebSocket) in front; raw fetch
// where a test needs to see status codes, headers or SSE event ids. `npm run build` first.
import http from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { createParser } from 'eventsource-parser';
import WebSocket from 'ws';
import { startDaemon, stopAllDaemons, isAlive, type Daemon } from './helpers/daemon.js';
import { scrape, total } from './helpers/prom.js';
import { closeAll, connectStdio, fixture, MUX_BIN, readEvents, tempFile, waitFor, waitForEvent, writeConfig } from './helpers/harness.js';

// The SDK's WebSocketClientTransport uses the global WebSocket, which Node 20 only has behind
// a flag; the `ws` client has the same on* API.
(globalThis as any).WebSocket ??= WebSocket;

const V = '2025-11-25';
const JSON_CT = { 'content-type': 'application/json' };
/** Both answer forms accepted (as MCP requires), JSON preferred: JSON answers to read easily. */
const PREFER_JSON = 'application/json, text/event-stream;q=0.5';

// ---- the daemon -------------------------------------------------------------------------------

afterAll(stopAllDaemons);

// Per-test cleanups (SDK clients, sockets), run even when a test fails.
const cleanups: (() => Promise<unknown> | unknown)[] = [];
const defer = (fn: () => Promise<unknown> | unknown): void => void cleanups.push(fn);
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await Promise.resolve().then(fn).catch(() => {});
  await closeAll();
});


// ---- raw HTTP helpers ---------------------------------------------------------------------------

const initialize = (id: number | string = 1, version = V) => ({
  jsonrpc: '2.0',
  id,
  method: 'initialize',
  params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
});

/** A response body as JSON, untyped (fetch types it `unknown`). */
const json = (r: Response): Promise<any> => r.json();

function post(url: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { ...JSON_CT, accept: PREFER_JSON, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...(signal && { signal }),
  });
}

/** initialize (JSON answer) + notifications/initialized; the headers for later requests. */
async function rawSession(url: string, version = V, extra: Record<string, string> = {}): Promise<Record<string, string>> {
  const r = await post(url, initialize(1, version), extra);
  expect(r.status).toBe(200);
  const sid = r.headers.get('mcp-session-id');
  expect(sid).toMatch(/^[\x21-\x7e]{32,}$/);
  expect((await json(r)).result.protocolVersion).toBe(version);
  const h = { ...extra, 'mcp-session-id': sid!, 'mcp-protocol-version': version };
  const n = await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  expect(n.status).toBe(202);
  return h;
}

/** The daemon's log lines so far, parsed (lines that are not JSON skipped). */
function logLines(d: Daemon): any[] {
  return d.stderr().split('\n').flatMap((l) => {
    try {
      return [JSON.parse(l)];
    } catch {
      return [];
    }
  });
}

/**
 * A session whose handshake is done (initialize, then notifications/initialized), for a daemon
 * with a short unfinished-session limit: a busy machine may pass it between the two requests
 * (the session is then closed as unfinished and the notification is a 404), so it tries again,
 * a bounded number of times. The headers for later requests.
 */
async function finishedSession(d: Daemon): Promise<Record<string, string>> {
  for (let i = 0; i < 10; i++) {
    const r = await post(d.url, initialize());
    expect(r.status).toBe(200);
    const h = { 'mcp-session-id': r.headers.get('mcp-session-id')!, 'mcp-protocol-version': V };
    const n = await post(d.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
    expect([202, 404]).toContain(n.status);
    if (n.status === 202) return h;
  }
  throw new Error('no handshake finished within the unfinished-session limit in 10 tries');
}

async function sessionsOf(d: Daemon): Promise<number> {
  return (await json(await fetch(`${d.base}/readyz`))).sessions;
}

interface SseEvent {
  id?: string;
  event?: string;
  data: string;
}

/** Reads an SSE response event by event; `next()` resolves undefined at the end of the stream. */
function sse(res: Response) {
  const queue: (SseEvent | undefined)[] = [];
  const waiters: ((e: SseEvent | undefined) => void)[] = [];
  const push = (e: SseEvent | undefined): void => {
    const w = waiters.shift();
    if (w) w(e);
    else queue.push(e);
  };
  const parser = createParser({ onEvent: (e) => push({ id: e.id, event: e.event, data: e.data }) });
  const decoder = new TextDecoder();
  void (async () => {
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }));
    } catch {
      /* aborted */
    }
    push(undefined);
  })();
  return {
    next(timeoutMs = 5000): Promise<SseEvent | undefined> {
      if (queue.length) return Promise.resolve(queue.shift());
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no SSE event within ${timeoutMs} ms`)), timeoutMs);
        waiters.push((e) => (clearTimeout(t), resolve(e)));
      });
    },
    /** Every remaining event until the stream ends. */
    async rest(timeoutMs = 5000): Promise<SseEvent[]> {
      const out: SseEvent[] = [];
      for (let e = await this.next(timeoutMs); e; e = await this.next(timeoutMs)) out.push(e);
      return out;
    },
  };
}

/** A raw HTTP/1.1 request where fetch will not do (a forged Host header). */
function rawHttp(port: number, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/mcp', method: 'POST', headers: { ...JSON_CT, ...headers } }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    });
    req.on('error', reject);
    req.end(JSON.stringify(initialize()));
  });
}

/** Opens a WebSocket; resolves with the socket once open, or with the HTTP status of a refusal. */
function openWs(url: string, opts: WebSocket.ClientOptions = {}, protocols: string | string[] = 'mcp'): Promise<WebSocket | number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, opts);
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode!);
      res.resume();
      ws.terminate();
    });
    ws.once('error', (e) => reject(e));
  });
}

// ---- SDK clients ------------------------------------------------------------------------------------

function sdkClient(): Client {
  const client = new Client({ name: 'e2e-host', version: '0.0.0' }, { capabilities: { sampling: {} } });
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
    model: 'e2e-model',
    role: 'assistant' as const,
    content: { type: 'text' as const, text: `answer to: ${(req.params.messages[0]!.content as { text: string }).text}` },
  }));
  return client;
}

/**
 * Records every message the client transport receives, in order (installed after connect,
 * in front of the SDK's own handler).
 */
function tap(transport: { onmessage?: (m: any, extra?: any) => void }): any[] {
  const seen: any[] = [];
  const inner = transport.onmessage!;
  transport.onmessage = (m, extra) => {
    seen.push(m);
    inner(m, extra);
  };
  return seen;
}

/** What every transport must carry: lists, calls, progress and a sampling round trip. */
async function exercise(client: Client, wire: any[]): Promise<void> {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  expect(names).toContain('fx__echo');
  expect(names).toContain('fx__tool_0');

  const echo: any = await client.callTool({ name: 'fx__echo', arguments: { hello: 'world' } });
  expect(JSON.parse(echo.content[0].text)).toEqual({ hello: 'world' });

  const progress: number[] = [];
  const done: any = await client.callTool({ name: 'fx__progress', arguments: { steps: 3, delayMs: 50 } }, undefined, {
    onprogress: (p) => void progress.push(p.progress),
  });
  expect(done.content[0].text).toBe('done 3');
  // The SDK client runs notification handlers a microtask after response handlers, so a
  // progress that arrives in the same read as the result is dropped by the client itself (on
  // any transport). onprogress must have seen the first; the wire must carry all three in order.
  expect(progress[0]).toBe(1);
  const i = wire.findIndex((m) => m.id !== undefined && m.result?.content?.[0]?.text === 'done 3');
  const onWire = wire.slice(0, i).filter((m) => m.method === 'notifications/progress').slice(-3);
  expect(onWire.map((m) => m.params.progress)).toEqual([1, 2, 3]);

  const sampled: any = await client.callTool({ name: 'fx__sample', arguments: { text: 'hi there' } });
  expect(JSON.parse(sampled.content[0].text)).toMatchObject({ model: 'e2e-model', content: { text: 'answer to: hi there' } });
  expect(wire.some((m) => m.method === 'sampling/createMessage')).toBe(true);
}

// ---- the main daemon: one shared fixture upstream ------------------------------------------------------

describe('mcpmux serve', () => {
  let d: Daemon;
  let events: string;

  beforeAll(async () => {
    events = tempFile('events.jsonl');
    d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx', events }) } });
  });

  it('/healthz and /readyz answer 200 once the upstreams are up', async () => {
    expect((await fetch(`${d.base}/healthz`)).status).toBe(200);
    await waitFor(async () => (await fetch(`${d.base}/readyz`)).status === 200, { what: 'readyz 200' });
    const r = await json(await fetch(`${d.base}/readyz`));
    expect(r).toMatchObject({ status: 'ready', detail: { upstreams: { ready: 1 } } });
  });

  it('Streamable HTTP (SDK client): initialize, list, call, progress, sampling', async () => {
    const client = sdkClient();
    const transport = new StreamableHTTPClientTransport(new URL(d.url));
    defer(() => client.close());
    await client.connect(transport);
    expect(transport.sessionId).toBeTruthy();
    expect(client.getServerVersion()?.name).toBe('mcpmux');
    await exercise(client, tap(transport));
    await transport.terminateSession();
  });

  it('legacy HTTP+SSE (SDK client): initialize, list, call, progress, sampling', async () => {
    const client = sdkClient();
    defer(() => client.close());
    const transport = new SSEClientTransport(new URL(`${d.base}/sse`));
    await client.connect(transport);
    await exercise(client, tap(transport));
  });

  it('WebSocket (SDK client, subprotocol mcp): initialize, list, call, progress, sampling', async () => {
    const client = sdkClient();
    const transport = new WebSocketClientTransport(new URL(`ws://127.0.0.1:${d.port}/ws`));
    defer(() => client.close());
    await client.connect(transport);
    expect((transport as any)._socket.protocol).toBe('mcp');
    await exercise(client, tap(transport));
  });

  it('a WebSocket that offers only other subprotocols is refused', async () => {
    expect(await openWs(`ws://127.0.0.1:${d.port}/ws`, {}, ['graphql-ws'])).toBe(400);
  });

  it('Origin http://evil.example gets 403 on POST /mcp and on the WebSocket upgrade; loopback origins pass', async () => {
    const evil = await post(d.url, initialize(), { origin: 'http://evil.example' });
    expect(evil.status).toBe(403);
    expect((await json(evil)).error.message).toContain('Origin');
    expect(await openWs(`ws://127.0.0.1:${d.port}/ws`, { origin: 'http://evil.example' })).toBe(403);

    for (const origin of ['http://localhost:5173', 'http://127.0.0.1:8080', 'http://[::1]:3000']) {
      const ok = await post(d.url, initialize(), { origin });
      expect(ok.status).toBe(200);
      expect(ok.headers.get('access-control-allow-origin')).toBe(origin);
      await fetch(d.url, { method: 'DELETE', headers: { 'mcp-session-id': ok.headers.get('mcp-session-id')! } });
    }
    const ws = await openWs(`ws://127.0.0.1:${d.port}/ws`, { origin: 'http://localhost:5173' });
    expect(ws).toBeInstanceOf(WebSocket);
    (ws as WebSocket).close();
  });

  it('a Host header that is not a loopback name gets 403 (DNS rebinding)', async () => {
    expect(await rawHttp(d.port, { host: 'evil.example', accept: 'application/json' })).toBe(403);
    expect(await rawHttp(d.port, { host: `127.evil.example:${d.port}`, accept: 'application/json' })).toBe(403);
  });

  it('DELETE ends a session; the next request with its id gets 404', async () => {
    const h = await rawSession(d.url);
    const before = await sessionsOf(d);
    const del = await fetch(d.url, { method: 'DELETE', headers: h });
    expect(del.status).toBe(200);
    expect(await sessionsOf(d)).toBe(before - 1);
    const again = await post(d.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, h);
    expect(again.status).toBe(404);
    expect((await json(again)).error.message).toMatch(/session not found/i);
    expect((await fetch(d.url, { headers: { ...h, accept: 'text/event-stream' } })).status).toBe(404);
  });

  it('a request without Mcp-Session-Id gets 400; an unknown id 404', async () => {
    const r = await post(d.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' });
    expect(r.status).toBe(400);
    expect((await json(r)).error.message).toContain('Mcp-Session-Id');
    const u = await post(d.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { 'mcp-session-id': 'no-such-session' });
    expect(u.status).toBe(404);
  });

  it('an unsupported MCP-Protocol-Version gets 400; a missing one is accepted', async () => {
    const h = await rawSession(d.url);
    const bad = await post(d.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { ...h, 'mcp-protocol-version': '1999-01-01' });
    expect(bad.status).toBe(400);
    expect((await json(bad)).error.message).toContain('1999-01-01');
    const { 'mcp-protocol-version': _v, ...noVersion } = h;
    const ok = await post(d.url, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, noVersion);
    expect(ok.status).toBe(200);
    expect((await json(ok)).result.tools.length).toBeGreaterThan(0);
    await fetch(d.url, { method: 'DELETE', headers: h });
  });

  it('bad bodies: not JSON 400 (-32700), not JSON-RPC 400, wrong content type 415', async () => {
    const h = await rawSession(d.url);
    const notJson = await post(d.url, '{"jsonrpc":', h);
    expect(notJson.status).toBe(400);
    expect((await json(notJson)).error.code).toBe(-32700);
    const notRpc = await post(d.url, { hello: 1 }, h);
    expect(notRpc.status).toBe(400);
    expect((await json(notRpc)).error.code).toBe(-32600);
    for (const ctype of ['text/plain', 'application/jsonx', 'application/json-seq', 'application/x-json', '']) {
      const r = await post(d.url, { jsonrpc: '2.0', id: 9, method: 'ping' }, { ...h, 'content-type': ctype });
      expect(r.status, ctype).toBe(415);
    }
    const withCharset = await post(d.url, { jsonrpc: '2.0', id: 10, method: 'ping' }, { ...h, 'content-type': 'Application/JSON; charset=utf-8' });
    expect(withCharset.status).toBe(200);
    await fetch(d.url, { method: 'DELETE', headers: h });
  });

  it('a POST must accept both JSON and SSE: anything else is 406, before the body is read', async () => {
    const h = await rawSession(d.url);
    const ping = { jsonrpc: '2.0', id: 2, method: 'ping' };
    for (const accept of ['text/html', 'application/json', 'text/event-stream', 'application/json, text/event-stream;q=0', 'application/jsonx, text/event-stream', '']) {
      const r = await post(d.url, ping, { ...h, accept });
      expect(r.status, accept).toBe(406);
      expect((await json(r)).error.message).toMatch(/must accept both application\/json and text\/event-stream/);
    }
    for (const accept of ['*/*', 'application/*, text/*', 'application/json, text/event-stream']) {
      expect((await post(d.url, ping, { ...h, accept })).status, accept).toBe(200);
    }
    await fetch(d.url, { method: 'DELETE', headers: h });
  });

  it('JSON answers when the host prefers JSON; SSE with a priming event when it accepts both equally', async () => {
    const h = await rawSession(d.url);
    const j = await post(d.url, { jsonrpc: '2.0', id: 2, method: 'ping' }, h);
    expect(j.headers.get('content-type')).toBe('application/json');
    expect(await json(j)).toEqual({ jsonrpc: '2.0', id: 2, result: {} });

    const s = await post(d.url, { jsonrpc: '2.0', id: 3, method: 'ping' }, { ...h, accept: 'application/json, text/event-stream' });
    expect(s.headers.get('content-type')).toBe('text/event-stream');
    const evs = await sse(s).rest();
    expect(evs[0]).toMatchObject({ data: '' }); // priming: an id and empty data
    expect(evs[0]!.id).toBeTruthy();
    expect(evs.slice(1).map((e) => JSON.parse(e.data))).toEqual([{ jsonrpc: '2.0', id: 3, result: {} }]);
    expect(new Set(evs.map((e) => e.id)).size).toBe(evs.length);
    await fetch(d.url, { method: 'DELETE', headers: h });
  });

  it('batches: accepted from a 2025-03-26 host, refused (400) from a 2025-11-25 host', async () => {
    const old = await rawSession(d.url, '2025-03-26');
    const batch = [
      { jsonrpc: '2.0', id: 2, method: 'ping' },
      { jsonrpc: '2.0', method: 'notifications/roots/list_changed' },
      { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'fx__echo', arguments: { n: 3 } } },
    ];
    const r = await post(d.url, batch, old);
    expect(r.status).toBe(200);
    const body = await json(r);
    expect(Array.isArray(body)).toBe(true);
    expect(body.map((m: any) => m.id).sort()).toEqual([2, 3]);
    expect(body.find((m: any) => m.id === 3).result.structuredContent).toEqual({ n: 3 });

    const cur = await rawSession(d.url, V);
    const refused = await post(d.url, batch, cur);
    expect(refused.status).toBe(400);
    expect((await json(refused)).error.message).toContain('batch');
    await fetch(d.url, { method: 'DELETE', headers: old });
    await fetch(d.url, { method: 'DELETE', headers: cur });
  });

  it('Last-Event-ID resumes one stream: only its later events are replayed (raw fetch)', async () => {
    const h = await rawSession(d.url);
    const sseAccept = { ...h, accept: 'application/json, text/event-stream' };
    const getAbort = new AbortController();
    defer(() => getAbort.abort());
    const get = sse(await fetch(d.url, { headers: { ...h, accept: 'text/event-stream' }, signal: getAbort.signal }));
    const getPrime = (await get.next())!;
    expect(getPrime.data).toBe('');

    // A tools/call with progress on its own SSE stream; the host drops it after the first step.
    const postAbort = new AbortController();
    const call = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'fx__progress', arguments: { steps: 4, delayMs: 100 }, _meta: { progressToken: 'tok' } } };
    const stream = sse(await post(d.url, call, sseAccept, postAbort.signal));
    expect((await stream.next())!.data).toBe(''); // priming
    const first = (await stream.next())!;
    expect(JSON.parse(first.data)).toMatchObject({ method: 'notifications/progress', params: { progressToken: 'tok', progress: 1 } });
    postAbort.abort();

    // Meanwhile, messages that belong to no request go on the GET stream.
    const log = await post(d.url, { jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'fx__log' } }, h);
    expect((await json(log)).result).toBeTruthy();
    const logged: any[] = [];
    while (logged.length < 4) logged.push(JSON.parse((await get.next())!.data));
    expect(logged.every((m) => m.method === 'notifications/message')).toBe(true);

    // Resume the tools/call stream: its remaining progress and its response, nothing else.
    const resumed = await fetch(d.url, { headers: { ...h, accept: 'text/event-stream', 'last-event-id': first.id! } });
    expect(resumed.status).toBe(200);
    const rest = await sse(resumed).rest();
    const msgs = rest.map((e) => JSON.parse(e.data));
    expect(msgs.map((m) => m.params?.progress ?? `response ${m.id}`)).toEqual([2, 3, 4, 'response 7']);
    expect(msgs[3].result.content[0].text).toBe('done 4');
    const streamOf = (id: string) => id.slice(0, id.lastIndexOf('-'));
    expect(rest.every((e) => streamOf(e.id!) === streamOf(first.id!))).toBe(true);

    // Resume the GET stream from its priming id: the log messages again, none of the progress.
    getAbort.abort();
    let again: Response | undefined;
    await waitFor(async () => {
      again = await fetch(d.url, { headers: { ...h, accept: 'text/event-stream', 'last-event-id': getPrime.id! } });
      if (again.status === 409) await again.body?.cancel(); // the server has not seen the drop yet
      return again.status !== 409;
    }, { what: 'GET stream released' });
    expect(again!.status).toBe(200);
    const replay = sse(again!);
    const replayed: any[] = [];
    while (replayed.length < 4) replayed.push(JSON.parse((await replay.next())!.data));
    expect(replayed).toEqual(logged);
    await fetch(d.url, { method: 'DELETE', headers: h });
    expect(await replay.next()).toBeUndefined(); // DELETE ends the stream
  });

  it('an unknown Last-Event-ID gets 400; a second GET stream 409', async () => {
    const h = await rawSession(d.url);
    const bad = await fetch(d.url, { headers: { ...h, accept: 'text/event-stream', 'last-event-id': '999-1' } });
    expect(bad.status).toBe(400);
    const ac = new AbortController();
    defer(() => ac.abort());
    const first = await fetch(d.url, { headers: { ...h, accept: 'text/event-stream' }, signal: ac.signal });
    expect(first.status).toBe(200);
    const second = await fetch(d.url, { headers: { ...h, accept: 'text/event-stream' } });
    expect(second.status).toBe(409);
    await fetch(d.url, { method: 'DELETE', headers: h });
  });

  it('an SDK stdio client through `mcpmux connect` lists and calls tools of the daemon', async () => {
    const before = await sessionsOf(d);
    const peer = await connectStdio({ command: process.execPath, args: [MUX_BIN, 'connect', d.url] }, { clientCapabilities: { sampling: {} } });
    expect(await sessionsOf(d)).toBe(before + 1);
    const { tools } = await peer.client.listTools();
    expect(tools.map((t) => t.name)).toContain('fx__whoami');
    const r: any = await peer.client.callTool({ name: 'fx__echo', arguments: { via: 'connect' } });
    expect(r.structuredContent).toEqual({ via: 'connect' });
    // A long value the bridge's decoder keeps raw (src/jsonrpc/opaque.ts) still arrives whole.
    const long = 'é " \\ \n '.repeat(10_000);
    const big: any = await peer.client.callTool({ name: 'fx__echo', arguments: { long } });
    expect(big.structuredContent.long === long).toBe(true);
    const progress: number[] = [];
    await peer.client.callTool({ name: 'fx__progress', arguments: { steps: 3, delayMs: 50 } }, undefined, { onprogress: (p) => void progress.push(p.progress) });
    expect(progress[0]).toBe(1); // see exercise() for why not all three
    await peer.close();
    // The bridge DELETEs its session when its stdin ends.
    await waitFor(async () => (await sessionsOf(d)) === before, { what: 'bridge session deleted' });
  });

  it('`mcpmux connect` relays a sampling request to the stdio host and its answer back', async () => {
    const peer = await connectStdio(
      { command: process.execPath, args: [MUX_BIN, 'connect', d.url] },
      {
        clientCapabilities: { sampling: {} },
        beforeConnect: (c) =>
          c.setRequestHandler(CreateMessageRequestSchema, async () => ({
            model: 'bridge-model',
            role: 'assistant' as const,
            content: { type: 'text' as const, text: 'from the stdio host' },
          })),
      },
    );
    const r: any = await peer.client.callTool({ name: 'fx__sample', arguments: { text: 'via bridge' } });
    expect(JSON.parse(r.content[0].text)).toMatchObject({ model: 'bridge-model', content: { text: 'from the stdio host' } });
    await peer.close();
  });

  it('holds 100 concurrent Streamable HTTP sessions, each initializing and calling a tool on one shared upstream', async () => {
    const N = 100;
    const before = await sessionsOf(d);
    const sessions = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const h = await rawSession(d.url);
        const r = await post(d.url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'fx__echo', arguments: { i } } }, h);
        expect(r.status).toBe(200);
        expect((await json(r)).result.structuredContent).toEqual({ i });
        const w = await post(d.url, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'fx__whoami' } }, h);
        return { h, pid: JSON.parse((await json(w)).result.content[0].text).pid as number };
      }),
    );
    expect(await sessionsOf(d)).toBe(before + N);
    expect(new Set(sessions.map((s) => s.h['mcp-session-id'])).size).toBe(N);
    expect(new Set(sessions.map((s) => s.pid)).size).toBe(1); // one shared upstream process
    expect(readEvents(events).filter((e) => e.type === 'start')).toHaveLength(1);
    const deleted = await Promise.all(sessions.map(async (s) => (await fetch(d.url, { method: 'DELETE', headers: s.h })).status));
    expect(deleted.every((s) => s === 200)).toBe(true);
    expect(await sessionsOf(d)).toBe(before);
  });
});

describe('server-initiated requests from a shared upstream reach a host only when mcpmux is sure whose they are', () => {
  /** An SDK host over Streamable HTTP that records the sampling prompts it is shown. */
  async function host(d: Daemon, name: string): Promise<{ client: Client; prompts: string[] }> {
    const prompts: string[] = [];
    const client = new Client({ name, version: '0.0.0' }, { capabilities: { sampling: {} } });
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      const text = (req.params.messages[0]!.content as { text: string }).text;
      prompts.push(text);
      return { model: name, role: 'assistant' as const, content: { type: 'text' as const, text: `${name} answers ${text}` } };
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    defer(() => client.close());
    return { client, prompts };
  }
  const textOf = (r: any): string => r.content[0].text;

  it('shared: refused while two hosts have calls in flight to it; delivered to the one host that has', async () => {
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) } });
    const a = await host(d, 'host-a');
    const b = await host(d, 'host-b');

    // Two sessions with calls in flight: a sampling request from the stdio upstream could be either's.
    // a's call runs until a cancels it (not for a time a busy machine might outlast).
    const inFlight = async () => total((await scrape(`${d.base}/metrics`)).samples, 'mcpmux_requests_in_flight');
    const cancelA = new AbortController();
    const slow = a.client.callTool({ name: 'fx__slow', arguments: { ms: 120_000 } }, undefined, { signal: cancelA.signal }).catch(() => undefined);
    await waitFor(async () => (await inFlight()) >= 1, { what: "host a's call in flight" });
    const refused: any = await b.client.callTool({ name: 'fx__sample', arguments: { text: 'secret plan of b' } });
    expect(refused.isError).toBe(true);
    expect(JSON.parse(textOf(refused)).error).toMatchObject({ code: -32601 });
    expect(JSON.parse(textOf(refused)).error.message).toMatch(/Cannot tell which of 2 host sessions sharing server "fx" should take sampling\/createMessage; give this server sharing: "session"/);
    expect(a.prompts).toEqual([]);
    expect(b.prompts).toEqual([]);
    cancelA.abort('done');
    await slow;
    await waitFor(async () => (await inFlight()) === 0, { what: "host a's call ended" });

    // Only b has a call in flight now: its sampling request reaches b, and only b.
    const ok: any = await b.client.callTool({ name: 'fx__sample', arguments: { text: 'plan of b' } });
    expect(textOf(ok)).toContain('host-b answers plan of b');
    expect(b.prompts).toEqual(['plan of b']);
    expect(a.prompts).toEqual([]);
    await waitFor(() => d.stderr().includes('"msg":"server-initiated request refused: cannot tell which host session it belongs to"'), { what: 'the refusal logged' });
    await d.stop();
  });

  it('sharing: "session": concurrent sampling from two hosts each reaches its own host', async () => {
    const d = await startDaemon({ mcpServers: { fx: { ...fixture({ name: 'fx' }), sharing: 'session' } } });
    const a = await host(d, 'host-a');
    const b = await host(d, 'host-b');
    const [ra, rb]: any[] = await Promise.all([
      a.client.callTool({ name: 'fx__sample', arguments: { text: 'for a' } }),
      b.client.callTool({ name: 'fx__sample', arguments: { text: 'for b' } }),
    ]);
    expect(textOf(ra)).toContain('host-a answers for a');
    expect(textOf(rb)).toContain('host-b answers for b');
    expect(a.prompts).toEqual(['for a']);
    expect(b.prompts).toEqual(['for b']);
    await d.stop();
  });
});

describe('upstream log messages', () => {
  it('broadcast, reach only clients that policy lets see something of that server, and never with an invalid level', async () => {
    const d = await startDaemon(
      {
        // "logs": "broadcast": each server's messages go to every session policy lets see it.
        mcpServers: { fx: { ...fixture({ name: 'fx' }), logs: 'broadcast' }, other: { ...fixture({ name: 'other' }), logs: 'broadcast' } },
        listen: { auth: { tokens: [{ client: 'sees', tokenEnv: 'MUX_T_SEES' }, { client: 'blind', tokenEnv: 'MUX_T_BLIND' }] } },
        // "blind" may use the other server only: fx is kept away from it entirely.
        policy: { clients: { blind: { deny: ['fx__*'], prompts: { deny: ['fx__*'] } } } },
      },
      { MUX_T_SEES: 'token-sees-1', MUX_T_BLIND: 'token-blind-2' },
    );
    const connectAs = async (token: string): Promise<{ client: Client; logs: any[] }> => {
      const logs: any[] = [];
      const client = new Client({ name: 'log-host', version: '0.0.0' });
      client.fallbackNotificationHandler = async (n) => {
        if (n.method === 'notifications/message') logs.push(n.params);
      };
      await client.connect(new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      defer(() => client.close());
      return { client, logs };
    };
    const sees = await connectAs('token-sees-1');
    const blind = await connectAs('token-blind-2');
    // Both sessions list tools, so the names of both servers are known.
    expect((await blind.client.listTools()).tools.every((t) => !t.name.startsWith('fx__'))).toBe(true);
    await sees.client.listTools();

    await sees.client.callTool({ name: 'fx__log', arguments: { levels: ['info', 'loud', 'warning', 7] } });
    await blind.client.callTool({ name: 'other__log', arguments: { levels: ['error'] } });
    // The daemon's stderr reaches this process on its own pipe, maybe after the HTTP answers: wait for it too.
    await waitFor(() => sees.logs.length >= 3 && blind.logs.length >= 1 && /invalid level dropped/.test(d.stderr()), { what: 'the log messages' });
    // The invalid levels were dropped; fx's messages never reached the blind client.
    expect(sees.logs.filter((l) => l.logger.startsWith('fx/')).map((l) => l.level)).toEqual(['info', 'warning']);
    expect(blind.logs.map((l) => `${l.logger} ${l.level}`)).toEqual(['other/fixture-logger error']);
    expect(sees.logs.map((l) => `${l.logger} ${l.level}`)).toContain('other/fixture-logger error');
    // Said once, however many bad levels came.
    expect(d.stderr().match(/log notification with an invalid level dropped/g)).toHaveLength(1);
    await d.stop();
  });
});

describe('mcpmux connect across a daemon restart', () => {
  it('re-initializes with the host\'s own initialize when the daemon answers 404, and carries on', async () => {
    const config = await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) } });
    let d = await startDaemon(config);
    const peer = await connectStdio({ command: process.execPath, args: [MUX_BIN, 'connect', d.url] });
    expect((await peer.client.listTools()).tools.length).toBeGreaterThan(0);
    const port = d.port;
    expect((await d.stop()).code).toBe(0);
    d = await startDaemon(config, {}, port);
    const r: any = await peer.client.callTool({ name: 'fx__echo', arguments: { after: 'restart' } });
    expect(r.structuredContent).toEqual({ after: 'restart' });
    expect(await sessionsOf(d)).toBe(1);
    await peer.close();
    await waitFor(async () => (await sessionsOf(d)) === 0, { what: 'bridge session deleted' });
    await d.stop();
  });
});

// ---- bearer tokens ------------------------------------------------------------------------------------

describe('mcpmux serve with listen.auth.tokens', () => {
  const TOKEN = 's3cret-e2e-token-value';
  let d: Daemon;

  beforeAll(async () => {
    d = await startDaemon(
      { mcpServers: { fx: fixture({ name: 'fx' }) }, listen: { auth: { tokens: [{ client: 'ci', tokenEnv: 'MUX_E2E_TOKEN' }] } } },
      { MUX_E2E_TOKEN: TOKEN },
    );
  });

  it('a missing or wrong bearer token gets 401 with WWW-Authenticate; the right one works', async () => {
    const none = await post(d.url, initialize());
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer /);
    const wrong = await post(d.url, initialize(), { authorization: 'Bearer not-the-token' });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toContain('invalid_token');
    const h = await rawSession(d.url, V, { authorization: `Bearer ${TOKEN}` });
    // The session id alone is not a credential.
    const { authorization: _a, ...noToken } = h;
    expect((await post(d.url, { jsonrpc: '2.0', id: 2, method: 'ping' }, noToken)).status).toBe(401);
    expect((await post(d.url, { jsonrpc: '2.0', id: 2, method: 'ping' }, h)).status).toBe(200);
    await fetch(d.url, { method: 'DELETE', headers: h });
  });

  it('the SDK client with the token lists tools; health routes need no token', async () => {
    const client = sdkClient();
    const transport = new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } });
    defer(() => client.close());
    await client.connect(transport);
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    await transport.terminateSession();
    expect((await fetch(`${d.base}/healthz`)).status).toBe(200);
    expect((await fetch(`${d.base}/readyz`)).status).toBe(200);
  });

  it('the WebSocket upgrade needs the token too', async () => {
    expect(await openWs(`ws://127.0.0.1:${d.port}/ws`)).toBe(401);
    expect(await openWs(`ws://127.0.0.1:${d.port}/ws`, { headers: { authorization: 'Bearer nope' } })).toBe(401);
    const ws = await openWs(`ws://127.0.0.1:${d.port}/ws`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ws).toBeInstanceOf(WebSocket);
    const sock = ws as WebSocket;
    const answer = new Promise<any>((resolve) => sock.once('message', (m) => resolve(JSON.parse(String(m)))));
    sock.send(JSON.stringify(initialize(1)));
    expect((await answer).result.serverInfo.name).toBe('mcpmux');
    sock.close();
  });

  it('`mcpmux connect` sends $MCPMUX_TOKEN', async () => {
    const peer = await connectStdio({ command: process.execPath, args: [MUX_BIN, 'connect', d.url] }, { env: { MCPMUX_TOKEN: TOKEN } });
    expect((await peer.client.listTools()).tools.length).toBeGreaterThan(0);
    await peer.close();
  });
});

// ---- limits -------------------------------------------------------------------------------------------

describe('mcpmux serve limits', () => {
  let d: Daemon;

  beforeAll(async () => {
    d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) }, limits: { maxMessageBytes: 65536, maxSessions: 2 } });
  });

  it('a body over limits.maxMessageBytes gets 413', async () => {
    const big = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { pad: 'x'.repeat(70_000) } };
    const r = await post(d.url, big);
    expect(r.status).toBe(413);
    expect((await json(r)).error.message).toContain('maxMessageBytes');
  });

  it('a WebSocket frame over limits.maxMessageBytes closes the connection with 1009', async () => {
    const ws = (await openWs(`ws://127.0.0.1:${d.port}/ws`)) as WebSocket;
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { pad: 'x'.repeat(70_000) } }));
    expect(await closed).toBe(1009);
    await waitFor(async () => (await sessionsOf(d)) === 0, { what: 'websocket session gone' });
  });

  it('beyond limits.maxSessions a new session gets 503 with a clear error', async () => {
    const a = await rawSession(d.url);
    const b = await rawSession(d.url);
    const c = await post(d.url, initialize());
    expect(c.status).toBe(503);
    expect((await json(c)).error.message).toContain('maxSessions');
    expect(await openWs(`ws://127.0.0.1:${d.port}/ws`)).toBe(503);
    await fetch(d.url, { method: 'DELETE', headers: a });
    const again = await rawSession(d.url); // a slot is free again
    await fetch(d.url, { method: 'DELETE', headers: again });
    await fetch(d.url, { method: 'DELETE', headers: b });
  });
});

describe('mcpmux serve session quotas', () => {
  it('one token client holds at most limits.maxSessionsPerClient sessions; other clients are unaffected', async () => {
    const d = await startDaemon(
      {
        mcpServers: { fx: fixture({ name: 'fx' }) },
        listen: { auth: { tokens: [{ client: 'greedy', tokenEnv: 'MUX_T_GREEDY' }, { client: 'polite', tokenEnv: 'MUX_T_POLITE' }] } },
        limits: { maxSessionsPerClient: 2 },
      },
      { MUX_T_GREEDY: 'greedy-token-1', MUX_T_POLITE: 'polite-token-2' },
    );
    const greedy = { authorization: 'Bearer greedy-token-1' };
    const a = await rawSession(d.url, V, greedy);
    await rawSession(d.url, V, greedy);
    const third = await post(d.url, initialize(), greedy);
    expect(third.status).toBe(503);
    expect((await json(third)).error.message).toBe('Service Unavailable: client "greedy" has too many sessions (limits.maxSessionsPerClient = 2)');
    expect(await openWs(`ws://127.0.0.1:${d.port}/ws`, { headers: greedy })).toBe(503);
    await rawSession(d.url, V, { authorization: 'Bearer polite-token-2' });
    // Ending one frees its slot.
    await fetch(d.url, { method: 'DELETE', headers: a });
    await rawSession(d.url, V, greedy);
    await d.stop();
  });

  it('sharing: "session" servers start at most limits.maxSessionUpstreams copies; past that, initialize is refused with -31004', async () => {
    const d = await startDaemon({ mcpServers: { fx: { ...fixture({ name: 'fx' }), sharing: 'session' } }, limits: { maxSessionUpstreams: 2 } });
    const a = await rawSession(d.url);
    await rawSession(d.url);
    const third = await post(d.url, initialize());
    expect(third.status).toBe(200);
    expect((await json(third)).error).toEqual({
      code: -31004,
      message: 'Too many per-session upstream connections: 2 running, this session needs 1 (limits.maxSessionUpstreams = 2)',
    });
    // A session that ends gives its copies back.
    await fetch(d.url, { method: 'DELETE', headers: a });
    await waitFor(async () => (await json(await post(d.url, initialize()))).result !== undefined, { what: 'a slot for a new session' });
    await d.stop();
  });

  it('a session that says nothing after its initialize is closed soon (a flood of bare initializes cannot fill the table)', async () => {
    // 400 ms is short enough that a busy machine may pass it between any two requests here, so
    // nothing below assumes a session is still there at a given moment: the table is shown full
    // by a 503 (bare initializes are sent until one is refused), and what closed them by the log.
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) }, limits: { maxSessions: 5 } }, { MCPMUX_UNFINISHED_SESSION_MS: '400' });
    const bare: Response[] = [];
    for (let round = 0; round < 20 && !bare.some((r) => r.status === 503); round++) bare.push(...(await Promise.all(Array.from({ length: 6 }, () => post(d.url, initialize())))));
    expect(bare.some((r) => r.status === 503)).toBe(true);
    expect(bare.every((r) => r.status === 200 || r.status === 503)).toBe(true);
    await waitFor(async () => (await sessionsOf(d)) === 0, { what: 'the bare sessions closed' });
    const closings = () => logLines(d).filter((j) => j.msg === 'closing a session that said nothing after initialize');
    const accepted = bare.filter((r) => r.status === 200).length;
    await waitFor(() => closings().length === accepted, { what: 'each closing logged' });
    // None was closed before its time (the daemon's own measure).
    for (const j of closings()) expect(j.ms).toBeGreaterThanOrEqual(400);
    const idOf = (r: Response) => r.headers.get('mcp-session-id');
    const first = bare.find((r) => r.status === 200)!;
    expect(idOf(first)).toBeTruthy();
    expect((await post(d.url, { jsonrpc: '2.0', id: 3, method: 'ping' }, { 'mcp-session-id': idOf(first)!, 'mcp-protocol-version': V })).status).toBe(404);
    // A host that finishes its handshake stays, well past the same time.
    const h = await finishedSession(d);
    const closedBefore = closings().length;
    // Waiting for something not to happen: a second is 2.5 times the limit.
    const since = Date.now();
    await waitFor(() => Date.now() - since > 1000, { what: 'a second', intervalMs: 100 });
    expect((await post(d.url, { jsonrpc: '2.0', id: 2, method: 'ping' }, h)).status).toBe(200);
    expect(closings().length).toBe(closedBefore);
    await d.stop();
  });
});

// ---- lifecycle: idle expiry and SIGTERM -------------------------------------------------------------------

describe('mcpmux serve lifecycle', () => {
  it('closes a Streamable HTTP session that stays idle (MCPMUX_SESSION_IDLE_MS)', async () => {
    // A busy machine may take longer than the 300 ms limit between any two requests here, so
    // nothing assumes the session still exists at a given moment: once its handshake is done,
    // the daemon's log says it closed it for idleness and after how long, and it is gone.
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) } }, { MCPMUX_SESSION_IDLE_MS: '300' });
    const h = await finishedSession(d);
    const closed = await waitFor(() => logLines(d).find((j) => j.msg === 'closing idle session'), { what: 'the idle session closed' });
    expect(closed).toMatchObject({ kind: 'streamable' });
    expect(closed.idleMs).toBeGreaterThanOrEqual(300);
    await waitFor(async () => (await sessionsOf(d)) === 0, { what: 'no session left' });
    expect((await post(d.url, { jsonrpc: '2.0', id: 2, method: 'ping' }, h)).status).toBe(404);
    expect((await d.stop()).code).toBe(0);
  });

  it('SIGTERM drains: in-flight requests fail, exit code 0, no upstream process left', async () => {
    const events = tempFile('events.jsonl');
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx', events }) } });
    const client = sdkClient();
    defer(() => client.close());
    await client.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    const who: any = await client.callTool({ name: 'fx__whoami' });
    const pid = JSON.parse(who.content[0].text).pid as number;
    expect(isAlive(pid)).toBe(true);
    // Sessions on the other transports are open too while the daemon drains.
    const sseClient = sdkClient();
    defer(() => sseClient.close());
    await sseClient.connect(new SSEClientTransport(new URL(`${d.base}/sse`)));
    const wsClient = sdkClient();
    const wsClosed = new Promise<void>((resolve) => (wsClient.onclose = resolve));
    defer(() => wsClient.close());
    await wsClient.connect(new WebSocketClientTransport(new URL(`ws://127.0.0.1:${d.port}/ws`)));
    expect(await sessionsOf(d)).toBe(3);
    const slow = client.callTool({ name: 'fx__slow', arguments: { ms: 60_000 } }).then(
      () => undefined,
      (e: Error) => e,
    );
    await waitForEvent(events, (e) => e.type === 'request' && e.params?.name === 'slow');

    const exit = await d.stop();
    expect(exit).toEqual({ code: 0, signal: null });
    expect((await slow)?.message).toMatch(/connection closed/i);
    await wsClosed;
    await waitFor(() => !isAlive(pid), { what: `upstream pid ${pid} gone` });
    expect(d.stderr()).toContain('"msg":"stopped"');
  });
});
