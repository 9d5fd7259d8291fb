// MCP Apps behind mcpmux (issue 15, first slice), against the published example servers: a
// tool's view URI is namespaced like every resource URI and reads give the upstream's bytes;
// a view that knows only its own `ui://` URI and its server's own tool names still reaches
// its server; two servers with the same view are never guessed between.

import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client as Client2, InMemoryTransport, StreamableHTTPClientTransport as HttpTransport2 } from '@modelcontextprotocol/client';
import { App } from '@modelcontextprotocol/ext-apps';
import { AppBridge } from '@modelcontextprotocol/ext-apps/app-bridge';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { closeAll, fixture, ROOT, startRawMux, waitFor, writeConfig } from './helpers/harness.js';

afterAll(stopAllDaemons);

const app = (pkg: string) => ({ command: process.execPath, args: [path.join(ROOT, `node_modules/@modelcontextprotocol/${pkg}/dist/index.js`), '--stdio'] });
const BASIC = app('server-basic-vanillajs');
const MONITOR = app('server-system-monitor');
const MIME = 'text/html;profile=mcp-app';

const sha256 = (text: unknown) => createHash('sha256').update(String(text)).digest('hex');

async function host(d: Daemon): Promise<Client> {
  const c = new Client({ name: 'apps-host', version: '0' }, { capabilities: {} });
  await c.connect(new StreamableHTTPClientTransport(new URL(d.url)));
  return c;
}

/** The view's bytes, read straight from the server with no mcpmux between. */
async function direct(entry: { command: string; args: string[] }, uri: string): Promise<{ text: string; mimeType?: string }> {
  const c = new Client({ name: 'direct', version: '0' });
  await c.connect(new StdioClientTransport({ ...entry, stderr: 'ignore' }));
  const read = await c.readResource({ uri });
  await c.close();
  return read.contents[0] as { text: string; mimeType?: string };
}

