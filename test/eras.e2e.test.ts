// Upstreams that speak MCP 2026-07-28 behind mcpmux (issue 13, scopes 2 and 3): an official SDK
// 2.x stateless server (test/fixtures/modern-upstream.mjs) over stdio and Streamable HTTP,
// reached by legacy hosts (SDK 1.x) and modern hosts (SDK 2.x). Names read as a matrix:
// <host era> host -> <upstream era> <transport> upstream.

import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { Client as ModernClient } from '@modelcontextprotocol/client';
import { StdioClientTransport as ModernStdio } from '@modelcontextprotocol/client/stdio';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ElicitRequestSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { awaitJsonLine, closeAll, connectStdio, fixture, MUX_BIN, readEvents, ROOT, startRawMux, tempFile, waitFor, writeConfig } from './helpers/harness.js';

afterEach(closeAll);

const MODERN = path.join(ROOT, 'test/fixtures/modern-upstream.mjs');
const servers: ChildProcess[] = [];
afterAll(() => {
  for (const s of servers) s.kill('SIGKILL');
});

/** The modern fixture over stdio, as a config entry. */
const modernStdio = (events: string) => ({ command: process.execPath, args: [MODERN, 'stdio', JSON.stringify({ events })] });

/** The modern fixture over HTTP (its own process), as a config entry. */
async function modernHttp(events: string): Promise<{ url: string }> {
  const child = spawn(process.execPath, [MODERN, 'http', JSON.stringify({ events })], { stdio: ['ignore', 'ignore', 'pipe'] });
  servers.push(child);
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const port = await awaitJsonLine(child.stderr!, exited, (j) => j.port as number | undefined, { ms: 15_000, what: 'the modern fixture listening', log: () => err });
  return { url: `http://127.0.0.1:${port}/mcp` };
}

/** A legacy (SDK 1.x) host that answers elicitations with a name, and counts tools/list_changed. */
async function legacyHost(config: string): Promise<{ c: Client; asked: string[]; changed: () => number; close: () => Promise<void> }> {
  const asked: string[] = [];
  let changes = 0;
  const peer = await connectStdio(
    { command: process.execPath, args: [MUX_BIN, 'stdio', '--config', config] },
    {
      clientCapabilities: { elicitation: {}, extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: ['text/html;profile=mcp-app'] } } } as never,
      beforeConnect: (c) => {
        c.setRequestHandler(ElicitRequestSchema, async (r) => {
          asked.push(r.params.message);
          return { action: 'accept', content: { name: 'Ada' } };
        });
        c.setNotificationHandler(ToolListChangedNotificationSchema, async () => void changes++);
      },
    },
  );
  return { c: peer.client, asked, changed: () => changes, close: () => peer.close() };
}

/** Everything a legacy host does with a modern upstream, which must look like any other server. */
async function legacyOverModern(config: string, events: string): Promise<void> {
  const h = await legacyHost(config);
  try {
    expect((await h.c.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(['mo__echo', 'mo__greet', 'mo__slow', 'mo__add']));
    expect((await h.c.callTool({ name: 'mo__echo', arguments: { text: 'hi' } })).content).toEqual([{ type: 'text', text: 'echo: hi' }]);
    expect((await h.c.getPrompt({ name: 'mo__review', arguments: { code: 'x' } })).messages[0]!.content).toEqual({ type: 'text', text: 'Please review: x' });
    expect((await h.c.readResource({ uri: 'mo+file:///readme.txt' })).contents[0]).toMatchObject({ uri: 'mo+file:///readme.txt', text: 'hello readme' });
    // The server needs input: the legacy host is asked the legacy way, the server gets the answer on a retry.
    const greet = await h.c.callTool({ name: 'mo__greet', arguments: { greeting: 'Hi' } });
    expect(greet.content).toEqual([{ type: 'text', text: 'Hi, Ada!' }]);
    expect(h.asked).toEqual(['What is your name?']);
    expect(readEvents(events).filter((e) => e.tool === 'greet').map((e) => e.round)).toEqual([1, 2]);
    // The upstream got the 2026-07-28 envelope from mcpmux on each request.
    expect(readEvents(events).find((e) => e.tool === 'echo').meta).toMatchObject({
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientInfo': { name: 'mcpmux' },
      // The host's extensions too (MCP Apps here): 2026-07-28 negotiates them per request.
      'io.modelcontextprotocol/clientCapabilities': { elicitation: {}, extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: ['text/html;profile=mcp-app'] } } },
    });
    // Its list changes come over the listen stream mcpmux keeps open, and reach the host.
    await h.c.callTool({ name: 'mo__add', arguments: {} });
    await waitFor(() => h.changed() > 0, { what: 'tools/list_changed at the legacy host', timeoutMs: 10_000 });
    await waitFor(async () => (await h.c.listTools()).tools.some((t) => t.name === 'mo__added_0'), { what: 'the added tool listed' });
    // Cancelling reaches the modern server (its request's connection closed, or notifications/cancelled on stdio).
    const ac = new AbortController();
    const slow = h.c.callTool({ name: 'mo__slow', arguments: { ms: 30_000 } }, undefined, { signal: ac.signal }).catch((e: Error) => e);
    await waitFor(() => readEvents(events).some((e) => e.tool === 'slow' && e.type === 'call'), { what: 'the slow call upstream' });
    ac.abort();
    expect(await slow).toBeInstanceOf(Error);
    await waitFor(() => readEvents(events).some((e) => e.type === 'aborted'), { what: 'the modern server told to stop', timeoutMs: 10_000 });
  } finally {
    await h.close();
  }
}

