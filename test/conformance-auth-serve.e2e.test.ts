// The official conformance suite's authorization_code auth scenarios (client mode) through
// `mcpmux serve` with per-client logins (issue 22): test/fixtures/conformance-auth-serve.mjs
// makes the suite's server a `perClient` upstream, logs in for the token client `ci`
// (`mcpmux login s --client ci`, headless browser), starts the daemon and calls the server as
// an HTTP host with ci's token. The grants that need no person (client-credentials-*,
// cross-app-access) have no per-client login: test/conformance-auth.e2e.test.ts runs them.
// Scenarios run a few at a time (each is mostly waiting on processes); the suite needs Node 22
// (test/helpers/node22.ts).

import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ROOT } from './helpers/harness.js';
import { node22 } from './helpers/node22.js';

const run = promisify(execFile);
const SUITE = path.join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const DRIVER = path.join(ROOT, 'test/fixtures/conformance-auth-serve.mjs');

/** The suite's auth scenarios where a person logs in (authorization_code): per client under serve. */
const SCENARIOS = [
  'metadata-default',
  'metadata-var1',
  'metadata-var2',
  'metadata-var3',
  'scope-from-www-authenticate',
  'scope-from-scopes-supported',
  'scope-omitted-when-undefined',
  'token-endpoint-auth-basic',
  'token-endpoint-auth-post',
  'token-endpoint-auth-none',
  'pre-registration',
  '2025-03-26-oauth-metadata-backcompat',
  '2025-03-26-oauth-endpoint-fallback',
  'resource-mismatch',
  'offline-access-scope',
  'offline-access-not-supported',
  'scope-step-up',
  'scope-retry-limit',
  'basic-cimd',
];

/** Scenarios running at once: each starts five processes (suite, driver, login, browser, daemon). */
const AT_ONCE = 3;
let running = 0;
const queue: Array<() => void> = [];
async function slot<T>(work: () => Promise<T>): Promise<T> {
  if (running >= AT_ONCE) await new Promise<void>((resolve) => queue.push(resolve));
  running++;
  try {
    return await work();
  } finally {
    running--;
    queue.shift()?.();
  }
}

describe.concurrent('conformance suite, auth scenarios, through mcpmux serve with per-client logins', () => {
  it.for(SCENARIOS)('auth/%s', async (scenario, ctx) => {
    const node = node22(ctx);
    // The suite reports on both streams; a failed scenario exits non-zero. The driver stops its daemon itself.
    // The suite gives its client 30 s by default: a loaded machine needs more for login + daemon.
    const out = await slot(() => run(node, [SUITE, 'client', '--command', `${node} ${DRIVER}`, '--scenario', `auth/${scenario}`, '--timeout', '80000'], {
      env: { ...process.env, MCPMUX_NODE: process.execPath },
      timeout: 100_000,
      maxBuffer: 16 * 1024 * 1024,
      killSignal: 'SIGKILL',
    }).then(
      (r) => r.stdout + r.stderr,
      (err: { stdout?: string; stderr?: string }) => (err.stdout ?? '') + (err.stderr ?? String(err)),
    ));
    expect(out, out.split('\n').filter((l) => /FAILURE|Failed Checks|Passed:|conformance-auth-serve:/.test(l)).join('\n')).toMatch(/OVERALL: PASSED/);
  }, 300_000);
});
