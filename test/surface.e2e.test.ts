// The tool surface through the real binary: which surface auto gives a session (by the size of
// what it may see, and by the host's name), the search surface's list and search_tools answers,
// a decision taken again when an upstream's list grows, a toolset's own mode, and /status and
// /metrics saying what each session got. Calls through call_tool (governance, flows, errors,
// MCP Apps, 2026-07-28 hosts) are in surface-flows.e2e.test.ts.

import { writeFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { closeAll, fixture, ROOT, startRawMux, waitFor, writeConfig, type RawPeer } from './helpers/harness.js';
import { scrape, total } from './helpers/prom.js';
import { SEARCH_RESULT_MAX_TOKENS } from '../src/surface/meta-tools.js';
import { estimateTokens } from '../src/surface/tokens.js';

afterEach(closeAll);
afterAll(stopAllDaemons);

/** Three default fixtures: 60 tools (3 generated and 17 special ones each), over auto's 40. */
const three = () => ({ alpha: fixture({ name: 'alpha' }), beta: fixture({ name: 'beta' }), gamma: fixture({ name: 'gamma' }) });
const two = () => ({ alpha: fixture({ name: 'alpha' }), beta: fixture({ name: 'beta' }) });

async function host(config: object, clientName = 'raw-test', args: string[] = []): Promise<RawPeer> {
  const peer = startRawMux(await writeConfig(config), { args });
  const init = await peer.initialize({ protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: clientName, version: '1.0.0' } });
  expect(init.error, JSON.stringify(init.error)).toBeUndefined();
  return peer;
}

/** Every tool of tools/list, all pages. */
async function listAll(peer: RawPeer): Promise<any[]> {
  const tools: any[] = [];
  let cursor: string | undefined;
  do {
    const r = await peer.request('tools/list', cursor === undefined ? {} : { cursor });
    expect(r.error, JSON.stringify(r.error)).toBeUndefined();
    tools.push(...r.result.tools);
    cursor = r.result.nextCursor;
  } while (cursor !== undefined);
  return tools;
}

const names = (tools: any[]) => tools.map((t) => t.name);
const search = (peer: RawPeer, args: object) => peer.request('tools/call', { name: 'search_tools', arguments: args });