describe('legacy host -> modern upstream', () => {
  it('legacy host -> modern stdio upstream: lists, calls, reads, gets a prompt; input asked for by elicitation; list changes; cancellation', async () => {
    const events = tempFile('mo.jsonl');
    await legacyOverModern(await writeConfig({ mcpServers: { mo: modernStdio(events) } }), events);
  }, 60_000);

  it('legacy host -> modern HTTP upstream: the same', async () => {
    const events = tempFile('mo.jsonl');
    const { url } = await modernHttp(events);
    await legacyOverModern(await writeConfig({ mcpServers: { mo: { url } } }), events);
  }, 60_000);

  it('legacy host -> modern HTTP upstream: an argument the server marks with x-mcp-header goes in its Mcp-Param header too', async () => {
    const { url } = await modernHttp(tempFile('mo.jsonl'));
    const peer = startRawMux(await writeConfig({ mcpServers: { mo: { url } } }));
    await peer.initialize();
    const tools = (await peer.request('tools/list')).result.tools;
    expect(tools.find((t: any) => t.name === 'mo__region').inputSchema.properties.region['x-mcp-header']).toBe('Region');
    for (const region of ['us-west1', 'Zürich ']) {
      expect((await peer.request('tools/call', { name: 'mo__region', arguments: { region } })).result.content[0].text).toBe(`region ${region}`);
    }
  });

  it('a legacy host that cannot answer elicitations: the server is told so (the host\'s capabilities go with the call) and says it needs them', async () => {
    const events = tempFile('mo.jsonl');
    const peer = startRawMux(await writeConfig({ mcpServers: { mo: modernStdio(events) } }));
    await peer.initialize();
    const r = await peer.request('tools/call', { name: 'mo__greet', arguments: {} });
    // -32021 MissingRequiredClientCapability, from the server itself: it was never told the host could.
    expect(r.error).toMatchObject({ code: -32021, data: { requiredCapabilities: { elicitation: expect.any(Object) } } });
    expect(readEvents(events).some((e) => e.tool === 'greet' && e.round === 2)).toBe(false);
  });
});

describe('resource subscriptions between eras', () => {
  it.each(['stdio', 'HTTP'] as const)('legacy host -> modern %s upstream: resources/subscribe becomes a listen stream; updates arrive until unsubscribed', async (kind) => {
    const events = tempFile('mo.jsonl');
    const entry = kind === 'stdio' ? modernStdio(events) : await modernHttp(events);
    const peer = startRawMux(await writeConfig({ mcpServers: { mo: entry } }));
    await peer.initialize();
    expect((await peer.request('resources/subscribe', { uri: 'mo+file:///readme.txt' })).result).toEqual({});
    await peer.request('tools/call', { name: 'mo__touch', arguments: {} });
    expect((await peer.next((m) => m.method === 'notifications/resources/updated', 10_000)).params.uri).toBe('mo+file:///readme.txt');
    expect((await peer.request('resources/unsubscribe', { uri: 'mo+file:///readme.txt' })).result).toEqual({});
    // After the unsubscribe, a touch brings nothing; a tool that lists the same server proves the order.
    await peer.request('tools/call', { name: 'mo__touch', arguments: {} });
    await peer.request('tools/call', { name: 'mo__echo', arguments: { text: 'after' } });
    expect(peer.messages.filter((m) => m.method === 'notifications/resources/updated')).toHaveLength(1);
  });

  it('modern host -> legacy stdio upstream: subscriptions/listen with resourceSubscriptions subscribes upstream and relays updates tagged with the subscription', async () => {
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) } }));
    const env = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    peer.send({ jsonrpc: '2.0', id: 'sub', method: 'subscriptions/listen', params: { notifications: { resourceSubscriptions: ['fx+fixture://fx/res/0', 'nope+x://y'] }, _meta: env } });
    const ack = await peer.next((m) => m.method === 'notifications/subscriptions/acknowledged', 10_000);
    expect(ack.params).toEqual({ _meta: { 'io.modelcontextprotocol/subscriptionId': 'sub' }, notifications: { resourceSubscriptions: ['fx+fixture://fx/res/0'] } });
    await peer.request('tools/call', { name: 'fx__touch', arguments: { uri: 'fixture://fx/res/0' }, _meta: env });
    const updated = await peer.next((m) => m.method === 'notifications/resources/updated', 10_000);
    expect(updated.params).toEqual({ uri: 'fx+fixture://fx/res/0', _meta: { 'io.modelcontextprotocol/subscriptionId': 'sub' } });
  });
});