describe('MCP Apps', () => {
  it('a tool names its view by a namespaced ui:// URI, listed as a resource, and reading it gives the bytes a direct read gives', async () => {
    const d = await startDaemon({ mcpServers: { basic: BASIC, monitor: MONITOR } });
    const c = await host(d);
    const tools = (await c.listTools()).tools;
    const getTime = tools.find((t) => t.name === 'basic__get-time')!;
    expect(getTime._meta).toEqual({ ui: { resourceUri: 'ui://basic+get-time/mcp-app.html' }, 'ui/resourceUri': 'ui://basic+get-time/mcp-app.html' });
    // An app-only tool keeps its visibility, so the host keeps hiding it from the model.
    expect(tools.find((t) => t.name === 'monitor__poll-system-stats')!._meta).toEqual({ ui: { visibility: ['app'] } });
    const listed = (await c.listResources()).resources.map((r) => [r.uri, r.mimeType]);
    expect(listed).toEqual(expect.arrayContaining([['ui://basic+get-time/mcp-app.html', MIME], ['ui://monitor+system-monitor/mcp-app.html', MIME]]));

    for (const [wrapped, entry, own] of [
      ['ui://basic+get-time/mcp-app.html', BASIC, 'ui://get-time/mcp-app.html'],
      ['ui://monitor+system-monitor/mcp-app.html', MONITOR, 'ui://system-monitor/mcp-app.html'],
    ] as const) {
      const [block] = (await c.readResource({ uri: wrapped })).contents as Array<{ uri: string; mimeType?: string; text: string }>;
      const want = await direct(entry, own);
      expect(block!.uri).toBe(wrapped);
      expect(block!.mimeType).toBe(want.mimeType);
      expect(block!.text.length).toBeGreaterThan(100_000);
      expect(sha256(block!.text)).toBe(sha256(want.text));
    }
    expect((await c.callTool({ name: 'basic__get-time', arguments: {} })).isError).toBeFalsy();
    await c.close();
    await d.stop();
  }, 60_000);

  it("a view's own requests reach its server: its own ui:// URI (contents keep that URI) and an app-only tool by its own name", async () => {
    const d = await startDaemon({ mcpServers: { basic: BASIC, monitor: MONITOR } });
    const c = await host(d);
    await c.listTools();
    const own = 'ui://system-monitor/mcp-app.html';
    const [block] = (await c.readResource({ uri: own })).contents as Array<{ uri: string; text: string }>;
    expect(block!.uri).toBe(own);
    expect(sha256(block!.text)).toBe(sha256((await direct(MONITOR, own)).text));
    const stats = await c.callTool({ name: 'poll-system-stats', arguments: {} });
    expect(stats.isError).toBeFalsy();
    expect(JSON.stringify(stats.content)).toContain('memory');
    // A name no view-opening server has is still unknown.
    await expect(c.callTool({ name: 'no-such-tool', arguments: {} })).rejects.toThrow(/Unknown tool: no-such-tool/);
    await c.close();
    await d.stop();
  }, 60_000);

  it("ext-apps' own host helper (AppBridge) and view (App): the host follows the tool's view URI, and the view's calls by own name reach its server through mcpmux", async () => {
    const d = await startDaemon({ mcpServers: { basic: BASIC, monitor: MONITOR } });
    const apps = { extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: [MIME] } } };
    const client = new Client2({ name: 'apps-host', version: '0' }, { capabilities: apps });
    await client.connect(new HttpTransport2(new URL(d.url)));
    const tool = (await client.listTools()).tools.find((t) => t.name === 'monitor__get-system-info')!;
    const view = (await client.readResource({ uri: (tool._meta as { ui: { resourceUri: string } }).ui.resourceUri })).contents[0] as { mimeType: string; text: string };
    expect(view.mimeType).toBe(MIME);
    expect(sha256(view.text)).toBe(sha256((await direct(MONITOR, 'ui://system-monitor/mcp-app.html')).text));
    // The view, joined to the host as ext-apps joins them (in a browser, over postMessage).
    const bridge = new AppBridge(client, { name: 'apps-host', version: '0' }, { serverTools: {}, serverResources: {} });
    const app = new App({ name: 'system-monitor-view', version: '0' }, {}, { autoResize: false });
    const [hostEnd, viewEnd] = InMemoryTransport.createLinkedPair();
    await bridge.connect(hostEnd);
    await app.connect(viewEnd);
    const stats = await app.callServerTool({ name: 'poll-system-stats', arguments: {} });
    expect(stats.isError).toBeFalsy();
    expect(JSON.stringify(stats.content)).toContain('memory');
    await expect(app.callServerTool({ name: 'no-such-tool', arguments: {} })).rejects.toThrow(/Unknown tool: no-such-tool/);
    await app.close();
    await client.close();
    await d.stop();
  }, 60_000);

  it("policy goes by public names: a deny on monitor__poll-system-stats and on the view's namespaced URI holds when the view uses its own names", async () => {
    const d = await startDaemon({
      policy: { tools: { deny: ['monitor__poll-system-stats'] }, resources: { deny: ['ui://monitor+*'] } },
      mcpServers: { basic: BASIC, monitor: MONITOR },
    });
    const c = await host(d);
    await c.listTools();
    await expect(c.callTool({ name: 'poll-system-stats', arguments: {} })).rejects.toThrow(/Tool monitor__poll-system-stats is denied by policy/);
    await expect(c.readResource({ uri: 'ui://system-monitor/mcp-app.html' })).rejects.toThrow(/ui:\/\/monitor\+system-monitor\/mcp-app.html is denied by policy/);
    // The other server's view and tools are untouched.
    expect((await c.callTool({ name: 'get-time', arguments: {} })).isError).toBeFalsy();
    await c.close();
    await d.stop();
  }, 60_000);

  it('two servers with the same view: its own URI and own tool name fail naming both; the namespaced ones reach each', async () => {
    const d = await startDaemon({ mcpServers: { left: BASIC, right: BASIC } });
    const c = await host(d);
    const names = (await c.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['left__get-time', 'right__get-time']));
    await expect(c.readResource({ uri: 'ui://get-time/mcp-app.html' })).rejects.toThrow(/served by several servers \(left, right\)/);
    await expect(c.callTool({ name: 'get-time', arguments: {} })).rejects.toThrow(/servers left, right each have a tool of that name/);
    const left = (await c.readResource({ uri: 'ui://left+get-time/mcp-app.html' })).contents[0] as { uri: string; text: string };
    const right = (await c.readResource({ uri: 'ui://right+get-time/mcp-app.html' })).contents[0] as { uri: string; text: string };
    expect([left.uri, right.uri]).toEqual(['ui://left+get-time/mcp-app.html', 'ui://right+get-time/mcp-app.html']);
    expect(sha256(left.text)).toBe(sha256(right.text));
    await c.close();
    await d.stop();
  }, 60_000);

  it('extensions: a per-session upstream is offered the host\'s extensions as they are, a shared one none; the host is told the union of the upstreams\' extensions', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'mcpmux-ext-'));
    const events = (name: string) => path.join(dir, `${name}.jsonl`);
    const offered = (name: string) => {
      const lines = readFileSync(events(name), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      return lines.find((e) => e.type === 'request' && e.method === 'initialize')?.params.capabilities;
    };
    const d = await startDaemon({
      mcpServers: {
        mine: { ...fixture({ name: 'mine', events: events('mine'), capabilities: { extensions: { 'io.modelcontextprotocol/ui': {} } } }), sharing: 'session' },
        ours: fixture({ name: 'ours', events: events('ours'), capabilities: { extensions: { 'com.example/other': { v: 1 } } } }),
      },
    });
    const ui = { 'io.modelcontextprotocol/ui': { mimeTypes: ['text/html;profile=mcp-app'] }, 'com.example/unknown': { x: true } };
    const init = await fetch(d.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { extensions: ui }, clientInfo: { name: 'apps', version: '0' } } }),
    });
    const body = await init.text();
    const data = body.split('\n').find((l) => l.startsWith('data:') && l.includes('{'));
    const result = JSON.parse(data ? data.slice(5) : body).result;
    expect(result.capabilities.extensions).toEqual({ 'io.modelcontextprotocol/ui': {}, 'com.example/other': { v: 1 } });
    await waitFor(() => offered('mine'), { what: "the session upstream's initialize" });
    expect(offered('mine').extensions).toEqual(ui);
    expect(offered('ours').extensions).toBeUndefined();
    await d.stop();
  }, 60_000);
});