describe('auto: every tool listed while the session is within both budgets', () => {
  it('40 tools (two fixtures): exactly the list mode "all" gives, and no meta-tools', async () => {
    const auto = await listAll(await host({ mcpServers: two() }));
    const all = await listAll(await host({ mcpServers: two(), surface: { mode: 'all' } }));
    expect(auto.length).toBe(40);
    expect(auto).toEqual(all);
    expect(names(auto)).not.toContain('search_tools');
  });

  it('60 tools (three fixtures): the search surface, whose search tool declares its outputSchema and names every server', async () => {
    const tools = await listAll(await host({ mcpServers: three(), surface: { alwaysVisible: ['beta__echo', 'nobody__*'] } }));
    expect(names(tools)).toEqual(['search_tools', 'call_tool', 'beta__echo']);
    const [searchTool, callTool] = tools;
    expect(searchTool.inputSchema.required).toEqual(['query']);
    expect(searchTool.outputSchema.properties.tools.items.required).toEqual(['name', 'server', 'inputSchema']);
    expect(searchTool.annotations.readOnlyHint).toBe(true);
    for (const s of ['- alpha (20 tools): Fixture alpha', '- beta (20 tools)', '- gamma (20 tools)']) expect(searchTool.description).toContain(s);
    expect(callTool.description).toContain('Servers: alpha, beta, gamma.');
    expect(searchTool.description).toContain('Search the 60 tools');
    expect(callTool.inputSchema.required).toEqual(['name']);
    // The point of it: the search surface costs a small part of what the list would.
    const all = await listAll(await host({ mcpServers: three(), surface: { mode: 'all' } }));
    const cost = (ts: any[]) => ts.reduce((n, t) => n + estimateTokens(JSON.stringify(t)), 0);
    expect(cost(tools)).toBeLessThan(cost(all) / 2);
  });

  it('maxDirectTokens decides too: 40 tools over a budget of 100 tokens get the search surface', async () => {
    const tools = await listAll(await host({ mcpServers: two(), surface: { maxDirectTokens: 100 } }));
    expect(names(tools)).toEqual(['search_tools', 'call_tool']);
  });

  it('a host that searches tools itself (clientInfo.name "claude-code", or a copilot*) gets every tool under auto', async () => {
    for (const name of ['claude-code', 'copilot-cli']) {
      const tools = await listAll(await host({ mcpServers: three() }, name));
      expect(tools.length, name).toBe(60);
      expect(names(tools)).not.toContain('search_tools');
    }
    // ...unless the config says otherwise.
    const narrowed = await listAll(await host({ mcpServers: three(), surface: { nativeSearchClients: [] } }, 'claude-code'));
    expect(names(narrowed)).toEqual(['search_tools', 'call_tool']);
  });

  it('a toolset with its own surface: "all" under mode "search", and its tools only', async () => {
    const config = { mcpServers: three(), surface: { mode: 'search' }, toolsets: { b: { tools: ['beta__*'], surface: 'all' }, c: { tools: ['gamma__*'] } } };
    const b = await listAll(await host(config, 'raw-test', ['--toolset', 'b']));
    expect(b.length).toBe(20);
    expect(b.every((t) => t.name.startsWith('beta__'))).toBe(true);
    // Toolset c keeps the configured search surface; its search finds only gamma's tools.
    const c = await host(config, 'raw-test', ['--toolset', 'c']);
    expect(names(await listAll(c))).toEqual(['search_tools', 'call_tool']);
    const found = (await search(c, { query: 'echo', limit: 50 })).result.structuredContent.tools;
    expect(found.length).toBeGreaterThan(0);
    expect(found.every((t: any) => t.server === 'gamma')).toBe(true);
  });
});