describe('two listens of one connection on the same URI', () => {
  it('cancelling one leaves the other hearing updates (the URI stays subscribed upstream while any listen wants it)', async () => {
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) } }));
    const env = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    const uri = 'fx+fixture://fx/res/0';
    for (const id of ['l1', 'l2']) {
      peer.send({ jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { notifications: { resourceSubscriptions: [uri] }, _meta: env } });
      await peer.next((m) => m.method === 'notifications/subscriptions/acknowledged' && m.params._meta['io.modelcontextprotocol/subscriptionId'] === id, 10_000);
    }
    peer.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'l1', _meta: env } });
    await peer.request('tools/call', { name: 'fx__touch', arguments: { uri: 'fixture://fx/res/0' }, _meta: env });
    const updated = await peer.next((m) => m.method === 'notifications/resources/updated', 10_000);
    expect(updated.params._meta['io.modelcontextprotocol/subscriptionId']).toBe('l2');
  });
});

describe('modern host -> modern upstream', () => {
  it('modern host -> modern stdio upstream: input_required passes through; the host answers and retries with the server\'s state', async () => {
    const events = tempFile('mo.jsonl');
    const config = await writeConfig({ mcpServers: { mo: modernStdio(events) } });
    const asked: string[] = [];
    const c = new ModernClient({ name: 'modern-host', version: '0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: { elicitation: { form: {} } } });
    c.setRequestHandler('elicitation/create', async (req: { params: { message: string } }) => {
      asked.push(req.params.message);
      return { action: 'accept', content: { name: 'Grace' } };
    });
    await c.connect(new ModernStdio({ command: process.execPath, args: [MUX_BIN, 'stdio', '--config', config], stderr: 'ignore' }));
    try {
      expect((await c.callTool({ name: 'mo__echo', arguments: { text: 'both modern' } })).content).toEqual([{ type: 'text', text: 'echo: both modern' }]);
      expect((await c.callTool({ name: 'mo__greet', arguments: {} })).content).toEqual([{ type: 'text', text: 'Hello, Grace!' }]);
      expect(asked).toEqual(['What is your name?']);
    } finally {
      await c.close();
    }
  }, 60_000);
});

describe('choosing the era', () => {
  it('era "legacy" toward a modern-only server fails to start it, saying why; era "modern" toward a legacy one likewise', async () => {
    const peer = startRawMux(
      await writeConfig({
        mcpServers: {
          forcedLegacy: { ...modernStdio(tempFile('mo.jsonl')), era: 'legacy', restart: { maxRetries: 0, backoffMs: 10 } },
          forcedModern: { ...fixture({ name: 'fx' }), era: 'modern', restart: { maxRetries: 0, backoffMs: 10 } },
          ok: fixture({ name: 'ok' }),
        },
        timeouts: { startupMs: 5000 },
      }),
      { args: ['--admin-port', '0'] },
    );
    await peer.initialize();
    const port = await waitFor(() => /"port":(\d+)[^\n]*"msg":"admin listening"/.exec(peer.stderr())?.[1], { what: 'admin port' });
    const status = await waitFor(async () => {
      const s = await (await fetch(`http://127.0.0.1:${port}/status`)).json();
      const by = (n: string) => s.upstreams.find((u: any) => u.name === n);
      return by('forcedLegacy')?.state === 'failed' && by('forcedModern')?.state === 'failed' ? s : undefined;
    }, { what: 'both forced servers failed', timeoutMs: 15_000 });
    const by = (n: string) => status.upstreams.find((u: any) => u.name === n);
    expect(by('forcedLegacy').lastError).toMatch(/initialize failed: .*Unsupported protocol version/);
    expect(by('forcedModern').lastError).toMatch(/initialize failed: .*server\/discover/);
    expect(by('ok').state).toBe('ready');
  });
});
