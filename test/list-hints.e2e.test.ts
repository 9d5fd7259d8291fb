// Issue 23: the 2026-07-28 list caching hints (`ttlMs`, `cacheScope`). Real upstreams that send
// them (the SDK 2.x server with its `cacheHints` option, test/fixtures/modern-upstream.mjs) behind
// the real binary; a raw modern host over stdio reads what mcpmux merges: the shortest ttlMs
// left, `public` only when every upstream said public and every client is shown the same list.
// mcpmux's own cache keeps an upstream's page for its ttlMs (docs/decisions.md).

import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { awaitJsonLine, closeAll, fixture, readEvents, ROOT, startRawMux, tempFile, waitFor, writeConfig } from './helpers/harness.js';

const servers: ChildProcess[] = [];
afterEach(closeAll);
afterAll(async () => {
  for (const s of servers) s.kill('SIGKILL');
  await stopAllDaemons();
});

const MODERN_FIXTURE = path.join(ROOT, 'test/fixtures/modern-upstream.mjs');
const MODERN = '2026-07-28';
const envelope = () => ({ 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' } });

/** A modern upstream whose tools/list says `ttlMs` and `cacheScope` (and, with `events`, records each list asked). */
function hinted(ttlMs: number, cacheScope: 'public' | 'private', extra: object = {}) {
  return { command: process.execPath, args: [MODERN_FIXTURE, 'stdio', JSON.stringify({ cacheHints: { 'tools/list': { ttlMs, cacheScope } }, ...extra })] };
}

/** The same upstream over Streamable HTTP, in its own process: its URL. */
async function hintedHttp(ttlMs: number, cacheScope: 'public' | 'private'): Promise<string> {
  const child = spawn(process.execPath, [MODERN_FIXTURE, 'http', JSON.stringify({ cacheHints: { 'tools/list': { ttlMs, cacheScope } } })], { stdio: ['ignore', 'ignore', 'pipe'] });
  servers.push(child);
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const port = await awaitJsonLine(child.stderr!, exited, (j) => j.port as number | undefined, { ms: 15_000, what: 'the modern fixture listening', log: () => err });
  return `http://127.0.0.1:${port}/mcp`;
}

async function modernList(peer: ReturnType<typeof startRawMux>): Promise<any> {
  const r = await peer.request('tools/list', { _meta: envelope() }, 45_000);
  expect(r.error).toBeUndefined();
  return r.result;
}

const lists = (file: string) => readEvents(file).filter((e) => e.type === 'list').length;

describe('list caching hints merged for modern hosts', () => {
  it('shortest ttlMs of the upstreams, public when all said public and the list is the same for every client; a legacy host gets none', async () => {
    const config = await writeConfig({ mcpServers: { a: hinted(600_000, 'public'), b: hinted(300_000, 'public') }, surface: { mode: 'all' } });
    const peer = startRawMux(config);
    const t0 = Date.now();
    const r = await modernList(peer);
    expect(r.tools.map((t: any) => t.name)).toEqual(expect.arrayContaining(['a__echo', 'b__echo']));
    expect(r.cacheScope).toBe('public');
    // b's 300 s, less the time since b answered (never more, never a's 600 s).
    expect(r.ttlMs).toBeLessThanOrEqual(300_000);
    expect(r.ttlMs).toBeGreaterThan(300_000 - (Date.now() - t0) - 1000);

    const legacy = startRawMux(config);
    await legacy.request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'legacy', version: '0' } }, 45_000);
    legacy.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const l = (await legacy.request('tools/list', {}, 45_000)).result;
    expect(l.tools.map((t: any) => t.name)).toContain('b__echo');
    expect(l.ttlMs).toBeUndefined();
    expect(l.cacheScope).toBeUndefined();
  }, 150_000);

  it('private when one upstream said private, under a per-client policy, or with the auto surface', async () => {
    const one = startRawMux(await writeConfig({ mcpServers: { a: hinted(600_000, 'public'), c: hinted(600_000, 'private') }, surface: { mode: 'all' } }));
    const mixed = await modernList(one);
    expect(mixed).toMatchObject({ cacheScope: 'private' });
    expect(mixed.ttlMs).toBeGreaterThan(500_000);

    const policy = startRawMux(await writeConfig({ mcpServers: { a: hinted(600_000, 'public') }, surface: { mode: 'all' }, policy: { clients: { anonymous: { deny: ['a__greet'] } } } }));
    expect(await modernList(policy)).toMatchObject({ cacheScope: 'private' });

    // The default surface ("auto") may give another client the search surface: not the same list for all.
    const auto = startRawMux(await writeConfig({ mcpServers: { a: hinted(600_000, 'public') } }));
    expect(await modernList(auto)).toMatchObject({ cacheScope: 'private' });

    // A per-client server (oauth.perClient) has a connection, and a login, per client: what it
    // lists may differ between clients, whatever it says of its own page.
    const url = await hintedHttp(600_000, 'public');
    const shared = startRawMux(await writeConfig({ mcpServers: { a: hinted(600_000, 'public'), h: { url } }, surface: { mode: 'all' } }));
    expect(await modernList(shared)).toMatchObject({ cacheScope: 'public' });
    const perClient = startRawMux(await writeConfig({ mcpServers: { a: hinted(600_000, 'public'), h: { url, oauth: { perClient: true } } }, surface: { mode: 'all' } }));
    const r = await modernList(perClient);
    expect(r.tools.map((t: any) => t.name)).toEqual(expect.arrayContaining(['a__echo', 'h__echo']));
    expect(r).toMatchObject({ cacheScope: 'private' });
  }, 150_000);

  it('an upstream list is reused within its ttlMs, asked again after it, and after list_changed', async () => {
    const shortEvents = tempFile('short.jsonl');
    const longEvents = tempFile('long.jsonl');
    const config = await writeConfig({
      mcpServers: {
        // No listChanged: without its ttlMs this list would be asked for on every host list.
        short: hinted(3000, 'public', { listChanged: false, events: shortEvents }),
        long: hinted(600_000, 'public', { events: longEvents }),
      },
      surface: { mode: 'all' },
    });
    const peer = startRawMux(config);
    const first = await modernList(peer);
    expect(first.ttlMs).toBeLessThanOrEqual(3000);
    const short0 = lists(shortEvents);
    const long0 = lists(longEvents);
    expect(short0).toBeGreaterThan(0);
    // Within the ttl: served from mcpmux's cache, neither upstream asked.
    await modernList(peer);
    await modernList(peer);
    expect(lists(shortEvents)).toBe(short0);
    expect(lists(longEvents)).toBe(long0);
    // Past short's 3 s: asked again (and only short).
    await waitFor(async () => (await modernList(peer), lists(shortEvents) > short0), { what: 'short asked again once its ttlMs passed', timeoutMs: 15_000 });
    expect(lists(longEvents)).toBe(long0);
    // list_changed ends long's page however long its ttl.
    await peer.request('tools/call', { name: 'long__add', arguments: {}, _meta: envelope() }, 45_000);
    await waitFor(async () => (await modernList(peer)).tools.some((t: any) => t.name === 'long__added_0'), { what: 'the added tool listed after list_changed', timeoutMs: 15_000 });
    expect(lists(longEvents)).toBeGreaterThan(long0);
  }, 150_000);
});

describe('a list over Streamable HTTP', () => {
  it('is answered as one JSON body with a length when the host takes both forms alike; a call still streams', async () => {
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) } });
    const accept = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await fetch(d.url, { method: 'POST', headers: accept, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '0' } } }) });
    await init.text();
    const headers = { ...accept, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25' };
    await (await fetch(d.url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).text();
    const list = await fetch(d.url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
    expect(list.headers.get('content-type')).toBe('application/json');
    const body = await list.text();
    expect(Number(list.headers.get('content-length'))).toBe(Buffer.byteLength(body));
    expect(JSON.parse(body)).toMatchObject({ id: 2, result: { tools: expect.arrayContaining([expect.objectContaining({ name: 'fx__echo' })]) } });
    // A list asking for progress, and a call (progress, questions), keep the event stream.
    const withProgress = await fetch(d.url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list', params: { _meta: { progressToken: 'p' } } }) });
    expect(withProgress.headers.get('content-type')).toBe('text/event-stream');
    await withProgress.text();
    const call = await fetch(d.url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'fx__echo', arguments: { a: 1 } } }) });
    expect(call.headers.get('content-type')).toBe('text/event-stream');
    await call.text();
    await d.stop();
  }, 60_000);
});
