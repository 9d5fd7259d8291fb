// Start fast, fill in late: a host's initialize waits for the upstreams at most
// timeouts.startupWaitMs; one that never answers delays nobody, one that answers late joins
// with list_changed.

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { closeAll, fixture, ROOT, startRawMux, tempFile, waitFor, writeConfig } from './helpers/harness.js';

afterEach(closeAll);

const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');
const bad = (opts: object) => ({ command: process.execPath, args: [BAD, JSON.stringify(opts)], restart: { maxRetries: 0, backoffMs: 10 } });
const names = async (peer: ReturnType<typeof startRawMux>) => (await peer.request('tools/list')).result.tools.map((t: { name: string }) => t.name) as string[];

async function timedInitialize(peer: ReturnType<typeof startRawMux>): Promise<{ ms: number; result: any }> {
  const t0 = Date.now();
  const res = await peer.initialize();
  return { ms: Date.now() - t0, result: res.result };
}

it('an upstream that never answers initialize delays the host by at most startupWaitMs + 0.5 s; the other serves', async () => {
  const config = await writeConfig({ mcpServers: { never: bad({ neverInit: true }), good: fixture({ name: 'good' }) }, timeouts: { startupMs: 10_000, startupWaitMs: 800 } });
  const peer = startRawMux(config);
  // The good fixture is up first, so the wait is about the one that never answers.
  await waitFor(() => peer.stderr().includes('"server":"good"') && peer.stderr().includes('"msg":"upstream ready"'), { what: 'good up', timeoutMs: 15_000 });
  const { ms } = await timedInitialize(peer);
  expect(ms).toBeLessThan(800 + 500);
  const tools = await names(peer);
  expect(tools.some((t) => t.startsWith('good__'))).toBe(true);
  expect(tools.some((t) => t.startsWith('never__'))).toBe(false);
});

it('the default wait is 3 s', async () => {
  // Written by hand: the test harness would otherwise set startupWaitMs.
  const file = tempFile('mcpmux.json');
  writeFileSync(file, JSON.stringify({ mcpServers: { never: bad({ neverInit: true }), good: fixture({ name: 'good' }) } }));
  const spawned = Date.now();
  const peer = startRawMux(file);
  const { ms } = await timedInitialize(peer);
  // The wait runs from mcpmux's start: the answer comes 3 s after it, give or take node's start-up.
  expect(ms).toBeLessThan(3000 + 500 + 2000);
  expect(Date.now() - spawned).toBeGreaterThanOrEqual(3000);
});

it('an upstream that answers after the wait joins with list_changed, and the lists were offered up front', async () => {
  const config = await writeConfig({ mcpServers: { late: bad({ initDelayMs: 2000 }), good: { ...fixture({ name: 'good', capabilities: { prompts: false, resources: false } }) } }, timeouts: { startupWaitMs: 300 } });
  const peer = startRawMux(config);
  const { result } = await timedInitialize(peer);
  // "late" is still starting: tools, prompts and resources are offered whatever "good" offers.
  expect(result.capabilities).toMatchObject({ tools: { listChanged: true }, prompts: { listChanged: true }, resources: { listChanged: true } });
  expect((await names(peer)).some((t) => t.startsWith('late__'))).toBe(false);
  await peer.next((m) => m.method === 'notifications/tools/list_changed', 10_000);
  await waitFor(async () => (await names(peer)).includes('late__misbehave'), { what: 'late listed', timeoutMs: 10_000 });
});
