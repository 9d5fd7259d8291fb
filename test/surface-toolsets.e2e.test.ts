// Choosing a session's toolset (issue 20) everywhere a host can connect: `?toolset=` on /mcp,
// /sse and /ws, a token client's "toolset", `mcpmux connect --toolset` and `mcpmux stdio
// --toolset`. Driven through the real `mcpmux serve` / `mcpmux stdio` with the official SDK
// clients (1.x for the legacy eras, 2.x pinned to 2026-07-28) and raw HTTP / WebSocket peers
// for what a client library would not send. Two fixture upstreams, alpha and beta, 20 tools
// each; `surface.mode: "all"` so every list is the whole list (no search surface).

import { writeFileSync } from 'node:fs';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernHttp } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import WebSocket from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { closeAll, connectStdio, fixture, MUX_BIN, runMux, startMux, startRawMux, WAIT_MS, waitFor, writeConfig } from './helpers/harness.js';

// The SDK's WebSocketClientTransport uses the global WebSocket, which Node 20 does not have.
(globalThis as any).WebSocket ??= WebSocket;

const cleanups: (() => Promise<unknown>)[] = [];
const defer = (fn: () => Promise<unknown>): void => void cleanups.push(fn);
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((fn) => fn()));
  await closeAll();
});
afterAll(stopAllDaemons);

const V = '2025-11-25';
const MODERN = '2026-07-28';
const PLAIN_TOKEN = 'toolsets-e2e-plain-token';
const BETA_TOKEN = 'toolsets-e2e-beta-token';

const servers = { alpha: fixture({ name: 'alpha' }), beta: fixture({ name: 'beta' }) };
const toolsets = { a: { tools: ['alpha__*'] }, b: { tools: ['beta__*'] } };
const config = { mcpServers: servers, surface: { mode: 'all' }, toolsets };
/** The same, behind bearer tokens: "plain" has no toolset, "onlyb" gets toolset b. */
const tokenConfig = {
  ...config,
  listen: {
    auth: {
      tokens: [
        { client: 'plain', tokenEnv: 'TS_PLAIN_TOKEN' },
        { client: 'onlyb', tokenEnv: 'TS_BETA_TOKEN', toolset: 'b' },
      ],
    },
  },
};
const tokenEnv = { TS_PLAIN_TOKEN: PLAIN_TOKEN, TS_BETA_TOKEN: BETA_TOKEN };
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Every tool name, as a session without a toolset sees them (filled in beforeAll). */
let all: string[] = [];
const only = (server: string) => all.filter((n) => n.startsWith(`${server}__`));

async function names(c: { listTools(): Promise<{ tools: { name: string }[] }> }): Promise<string[]> {
  return (await c.listTools()).tools.map((t) => t.name).sort();
}

/** An SDK 1.x client over `transport`, closed after the test (a Streamable HTTP session DELETEd). */
async function legacy(transport: Transport): Promise<Client> {
  const c = new Client({ name: 'toolset-host', version: '0' }, { capabilities: {} });
  await c.connect(transport);
  defer(async () => {
    if (transport instanceof StreamableHTTPClientTransport) await transport.terminateSession().catch(() => {});
    await c.close();
  });
  return c;
}

/** The SDK 2.x client pinned to 2026-07-28: every request is a stateless POST. */
async function modern(url: string, headers: Record<string, string> = {}): Promise<ModernClient> {
  const c = new ModernClient({ name: 'modern-host', version: '0' }, { versionNegotiation: { mode: { pin: MODERN } }, capabilities: {} });
  await c.connect(new ModernHttp(new URL(url), { requestInit: { headers } }));
  defer(() => c.close());
  expect(c.getProtocolEra()).toBe('modern');
  return c;
}

/** Calling an alpha tool from a toolset-b session: -32602 naming the toolset. */
async function refusesAlpha(c: { callTool(p: { name: string; arguments: object }): Promise<unknown> }, toolset = 'b'): Promise<void> {
  await expect(c.callTool({ name: 'alpha__echo', arguments: { x: 1 } })).rejects.toMatchObject({
    code: -32602,
    message: expect.stringContaining(`not in this session's toolset "${toolset}"`),
  });
}

const initialize = (id: number | string = 1) => ({
  jsonrpc: '2.0',
  id,
  method: 'initialize',
  params: { protocolVersion: V, capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
});

function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
}