describe('extensions in the 2026-07-28 era', () => {
  afterAll(closeAll);

  it("a 2026-07-28 host finds the upstreams' extensions in server/discover", async () => {
    const ext = { 'io.modelcontextprotocol/ui': {}, 'com.example/other': { v: 1 } };
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx', capabilities: { extensions: ext } }) } }));
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: [MIME] } } }, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' } };
    const discover = await peer.request('server/discover', { _meta: meta });
    expect(discover.result.capabilities.extensions).toEqual(ext);
  });
});

describe('passthrough URIs', () => {
  it('two passthrough servers: each listed URI reads from the server that listed it; a URI neither listed is not found', async () => {
    const d = await startDaemon({
      mcpServers: {
        a: { ...fixture({ name: 'a' }), resources: { namespace: 'passthrough' } },
        b: { ...fixture({ name: 'b' }), resources: { namespace: 'passthrough' } },
      },
    });
    const c = await host(d);
    const uris = (await c.listResources()).resources.map((r) => r.uri);
    const fromA = uris.filter((u) => u.includes('//a/'));
    const fromB = uris.filter((u) => u.includes('//b/'));
    expect(fromA.length).toBeGreaterThan(0);
    expect(fromB.length).toBeGreaterThan(0);
    for (const uri of [fromA[0]!, fromB[0]!]) {
      expect((await c.readResource({ uri })).contents[0]).toMatchObject({ uri, text: `content of ${uri}` });
    }
    await expect(c.readResource({ uri: 'file:///nowhere' })).rejects.toThrow(/Resource not found: file:\/\/\/nowhere/);
    await c.close();
    await d.stop();
  }, 60_000);
});
