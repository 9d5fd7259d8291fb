// A host's wait counts from when the host began waiting (issue 23, target 5): `mcpmux stdio`
// starts its router with its own age, and the router takes that off timeouts.startupWaitMs.
// The real Router, a real config, a real upstream child that answers initialize only when the
// test creates a file (never, here): nothing depends on how fast this machine is.

import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterEach, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { createLogger } from '../src/observe/logger.js';
import { Router } from '../src/router/router.js';
import type { SessionPort } from '../src/router/session-port.js';
import { ROOT, tempFile, writeConfig } from './helpers/harness.js';

const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');

let router: Router | undefined;
afterEach(async () => {
  await router?.close();
  router = undefined;
});

/** A host session as the router sees one: it asks nothing of the host here. */
const host: SessionPort = {
  id: 'h1',
  client: 'test',
  transport: 'stdio',
  protocolVersion: '2025-06-18',
  clientCapabilities: {},
  logLevel: undefined,
  notify: () => {},
  request: () => Promise.reject(new Error('not asked')),
};

async function routerWithLateUpstream(startupWaitMs: number): Promise<Router> {
  // "late" answers initialize once this file exists; no test creates it.
  const never = tempFile('never-created');
  const file = await writeConfig({
    mcpServers: { late: { command: process.execPath, args: [BAD, JSON.stringify({ initWhenFile: never })], restart: { maxRetries: 0, backoffMs: 10 } } },
    timeouts: { startupMs: 120_000, startupWaitMs },
  });
  return new Router(await loadConfig(file), createLogger('silent'));
}

it('a host that has already waited the whole startupWaitMs is answered at once, the upstream still starting', async () => {
  // Were the minute not taken off, greet would outlast the test's timeout.
  router = await routerWithLateUpstream(60_000);
  router.start(60_000);
  const { capabilities } = await router.greet(host);
  expect(router.status().upstreams.find((u) => u.name === 'late')?.state).toBe('starting');
  // Offered up front: the late upstream's tools come with list_changed.
  expect(capabilities).toMatchObject({ tools: { listChanged: true } });
}, 20_000);

it('a host that has waited part of it waits the rest, never less (a lower bound: load only lengthens it)', async () => {
  router = await routerWithLateUpstream(1_500);
  const t0 = performance.now();
  router.start(900);
  await router.greet(host);
  // 600 ms left of the wait, less the time between t0 and the timer's start (under 1 ms here).
  expect(performance.now() - t0).toBeGreaterThanOrEqual(590);
  expect(router.status().upstreams.find((u) => u.name === 'late')?.state).toBe('starting');
});

it('with nothing waited (serve), the whole startupWaitMs', async () => {
  router = await routerWithLateUpstream(1_000);
  const t0 = performance.now();
  router.start();
  await router.greet(host);
  expect(performance.now() - t0).toBeGreaterThanOrEqual(990);
});