/** A 400 whose JSON-RPC error body carries the unknown-toolset message for `name`. */
async function expectUnknown(res: Response, name = 'zzz'): Promise<void> {
  expect(res.status).toBe(400);
  const body = (await res.json()) as { jsonrpc: string; id: null; error: { code: number; message: string } };
  expect(body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32000 } });
  expect(body.error.message).toContain(`no toolset named "${name}"`);
  expect(body.error.message).toContain('toolsets: a, b');
}

/** Opens a WebSocket; resolves with the socket once open, or with the status and body of a refusal. */
function openWs(url: string, headers: Record<string, string> = {}): Promise<WebSocket | { status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, 'mcp', { headers });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.once('end', () => {
        resolve({ status: res.statusCode!, body });
        ws.terminate();
      });
    });
    ws.once('error', reject);
  });
}

/** A raw MCP peer over an open WebSocket (the SDK's WebSocket transport sends no headers, so no token). */
function wsPeer(ws: WebSocket): { request(method: string, params?: object): Promise<any> } {
  let next = 1;
  const waiting = new Map<number, (m: any) => void>();
  ws.on('message', (data) => {
    const m = JSON.parse(String(data));
    if (typeof m.id === 'number' && !('method' in m)) waiting.get(m.id)?.(m);
  });
  return {
    request(method, params) {
      const id = next++;
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, ...(params && { params }) }));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no answer to ${method}`)), WAIT_MS);
        waiting.set(id, (m) => (clearTimeout(timer), resolve(m)));
      });
    },
  };
}

/** Sessions the daemon holds now (/readyz counts them). */
async function sessions(d: Daemon): Promise<number> {
  return ((await (await fetch(`${d.base}/readyz`)).json()) as { sessions: number }).sessions;
}

describe('?toolset= on /mcp, /sse and /ws (no tokens)', () => {
  let d: Daemon;
  beforeAll(async () => {
    d = await startDaemon(config);
    const c = new Client({ name: 'all', version: '0' }, { capabilities: {} });
    const t = new StreamableHTTPClientTransport(new URL(d.url));
    await c.connect(t);
    all = await names(c);
    await t.terminateSession();
    await c.close();
    // The premise: both servers' tools are there without a toolset, so narrowing shows.
    expect(only('alpha').length).toBe(20);
    expect(only('beta').length).toBe(20);
  }, 60_000);

  it('/mcp?toolset=b (Streamable HTTP, SDK client) lists only beta\'s tools; an alpha tool is refused with -32602 naming the toolset', async () => {
    const c = await legacy(new StreamableHTTPClientTransport(new URL(`${d.url}?toolset=b`)));
    expect(await names(c)).toEqual(only('beta'));
    expect((await c.callTool({ name: 'beta__echo', arguments: { via: 'b' } })).structuredContent).toEqual({ via: 'b' });
    await refusesAlpha(c);
  });

  it('/sse?toolset=b (legacy SSE, SDK client) lists only beta\'s tools; an alpha tool is refused', async () => {
    const c = await legacy(new SSEClientTransport(new URL(`${d.base}/sse?toolset=b`)));
    expect(await names(c)).toEqual(only('beta'));
    await refusesAlpha(c);
  });

  it('/ws?toolset=b (WebSocket, SDK client) lists only beta\'s tools; an alpha tool is refused', async () => {
    const c = await legacy(new WebSocketClientTransport(new URL(`ws://127.0.0.1:${d.port}/ws?toolset=b`)));
    expect(await names(c)).toEqual(only('beta'));
    await refusesAlpha(c);
  });

  it('an unknown ?toolset=zzz is an HTTP 400 with the JSON-RPC error body on /mcp, /sse and /ws, and opens no session', async () => {
    await waitFor(async () => (await sessions(d)) === 0, { what: 'earlier sessions closed' });
    await expectUnknown(await post(`${d.url}?toolset=zzz`, initialize()));
    await expectUnknown(await fetch(`${d.base}/sse?toolset=zzz`, { headers: { accept: 'text/event-stream' } }));
    const ws = await openWs(`ws://127.0.0.1:${d.port}/ws?toolset=zzz`);
    expect(ws).not.toBeInstanceOf(WebSocket);
    const refused = ws as { status: number; body: string };
    await expectUnknown(new Response(refused.body, { status: refused.status }));
    // A near miss is named; the SDK clients fail to connect at all.
    const near = (await (await post(`${d.url}?toolset=B`, initialize())).json()) as { error: { message: string } };
    expect(near.error.message).toContain('did you mean "b"?');
    const c = new Client({ name: 'x', version: '0' }, { capabilities: {} });
    await expect(c.connect(new StreamableHTTPClientTransport(new URL(`${d.url}?toolset=zzz`)))).rejects.toThrow(/400|no toolset named/);
    await expect(new Client({ name: 'x', version: '0' }).connect(new SSEClientTransport(new URL(`${d.base}/sse?toolset=zzz`)))).rejects.toThrow();
    expect(await sessions(d)).toBe(0);
  });

  it('/mcp: a session keeps the toolset of its initialize; a later request naming another toolset is a 400, naming none or the same is answered', async () => {
    const init = await post(`${d.url}?toolset=b`, initialize());
    expect(init.status).toBe(200);
    await init.text();
    const sid = init.headers.get('mcp-session-id')!;
    const h = { 'mcp-session-id': sid, 'mcp-protocol-version': V };
    expect((await post(d.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h)).status).toBe(202);
    const list = async (url: string): Promise<Response> => post(url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { ...h, accept: 'application/json, text/event-stream;q=0.5' });

    const other = await list(`${d.url}?toolset=a`);
    expect(other.status).toBe(400);
    expect(((await other.json()) as { error: { message: string } }).error.message).toMatch(/opened with toolset "b", not "a"/);
    // On a session already open, a name is compared with the session's own (so a toolset a reload
    // removed does not lock its host out): an unknown one is another toolset, refused the same way.
    const unknown = await list(`${d.url}?toolset=zzz`);
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as { error: { message: string } }).error.message).toMatch(/opened with toolset "b", not "zzz"/);
    for (const url of [d.url, `${d.url}?toolset=b`]) {
      const r = await list(url);
      expect(r.status).toBe(200);
      const tools = ((await r.json()) as { result: { tools: { name: string }[] } }).result.tools.map((t) => t.name).sort();
      expect(tools).toEqual(only('beta'));
    }
    // A session opened without a toolset cannot be given one later either.
    const plain = await post(d.url, initialize(3));
    await plain.text();
    const asked = await post(`${d.url}?toolset=b`, { jsonrpc: '2.0', id: 4, method: 'ping' }, { 'mcp-session-id': plain.headers.get('mcp-session-id')!, 'mcp-protocol-version': V });
    expect(asked.status).toBe(400);
    expect(((await asked.json()) as { error: { message: string } }).error.message).toMatch(/opened with no toolset, not "b"/);
    for (const s of [sid, plain.headers.get('mcp-session-id')!]) await fetch(d.url, { method: 'DELETE', headers: { 'mcp-session-id': s } });
  });

  it('a 2026-07-28 client (SDK 2.x) at /mcp?toolset=b sees only beta\'s tools and is refused an alpha tool; server/discover with an unknown toolset is a 400', async () => {
    const c = await modern(`${d.url}?toolset=b`);
    expect(await names(c)).toEqual(only('beta'));
    await refusesAlpha(c);
    const discover = (url: string) =>
      post(
        url,
        {
          jsonrpc: '2.0',
          id: 1,
          method: 'server/discover',
          params: { _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' } } },
        },
        { 'mcp-protocol-version': MODERN, 'mcp-method': 'server/discover' },
      );
    const ok = await discover(`${d.url}?toolset=b`);
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { result: { supportedVersions: string[] } }).result.supportedVersions).toContain(MODERN);
    await expectUnknown(await discover(`${d.url}?toolset=zzz`));
    // The SDK 2.x client cannot connect to an unknown toolset either.
    const bad = new ModernClient({ name: 'modern-host', version: '0' }, { versionNegotiation: { mode: { pin: MODERN } }, capabilities: {} });
    await expect(bad.connect(new ModernHttp(new URL(`${d.url}?toolset=zzz`)))).rejects.toThrow();
  });

  it('`mcpmux connect --toolset b` bridges a stdio SDK client to the daemon with only beta\'s tools', async () => {
    const peer = await connectStdio({ command: process.execPath, args: [MUX_BIN, 'connect', d.url, '--toolset', 'b'] });
    expect(await names(peer.client)).toEqual(only('beta'));
    await refusesAlpha(peer.client);
    // The flag replaces a toolset the URL names already.
    const over = await connectStdio({ command: process.execPath, args: [MUX_BIN, 'connect', `${d.url}?toolset=a`, '--toolset', 'b'] });
    expect(await names(over.client)).toEqual(only('beta'));
  });

  it('`mcpmux connect --toolset nope` answers the host\'s initialize with the daemon\'s reason, says it on stderr and exits 1', async () => {
    const peer = startRawMux({ command: process.execPath, args: [MUX_BIN, 'connect', d.url, '--toolset', 'nope'] });
    const answer = await peer.request('initialize', initialize().params);
    expect(answer.error.message).toMatch(/^--toolset: no toolset named "nope"/);
    expect(answer.error.message).toContain('toolsets: a, b');
    const exit = await Promise.race([peer.exited, new Promise((r) => setTimeout(() => r('still running'), WAIT_MS))]);
    expect(exit).toEqual({ code: 1, signal: null });
    expect(peer.stderr()).toMatch(/mcpmux: --toolset: no toolset named "nope"; toolsets: a, b \(at http:\/\/127\.0\.0\.1:\d+\/mcp\?toolset=nope\)/);
    // An SDK host gets a failed connect, not a hang.
    const c = connectStdio({ command: process.execPath, args: [MUX_BIN, 'connect', d.url, '--toolset', 'nope'] });
    await expect(c).rejects.toThrow(/no toolset named "nope"/);
  });
});