describe('search_tools', () => {
  const config = { mcpServers: three(), surface: { mode: 'search' } };

  it('ranks the matching tools first; structuredContent fits the declared outputSchema; the text says the same', async () => {
    const peer = await host(config);
    const [searchTool] = await listAll(peer);
    const r = await search(peer, { query: 'send a sampling request to the client model' });
    expect(r.error).toBeUndefined();
    expect(r.result.isError).toBeUndefined();
    const found = r.result.structuredContent.tools;
    expect(found.length).toBe(8); // surface.searchLimit's default
    expect(found.slice(0, 6).map((t: any) => t.name)).toEqual(expect.arrayContaining(['alpha__sample', 'beta__sample', 'gamma__sample']));
    const validate = new Ajv({ strict: false }).compile(searchTool.outputSchema);
    expect(validate(r.result.structuredContent), JSON.stringify(validate.errors)).toBe(true);
    const sample = found.find((t: any) => t.name === 'beta__sample');
    expect(sample.inputSchema.properties.text.type).toBe('string');
    expect(r.result.content[0].type).toBe('text');
    for (const t of found) expect(r.result.content[0].text).toContain(`${t.name} (${t.server})`);
    expect(r.result.content[0].text).toContain('beta__sample (beta): sampling/createMessage to the client');
    expect(r.result.content[0].text).toContain('arguments: text?: string; maxTokens?: integer');
  });

  it('limit is kept within 1..50, server narrows, and the answer stays under its token budget', async () => {
    const peer = await host(config);
    expect((await search(peer, { query: 'echo', limit: 0 })).result.structuredContent.tools.length).toBe(1);
    const many = await search(peer, { query: 'returns text tool arguments client', limit: 10_000 });
    expect(many.result.structuredContent.tools.length).toBeLessThanOrEqual(50);
    expect(many.result.structuredContent.tools.length).toBeGreaterThan(8);
    expect(estimateTokens(JSON.stringify(many.result))).toBeLessThanOrEqual(SEARCH_RESULT_MAX_TOKENS * 2 + 200);
    const beta = await search(peer, { query: 'echo', server: 'beta' });
    expect(beta.result.structuredContent.tools.map((t: any) => t.server)).toEqual(expect.arrayContaining(['beta']));
    expect(beta.result.structuredContent.tools.every((t: any) => t.server === 'beta')).toBe(true);
  });

  it('bad input is a tool error the model can correct (empty query, unknown server, wrong types); a 10 KB query is answered', async () => {
    const peer = await host(config);
    for (const [args, said] of [
      [{ query: '' }, /query must be a non-empty string/],
      [{ query: '   ' }, /query must be a non-empty string/],
      [{}, /query must be a non-empty string/],
      [{ query: 42 }, /query must be a non-empty string/],
      [{ query: 'echo', limit: 'many' }, /limit must be a number/],
      [{ query: 'echo', server: 'nope' }, /no server named "nope" among this session's: alpha, beta, gamma/],
      [{ query: 'echo', server: 7 }, /server must be a string/],
    ] as const) {
      const r = await search(peer, args);
      expect(r.error, JSON.stringify(args)).toBeUndefined();
      expect(r.result.isError, JSON.stringify(args)).toBe(true);
      expect(r.result.content[0].text).toMatch(said);
    }
    const notObject = await peer.request('tools/call', { name: 'search_tools', arguments: 'echo' });
    expect(notObject.result?.isError ?? notObject.error).toBeTruthy();
    const huge = await search(peer, { query: 'echo '.repeat(2048) });
    expect(huge.result.isError).toBeUndefined();
    expect(huge.result.structuredContent.tools[0].name).toMatch(/__echo$/);
    // A query matching nothing says so.
    const none = await search(peer, { query: 'zzqx' });
    expect(none.result.structuredContent.tools).toEqual([]);
    expect(none.result.content[0].text).toMatch(/^No tool matches "zzqx" among 60 tools/);
  });

  it('only a session on the search surface has the meta-tools: under "all" they are unknown tools', async () => {
    const peer = await host({ mcpServers: two(), surface: { mode: 'all' } });
    const r = await search(peer, { query: 'echo' });
    expect(r.error.code).toBe(-32602);
    expect(r.error.message).toMatch(/^Unknown tool: search_tools/);
  });

  it('the meta-tools can be renamed', async () => {
    const peer = await host({ mcpServers: three(), surface: { mode: 'search', searchToolName: 'find_tool', callToolName: 'use_tool' } });
    const tools = await listAll(peer);
    expect(names(tools)).toEqual(['find_tool', 'use_tool']);
    expect(tools[0].description).toContain('call a match with use_tool');
    const found = await peer.request('tools/call', { name: 'find_tool', arguments: { query: 'echo' } });
    expect(found.result.structuredContent.tools[0].name).toMatch(/__echo$/);
    const called = await peer.request('tools/call', { name: 'use_tool', arguments: { name: 'beta__echo', arguments: { x: 1 } } });
    expect(called.result.structuredContent).toEqual({ x: 1 });
  });
});

describe('auto decides again when a list changes', () => {
  it('40 tools listed directly; an upstream adds one: list_changed, and the next list is the search surface, which finds the new tool', async () => {
    const peer = await host({ mcpServers: two() });
    expect((await listAll(peer)).length).toBe(40);
    const added = await peer.request('tools/call', { name: 'alpha__add_tool', arguments: {} });
    expect(added.error).toBeUndefined();
    await peer.next((m) => m.method === 'notifications/tools/list_changed');
    // The upstream's change reaches the catalogue as the notification does; wait for the list to show it.
    let tools: any[] = [];
    await waitFor(async () => {
      tools = await listAll(peer);
      return names(tools).includes('search_tools');
    }, { what: 'the search surface after the list grew' });
    expect(names(tools)).toEqual(['search_tools', 'call_tool']);
    const found = await search(peer, { query: 'added at run time' });
    expect(found.result.structuredContent.tools[0].name).toBe('alpha__added_0');
  });
});

describe('weighing a list a host gave up on', () => {
  it('auto: the walk that weighs the session is cancelled upstream when the only host waiting for it cancels its tools/list', async () => {
    // Page requests after the 5th are held until a cancellation names one (test/fixtures/endless-upstream.mjs).
    const endless = { command: process.execPath, args: [`${ROOT}/test/fixtures/endless-upstream.mjs`, JSON.stringify({ holdAfter: 5 })] };
    const peer = await host({ mcpServers: { endless } });
    peer.send({ jsonrpc: '2.0', id: 'list', method: 'tools/list', params: {} });
    // From the moment mcpmux reads the list, one of the walk's page requests is in flight (or held).
    peer.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'list', reason: 'gave up' } });
    const count = await peer.request('tools/call', { name: 'endless__count', arguments: {} }, 60_000);
    const after = JSON.parse(count.result.content[0].text);
    expect(after.cancelled, JSON.stringify(after)).toBeGreaterThan(0);
    // Cancelled: the host gets no answer to it (MCP), and mcpmux goes on answering.
    expect(peer.messages.some((m) => m.id === 'list')).toBe(false);
  });
});

