// The list path's memory (issue 23, target 4: peak RSS with 20 x 100 tools listed): a merged
// page is serialised once, in pieces rather than as one string of the whole page, and kept only
// while some host can still be served it.

import { writeFileSync } from 'node:fs';
import { afterEach, expect, it } from 'vitest';
import { parseJson } from '../src/jsonrpc/big-numbers.js';
import { encodeChunks, encodeMessage, markStable } from '../src/jsonrpc/framing.js';
import { closeAll, fixture, startRawMux, tempFile, UPSTREAM_FIXTURE, waitFor, writeConfig, type RawPeer } from './helpers/harness.js';
import { GC_ENV } from './helpers/memory.js';

afterEach(closeAll);

const KB = 1024;

it('a page kept as bytes is exactly what JSON.stringify writes, in pieces of at most 64 KB (an item larger than that: one piece of its own)', () => {
  // Multi-byte characters (2, 3 and 4 bytes of UTF-8) at every offset, so pieces end anywhere;
  // numbers a double cannot hold (kept as their digits); members and items JSON leaves out.
  const items = Array.from({ length: 3000 }, (_, i) => `{"name":"t_${i}","description":"é ✓ 😀 ${'x'.repeat(i % 700)}","n":1234567890123456789${i}}`);
  items.push(`{"name":"large","description":"${'é'.repeat(150 * KB)}"}`);
  const make = (): Record<string, unknown> => ({ tools: [...(parseJson(`[${items.join(',')}]`) as object[]), undefined], nextCursor: 'next', skipped: undefined, fn: () => 1 });
  const expected = encodeMessage({ jsonrpc: '2.0', id: 7, result: make() });
  // The digits, not a marker or a rounded double.
  expect(expected.includes('"n":12345678901234567890}')).toBe(true);
  const page = make();
  markStable(page);
  const wire = encodeChunks({ jsonrpc: '2.0', id: 7, result: page });
  expect(Array.isArray(wire)).toBe(true);
  const pieces = (wire as (string | Buffer)[]).map((p) => (typeof p === 'string' ? Buffer.from(p) : p));
  expect(Buffer.concat(pieces).toString('utf8')).toBe(expected);
  const buffers = (wire as (string | Buffer)[]).filter((p): p is Buffer => Buffer.isBuffer(p));
  const total = buffers.reduce((n, b) => n + b.length, 0);
  expect(total).toBeGreaterThan(1024 * KB);
  // Before: one Buffer of the whole page (made from one string of it).
  const over = buffers.filter((b) => b.length > 64 * KB);
  expect(over.length).toBe(1);
  expect(over[0]!.length).toBeLessThan(2 * 150 * KB + 100);
  // The next answer with the same page: the same bytes, not serialised again.
  const again = encodeChunks({ jsonrpc: '2.0', id: 'b', result: page }) as (string | Buffer)[];
  expect(again.filter((p) => Buffer.isBuffer(p))).toEqual(buffers);
  expect(buffers.every((b, i) => b === again.filter((p) => Buffer.isBuffer(p))[i])).toBe(true);
});

/** Full collections in `peer` (started with GC_ENV), then its array buffers' bytes (where pages kept as bytes live). */
async function arrayBuffersAfterGc(peer: RawPeer): Promise<number> {
  const from = peer.stderr().length;
  peer.child.kill('SIGWINCH');
  const n = await waitFor(() => /"msg":"forced gc".*"arrayBuffers":(\d+)/.exec(peer.stderr().slice(from))?.[1], { what: 'the memory after a forced GC', timeoutMs: 30_000 });
  return Number(n);
}

const sizeOf = (result: unknown): number => Buffer.byteLength(JSON.stringify(result));

it('a page made of a list version since replaced is not kept: one page of bytes after six list changes, not seven', async () => {
  // Surface "all": every tool listed (a large list would get the search surface otherwise).
  const config = await writeConfig({ mcpServers: { a: fixture({ name: 'a', tools: 2000 }) }, surface: { mode: 'all' } });
  const peer = startRawMux(config, { env: GC_ENV });
  await peer.initialize();
  const first = (await peer.request('tools/list')).result;
  const n = first.tools.length;
  for (let i = 1; i <= 6; i++) {
    await peer.request('tools/call', { name: 'a__add_tool', arguments: {} });
    await peer.next((m) => m.method === 'notifications/tools/list_changed');
    expect((await peer.request('tools/list')).result.tools.length).toBe(n + i);
  }
  const page = sizeOf(first);
  expect(page).toBeGreaterThan(256 * KB);
  // Before: every version's page stayed in the memo with its bytes (seven of them).
  expect(await arrayBuffersAfterGc(peer)).toBeLessThan(2 * page);
});

it('pages made while some servers were still starting are not kept once those servers are up', async () => {
  // Four servers, each started when the test says (a file appears): the host lists after each.
  const gates = ['a', 'b', 'c', 'd'].map((name) => ({ name, file: tempFile(`go-${name}`) }));
  const servers = Object.fromEntries(
    gates.map(({ name, file }) => [
      name,
      { command: '/bin/sh', args: ['-c', 'while [ ! -e "$0" ]; do sleep 0.02; done; exec "$@"', file, process.execPath, UPSTREAM_FIXTURE, JSON.stringify({ name, tools: 800 })] },
    ]),
  );
  const config = await writeConfig({ mcpServers: servers, timeouts: { startupMs: 60_000, startupWaitMs: 0 }, surface: { mode: 'all' } });
  const peer = startRawMux(config, { env: GC_ENV });
  await peer.initialize();
  let last: { tools: unknown[] } | undefined;
  for (const [i, { name, file }] of gates.entries()) {
    writeFileSync(file, '');
    await waitFor(() => peer.stderr().split('\n').some((l) => l.includes('"msg":"upstream ready"') && l.includes(`"server":"${name}"`)), { what: `${name} ready` });
    last = (await peer.request('tools/list')).result;
    expect(new Set(last!.tools.map((t) => (t as { name: string }).name.split('__')[0])).size).toBe(i + 1);
  }
  const page = sizeOf(last);
  expect(page).toBeGreaterThan(256 * KB);
  // Before: the pages of one, two and three servers stayed too (1.5 pages more).
  expect(await arrayBuffersAfterGc(peer)).toBeLessThan(1.4 * page);
});

it('a cached page is sized without serialising it, and sharing its equal strings changes nothing a host sees', async () => {
  const { jsonChars } = await import('../src/router/catalogue.js');
  const { shareStrings } = await import('../src/router/shared-strings.js');
  const tool = (i: number) => ({
    name: `t_${i}`,
    description: 'Fetch one item by its id.',
    inputSchema: { type: 'object', properties: { id: { type: 'string', description: 'The item id.', pattern: '^[a-z]+$' }, n: { type: 'integer', minimum: -1.5, enum: [1, 2, null] }, ok: { type: 'boolean', default: false } }, required: ['id'] },
    nested: [[[{ deep: 'x'.repeat(5000) }]]],
  });
  const items = Array.from({ length: 50 }, (_, i) => tool(i));
  // JSON characters, counted without writing them (escapes aside: none here).
  expect(jsonChars(items)).toBe(JSON.stringify(items).length);
  const before = JSON.stringify(items);
  const seen = new Map<string, string>();
  for (const item of items) shareStrings(item, seen);
  expect(JSON.stringify(items)).toBe(before);
  // One entry per distinct short string of the page (the 5 000-character one is left alone).
  expect(seen.size).toBeLessThan(70);
  expect([...seen.keys()].some((s) => s.length > 4096)).toBe(false);
});