describe('a token client\'s "toolset" (listen.auth.tokens)', () => {
  let d: Daemon;
  beforeAll(async () => {
    d = await startDaemon(tokenConfig, tokenEnv);
    const c = new Client({ name: 'all', version: '0' }, { capabilities: {} });
    await c.connect(new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: bearer(PLAIN_TOKEN) } }));
    all = await names(c);
    await c.close();
    expect(only('alpha').length).toBe(20);
  }, 60_000);

  it('the token\'s toolset applies without a query on /mcp, /sse and /ws; a token without one sees everything', async () => {
    const http = await legacy(new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: bearer(BETA_TOKEN) } }));
    expect(await names(http)).toEqual(only('beta'));
    await refusesAlpha(http);
    const sse = await legacy(new SSEClientTransport(new URL(`${d.base}/sse`), { requestInit: { headers: bearer(BETA_TOKEN) } }));
    expect(await names(sse)).toEqual(only('beta'));
    const ws = await openWs(`ws://127.0.0.1:${d.port}/ws`, bearer(BETA_TOKEN));
    expect(ws).toBeInstanceOf(WebSocket);
    defer(async () => (ws as WebSocket).close());
    const peer = wsPeer(ws as WebSocket);
    expect((await peer.request('initialize', initialize().params)).result.serverInfo.name).toBe('mcpmux');
    const listed = (await peer.request('tools/list')).result.tools.map((t: { name: string }) => t.name).sort();
    expect(listed).toEqual(only('beta'));
    const refused = await peer.request('tools/call', { name: 'alpha__echo', arguments: {} });
    expect(refused.error).toMatchObject({ code: -32602, message: expect.stringContaining('toolset "b"') });

    const plain = await legacy(new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: bearer(PLAIN_TOKEN) } }));
    expect(await names(plain)).toEqual(all);
  });

  it('?toolset= overrides the token\'s on /mcp, /sse and /ws (a toolset narrows, it is no authorization)', async () => {
    const http = await legacy(new StreamableHTTPClientTransport(new URL(`${d.url}?toolset=a`), { requestInit: { headers: bearer(BETA_TOKEN) } }));
    expect(await names(http)).toEqual(only('alpha'));
    await expect(http.callTool({ name: 'beta__echo', arguments: {} })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining('toolset "a"') });
    const sse = await legacy(new SSEClientTransport(new URL(`${d.base}/sse?toolset=a`), { requestInit: { headers: bearer(BETA_TOKEN) } }));
    expect(await names(sse)).toEqual(only('alpha'));
    const ws = await openWs(`ws://127.0.0.1:${d.port}/ws?toolset=a`, bearer(BETA_TOKEN));
    expect(ws).toBeInstanceOf(WebSocket);
    defer(async () => (ws as WebSocket).close());
    const peer = wsPeer(ws as WebSocket);
    await peer.request('initialize', initialize().params);
    expect((await peer.request('tools/list')).result.tools.map((t: { name: string }) => t.name).sort()).toEqual(only('alpha'));
  });

  it('a 2026-07-28 client gets its token\'s toolset, or the query\'s', async () => {
    expect(await names(await modern(d.url, bearer(BETA_TOKEN)))).toEqual(only('beta'));
    expect(await names(await modern(`${d.url}?toolset=a`, bearer(BETA_TOKEN)))).toEqual(only('alpha'));
  });

  it('the token is checked before the toolset: without one, ?toolset=zzz is a 401 that names no toolsets', async () => {
    for (const res of [await post(`${d.url}?toolset=zzz`, initialize()), await fetch(`${d.base}/sse?toolset=zzz`)]) {
      expect(res.status).toBe(401);
      expect(await res.text()).not.toContain('toolset');
    }
    expect(await openWs(`ws://127.0.0.1:${d.port}/ws?toolset=zzz`)).toMatchObject({ status: 401 });
    await expectUnknown(await post(`${d.url}?toolset=zzz`, initialize(), bearer(PLAIN_TOKEN)));
    expect(await openWs(`ws://127.0.0.1:${d.port}/ws?toolset=zzz`, bearer(PLAIN_TOKEN))).toMatchObject({ status: 400 });
  });

  it('`mcpmux connect` with $MCPMUX_TOKEN gets the token\'s toolset', async () => {
    const peer = await connectStdio({ command: process.execPath, args: [MUX_BIN, 'connect', d.url] }, { env: { MCPMUX_TOKEN: BETA_TOKEN } });
    expect(await names(peer.client)).toEqual(only('beta'));
  });
});