describe('a reload that changes only the surface or a toolset', () => {
  it('tells the host its tools changed (list_changed), and the next list is the new surface', async () => {
    const config = { mcpServers: three(), surface: { mode: 'all' } };
    const file = await writeConfig(config);
    const peer = startRawMux(file);
    await peer.initialize();
    expect((await listAll(peer)).length).toBe(60);
    writeFileSync(file, JSON.stringify({ ...config, surface: { mode: 'search' } }));
    peer.child.kill('SIGHUP');
    await peer.next((m) => m.method === 'notifications/tools/list_changed');
    expect(names(await listAll(peer))).toEqual(['search_tools', 'call_tool']);
  });
});

describe('/status and /metrics say what each session got', () => {
  it('serve: a claude-code session gets all, another the search surface; both show with reason, tools and tokens', async () => {
    const d = await startDaemon({ mcpServers: three(), listen: { port: 0 } });
    const open = async (name: string) => {
      const init = await fetch(d.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name, version: '1' } } }),
      });
      const sid = init.headers.get('mcp-session-id')!;
      await init.text();
      const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
      await (await fetch(d.url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).text();
      const list = await fetch(d.url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
      const text = await list.text();
      // A JSON answer, or an SSE stream whose data lines (a priming event's is empty) hold it.
      const answers = text.includes('data:') ? text.split('\n').filter((l) => l.startsWith('data:') && l.slice(5).trim() !== '').map((l) => l.slice(5)) : [text];
      return JSON.parse(answers.at(-1)!);
    };
    expect((await open('claude-code')).result.tools.length).toBe(60);
    expect(names((await open('cursor')).result.tools)).toEqual(['search_tools', 'call_tool']);
    const status = await (await fetch(`${d.base}/status`)).json();
    expect(status.surface.mode).toBe('auto');
    const groups = status.surface.sessions;
    const all = groups.find((g: any) => g.mode === 'all');
    const searched = groups.find((g: any) => g.mode === 'search');
    expect(all).toMatchObject({ client: 'anonymous', toolset: null, sessions: 1, reason: expect.stringContaining('claude-code') });
    expect(searched).toMatchObject({ client: 'anonymous', toolset: null, sessions: 1, tools: 60, reason: 'auto: 60 tools, more than surface.maxDirectTools (40)' });
    expect(searched.tokens).toBeGreaterThan(1000);
    const { samples } = await scrape(`${d.base}/metrics`);
    expect(total(samples, 'mcpmux_surface_sessions', { mode: 'search' })).toBe(1);
    expect(total(samples, 'mcpmux_surface_sessions', { mode: 'all' })).toBe(1);
    expect(total(samples, 'mcpmux_surface_tool_tokens', { client: 'anonymous', toolset: '' })).toBe(searched.tokens);
  });
});
