// Upstreams whose lists never end (issue 18, item 1), and names no list has (item 9), against
// the real binary: every walk of an upstream's pages is bounded and ends with an error naming
// the server, a host's cancellation ends it, nothing in mcpmux grows per page, and calls of an
// unknown name share one walk and remember what it found until the list changes.

import { execFile, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, fixture, MUX_BIN, ROOT, startRawMux, waitFor, writeConfig, type RawPeer } from './helpers/harness.js';

afterEach(closeAll);

const ENDLESS = path.join(ROOT, 'test/fixtures/endless-upstream.mjs');
const endless = (opts: object = {}) => ({ command: process.execPath, args: [ENDLESS, JSON.stringify(opts)], restart: { maxRetries: 0, backoffMs: 10 } });

// Each mcpmux whose heap is compared preloads test/fixtures/gc-on-signal.cjs (as fuzz.e2e does):
// the heap compared is the live heap, not whatever garbage V8 has not collected yet.
const GC_ENV = { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${JSON.stringify(path.join(ROOT, 'test/fixtures/gc-on-signal.cjs'))}` };
const MB = 1024 * 1024;

async function liveHeap(child: ChildProcess, stderr: () => string): Promise<number> {
  const from = stderr().length;
  child.kill('SIGWINCH');
  const used = await waitFor(() => /"msg":"forced gc","heapUsed":(\d+)/.exec(stderr().slice(from))?.[1], { what: 'the heap after a forced GC', timeoutMs: 30_000 });
  return Number(used);
}

async function mux(servers: object, env: Record<string, string> = {}, extra: object = {}): Promise<RawPeer> {
  const peer = startRawMux(await writeConfig({ mcpServers: servers, ...extra }), { env });
  // initialize waits for the upstreams to start: on a busy machine that may take longer than
  // the harness's default 5 s for a response.
  const init = await peer.request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'endless-test', version: '0' } }, 30_000);
  expect(init.result, JSON.stringify(init.error)).toBeDefined();
  peer.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return peer;
}

/** What the endless fixture received so far (its `count` tool; the name must be published). */
async function counts(peer: RawPeer): Promise<{ lists: Record<string, number>; total: number; cancelled: number; held: number }> {
  const r = await peer.request('tools/call', { name: 'endless__count', arguments: {} }, 30_000);
  expect(r.error, JSON.stringify(r.error)).toBeUndefined();
  return JSON.parse(r.result.content[0].text);
}

const call = (peer: RawPeer, name: string, timeoutMs = 60_000) => peer.request('tools/call', { name, arguments: {} }, timeoutMs);

describe('an upstream whose lists never end', () => {
  it('a misspelled tool: answered with an error naming the server once 1000 pages were read; the good server still serves', async () => {
    const peer = await mux({ endless: endless(), good: fixture({ name: 'good' }) });
    // Bounded: before the fix this call was never answered.
    const r = await call(peer, 'endless__nope');
    expect(r.error.code).toBe(-32602);
    expect(r.error.message).toMatch(/^Unknown tool: endless__nope/);
    expect(r.error.message).toContain('"endless"');
    expect(r.error.message).toMatch(/tools\/list went on past 1000 pages/);
    // The walk stopped at the bound: 1000 pages of tools, no more.
    expect((await counts(peer)).lists['tools/list']).toBe(1000);
    // A name the good server has is still found, and it serves.
    expect((await call(peer, 'good__echo')).error).toBeUndefined();
    // prompts/get walks prompts/list the same way.
    const p = await peer.request('prompts/get', { name: 'endless__nope' }, 60_000);
    expect(p.error.message).toMatch(/^Unknown prompt: endless__nope.*"endless".*prompts\/list went on past 1000 pages/);
  }, 120_000);

  it('ever-new names on every page: the walk stops at the page bound, and the live heap does not balloon', async () => {
    const peer = await mux({ endless: endless({ fresh: true, perPage: 5 }) }, GC_ENV);
    const before = await liveHeap(peer.child, peer.stderr);
    const r = await call(peer, 'endless__nope');
    expect(r.error.message).toMatch(/^Unknown tool: endless__nope.*"endless".*tools\/list went on past 1000 pages/);
    expect((await counts(peer)).lists['tools/list']).toBe(1000);
    // What stays is the public name of each of the 5000 tools seen, nothing per page.
    expect((await liveHeap(peer.child, peer.stderr)) - before, 'live heap growth (bytes)').toBeLessThan(24 * MB);
  }, 120_000);

  it('pages of 1000 items: the walk stops at 100000 items', async () => {
    const peer = await mux({ endless: endless({ perPage: 1000 }) });
    const r = await call(peer, 'endless__nope');
    expect(r.error.message).toMatch(/^Unknown tool: endless__nope.*"endless".*tools\/list went on past 100000 items/);
    // The first page has the fixture's own two tools as well: the 100th passes the bound.
    expect((await counts(peer)).lists['tools/list']).toBe(100);
  }, 120_000);

  it("a host's cancellation ends the walk: the page in flight is cancelled upstream and no page is asked for after it", async () => {
    // List requests after the 5th are held until a cancellation: the walk is surely under way.
    // Surface "all": the host's first tools/list is one merged page, as this test needs. Under
    // the default "auto" that list first walks the whole (endless) catalogue to weigh it, a walk
    // no host cancels, which the held 6th page stops until the upstream's request timeout.
    const peer = await mux({ endless: endless({ holdAfter: 5 }) }, {}, { surface: { mode: 'all' } });
    // The host's own first page publishes `count`, so asking the fixture walks nothing.
    expect((await peer.request('tools/list')).result.nextCursor).toEqual(expect.any(String));
    peer.send({ jsonrpc: '2.0', id: 'walk', method: 'tools/call', params: { name: 'endless__nope', arguments: {} } });
    await waitFor(async () => (await counts(peer)).held === 1, { what: 'the walk waiting on a held page', timeoutMs: 30_000 });
    peer.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'walk', reason: 'the user gave up' } });
    // The cancellation reached the upstream for the page in flight (before the fix: never).
    await waitFor(async () => (await counts(peer)).cancelled === 1, { what: 'the held page cancelled upstream', timeoutMs: 30_000 });
    // The fixture answered it (late) and holds nothing now: a walk still going would ask for
    // page after page. Round trips through the same pipe show none is asked for.
    const settled = (await counts(peer)).total;
    for (let i = 0; i < 5; i++) expect((await counts(peer)).total).toBe(settled);
    expect(settled).toBe(6);
    expect(peer.messages.filter((m) => m.id === 'walk')).toEqual([]);
  }, 120_000);

  it('a host paging through an endless list of large items: the page cache stays within its budget', async () => {
    // Every page: one item of 100 KB. listChanged, so every page is cacheable.
    const peer = await mux({ endless: endless({ listChanged: true, perPage: 1, pad: 100_000 }) }, GC_ENV);
    let cursor: string | undefined;
    const page = async () => {
      const r = await peer.request('tools/list', cursor === undefined ? {} : { cursor }, 30_000);
      expect(r.error, JSON.stringify(r.error)).toBeUndefined();
      cursor = r.result.nextCursor;
    };
    for (let i = 0; i < 50; i++) await page();
    const before = await liveHeap(peer.child, peer.stderr);
    // 1500 more pages, 150 MB of items: before the fix the cache kept them all (it counted
    // items, and allowed 200 000).
    for (let i = 0; i < 1500; i++) await page();
    // Measured: about 28 MB (the two budgets, 32 + 16 MB of JSON, are the bound); before: 151 MB.
    expect((await liveHeap(peer.child, peer.stderr)) - before, 'live heap growth (bytes)').toBeLessThan(80 * MB);
  }, 180_000);

  /** `mcpmux <args> --config <file>` to completion (killed after 90 s). */
  async function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const file = await writeConfig({ mcpServers: { endless: endless(), good: fixture({ name: 'good' }) } });
    const { MCPMUX_CONFIG: _ignored, ...env } = process.env;
    return new Promise((resolve) => {
      const child = execFile(process.execPath, [MUX_BIN, ...args, '--config', file], { env, timeout: 90_000 }, (_err, stdout, stderr) =>
        resolve({ code: child.exitCode, stdout, stderr }),
      );
    });
  }

  it('mcpmux tools lists the other servers\' tools and says why the endless one is left out', async () => {
    const r = await cli(['tools']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^good__echo /m);
    expect(r.stdout).not.toMatch(/^endless__/m);
    expect(r.stderr).toMatch(/the tools of server endless are left out: server "endless": its tools\/list went on past 1000 pages/);
  }, 120_000);

  it('mcpmux check --probe ends with an error naming the server and exits 1', async () => {
    const r = await cli(['check', '--probe']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toMatch(/endless: FAILED \(.*tools\/list went on past 1000 pages/);
    expect(r.stdout).toMatch(/good: ok/);
  }, 120_000);
});

describe('names no list has', () => {
  // A well-behaved upstream whose tools come in 4 pages.
  const paged = () => endless({ pages: 4 });

  it('calls of the same unknown name walk the lists once; so do calls of other unknown names', async () => {
    const peer = await mux({ endless: paged() });
    for (let i = 0; i < 10; i++) expect((await call(peer, 'endless__nope')).error.message).toBe('Unknown tool: endless__nope');
    for (let i = 0; i < 5; i++) expect((await call(peer, `nope_${i}`)).error.message).toBe(`Unknown tool: nope_${i}`);
    expect((await counts(peer)).lists['tools/list']).toBe(4);
  }, 60_000);

  it('concurrent calls of unknown names share one walk', async () => {
    const peer = await mux({ endless: paged() });
    const rs = await Promise.all(Array.from({ length: 20 }, (_, i) => call(peer, `endless__nope_${i}`)));
    for (const r of rs) expect(r.error.message).toMatch(/^Unknown tool: endless__nope_\d+$/);
    expect((await counts(peer)).lists['tools/list']).toBe(4);
  }, 60_000);

  it("the upstream's list_changed clears what was remembered: the next unknown name walks again", async () => {
    const peer = await mux({ endless: paged() });
    await call(peer, 'endless__nope');
    expect((await counts(peer)).lists['tools/list']).toBe(4);
    // The fixture says list_changed before it answers, on the same pipe: mcpmux has heard it.
    expect((await call(peer, 'endless__change')).result.content[0].text).toBe('changed');
    await call(peer, 'endless__nope');
    expect((await counts(peer)).lists['tools/list']).toBe(8);
    await call(peer, 'endless__nope');
    expect((await counts(peer)).lists['tools/list']).toBe(8);
  }, 60_000);
});