describe('a reload that changes toolsets and tokens', () => {
  it('applies to new sessions: a toolset added is accepted, a token\'s new toolset is given; a session already open keeps its own', async () => {
    const file = await writeConfig(tokenConfig);
    const d = await startDaemon(file, tokenEnv);
    defer(() => d.stop());
    const before = await legacy(new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: bearer(BETA_TOKEN) } }));
    const beta = await names(before);
    expect(beta.every((n) => n.startsWith('beta__'))).toBe(true);
    await expectUnknown(await post(`${d.url}?toolset=c`, initialize(), bearer(PLAIN_TOKEN)), 'c');

    const next = {
      ...tokenConfig,
      toolsets: { ...toolsets, c: { tools: ['alpha__echo', 'beta__echo'] } },
      listen: { auth: { tokens: [tokenConfig.listen.auth.tokens[0], { ...tokenConfig.listen.auth.tokens[1], toolset: 'a' }] } },
    };
    writeFileSync(file, JSON.stringify(next, null, 2));
    d.child.kill('SIGHUP');
    await waitFor(() => /"msg":"config reloaded"/.test(d.stderr()), { what: 'the reload applied', timeoutMs: WAIT_MS });

    const c = await legacy(new StreamableHTTPClientTransport(new URL(`${d.url}?toolset=c`), { requestInit: { headers: bearer(PLAIN_TOKEN) } }));
    expect(await names(c)).toEqual(['alpha__echo', 'beta__echo']);
    const after = await legacy(new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: bearer(BETA_TOKEN) } }));
    expect((await names(after)).every((n) => n.startsWith('alpha__'))).toBe(true);
    // The session opened before the reload still has toolset b.
    expect(await names(before)).toEqual(beta);
  }, 60_000);
});

