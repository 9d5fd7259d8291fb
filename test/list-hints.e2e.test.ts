// Issue 23: the 2026-07-28 list caching hints (`ttlMs`, `cacheScope`). Real upstreams that send
// them (the SDK 2.x server with its `cacheHints` option, test/fixtures/modern-upstream.mjs) behind
// the real binary; a raw modern host over stdio reads what mcpmux merges: the shortest ttlMs
// left, `public` only when every upstream said public and every client is shown the same list.
// mcpmux's own cache keeps an upstream's page for its ttlMs (docs/decisions.md).

import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, readEvents, ROOT, startRawMux, tempFile, waitFor, writeConfig } from './helpers/harness.js';

afterEach(closeAll);

const MODERN_FIXTURE = path.join(ROOT, 'test/fixtures/modern-upstream.mjs');
const MODERN = '2026-07-28';
const envelope = () => ({ 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' } });

/** A modern upstream whose tools/list says `ttlMs` and `cacheScope` (and, with `events`, records each list asked). */
function hinted(ttlMs: number, cacheScope: 'public' | 'private', extra: object = {}) {
  return { command: process.execPath, args: [MODERN_FIXTURE, 'stdio', JSON.stringify({ cacheHints: { 'tools/list': { ttlMs, cacheScope } }, ...extra })] };
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
