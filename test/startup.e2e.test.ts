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

/** Whether mcpmux has given up on the upstream `name` (its start failed: startupMs passed). */
const failed = (peer: ReturnType<typeof startRawMux>, name: string) =>
  peer.stderr().split('\n').some((l) => l.includes(`"server":"${name}"`) && l.includes('"msg":"upstream failed"'));

// No upper bounds on time here (a busy machine may take any time): that the host was not kept
// waiting for the upstream that never answers shows as the order of events: the answer came
// while that upstream was still starting (its startupMs had not passed). The wait itself is a
// lower bound, which load only lengthens.

it('an upstream that never answers initialize delays the host by startupWaitMs only, not startupMs; the other serves', async () => {
  // 4 s: longer than the 3 s default, so the answer's lower bound shows this value is the one used.
  const config = await writeConfig({ mcpServers: { never: bad({ neverInit: true }), good: fixture({ name: 'good' }) }, timeouts: { startupMs: 120_000, startupWaitMs: 4000 } });
  const spawned = Date.now();
  const peer = startRawMux(config);
  await peer.initialize();
  expect(Date.now() - spawned).toBeGreaterThanOrEqual(4000);
  expect(failed(peer, 'never'), 'answered only after the never-answering upstream failed').toBe(false);
  // On a busy machine "good" may itself take longer than the wait: it joins with list_changed.
  const tools = await waitFor(async () => {
    const t = await names(peer);
    return t.some((n) => n.startsWith('good__')) ? t : undefined;
  }, { what: "good's tools listed" });
  expect(tools.some((t) => t.startsWith('never__'))).toBe(false);
});

it('the default wait is 3 s', async () => {
  // Written by hand: the test harness would otherwise set startupWaitMs.
  const file = tempFile('mcpmux.json');
  writeFileSync(file, JSON.stringify({ mcpServers: { never: bad({ neverInit: true }), good: fixture({ name: 'good' }) } }));
  const spawned = Date.now();
  const peer = startRawMux(file);
  await peer.initialize();
  // The wait runs from mcpmux's start, and ends before the default startupMs (10 s) fails "never".
  expect(Date.now() - spawned).toBeGreaterThanOrEqual(3000);
  expect(failed(peer, 'never'), 'answered only after the never-answering upstream failed').toBe(false);
});

it('an upstream that answers after the wait joins with list_changed, and the lists were offered up front', async () => {
  // "late" answers its initialize when the test says so (a file appears), not after a time.
  const go = tempFile('late-go');
  const config = await writeConfig({ mcpServers: { late: bad({ initWhenFile: go }), good: { ...fixture({ name: 'good', capabilities: { prompts: false, resources: false } }) } }, timeouts: { startupWaitMs: 300 } });
  const peer = startRawMux(config);
  const { result } = await peer.initialize();
  // "late" is still starting: tools, prompts and resources are offered whatever "good" offers.
  expect(result.capabilities).toMatchObject({ tools: { listChanged: true }, prompts: { listChanged: true }, resources: { listChanged: true } });
  expect((await names(peer)).some((t) => t.startsWith('late__'))).toBe(false);
  writeFileSync(go, '');
  await peer.next((m) => m.method === 'notifications/tools/list_changed');
  await waitFor(async () => (await names(peer)).includes('late__misbehave'), { what: 'late listed' });
});