describe('a reload that removes a toolset', () => {
  it('a /mcp session opened with it keeps working (it sees no tools) and can still be ended; new sessions naming it get the 400', async () => {
    const file = await writeConfig(config);
    const d = await startDaemon(file);
    defer(() => d.stop());
    const url = `${d.url}?toolset=b`;
    const transport = new StreamableHTTPClientTransport(new URL(url));
    const open = await legacy(transport);
    expect((await names(open)).every((n) => n.startsWith('beta__'))).toBe(true);
    writeFileSync(file, JSON.stringify({ ...config, toolsets: { a: toolsets.a } }, null, 2));
    d.child.kill('SIGHUP');
    await waitFor(() => /"msg":"config reloaded"/.test(d.stderr()), { what: 'the reload applied', timeoutMs: WAIT_MS });
    // Its lists changed (list_changed was sent); what it may see now is nothing.
    expect(await names(open)).toEqual([]);
    // DELETE of the session, with ?toolset=b in its URL: accepted (the SDK throws on a refusal).
    await transport.terminateSession();
    expect(transport.sessionId).toBeUndefined();
    const refused = await post(url, initialize());
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(/no toolset named "b".*; toolsets: a$/);
  }, 60_000);
});

describe('mcpmux stdio --toolset', () => {
  it('--toolset b lists only beta\'s tools', async () => {
    const peer = await startMux(config, { args: ['--toolset', 'b'] });
    const listed = await names(peer.client);
    expect(listed.length).toBe(20);
    expect(listed.every((n) => n.startsWith('beta__'))).toBe(true);
    await refusesAlpha(peer.client);
  });

  it('--toolset nope exits 1 naming the toolsets', async () => {
    const r = await runMux(['stdio', '--config', await writeConfig(config), '--toolset', 'nope']);
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('mcpmux: --toolset: no toolset named "nope"; toolsets: a, b');
  });
});
