// The official conformance suite's authorization_code auth scenarios (client mode) through
// `mcpmux serve` with per-client logins (issue 22): test/fixtures/conformance-auth-serve.mjs
// makes the suite's server a `perClient` upstream, logs in for the token client `ci`
// (`mcpmux login s --client ci`, headless browser), starts the daemon and calls the server as
// an HTTP host with ci's token. The grants that need no person (client-credentials-*,
// cross-app-access) have no per-client login: test/conformance-auth.e2e.test.ts runs them.
// Scenarios run three at a time, each suite in a process group killed at its end (no daemon
// outlives its scenario); the suite needs Node 22
// (test/helpers/node22.ts).

import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from './helpers/harness.js';
import { node22 } from './helpers/node22.js';
import { BROWSER_LOGIN_SCENARIOS, SUITE } from './helpers/conformance.js';

/**
 * Runs the suite in a process group of its own and, when it is done or past `ms`, kills that
 * whole group: the driver and the daemon it started die with it even if the suite was killed
 * half-way (a killed parent leaves its children running). Resolves with both streams.
 */
function run(node: string, args: string[], ms: number): Promise<string> {
  return new Promise((resolve) => {
    const child = spawn(node, args, { env: { ...process.env, MCPMUX_NODE: process.execPath }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (out += c));
    const killGroup = (): void => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // The group is gone already.
      }
    };
    const timer = setTimeout(() => ((out += `\n(killed after ${ms} ms)\n`), killGroup()), ms);
    child.once('close', () => {
      clearTimeout(timer);
      killGroup();
      resolve(out);
    });
  });
}
const DRIVER = path.join(ROOT, 'test/fixtures/conformance-auth-serve.mjs');

/** Scenarios running at once: each starts five processes (suite, driver, login, browser, daemon). */
const AT_ONCE = 3;
let running = 0;
const queue: Array<() => void> = [];
async function slot<T>(work: () => Promise<T>): Promise<T> {
  // A slot that frees passes straight to the next in line (no newcomer slips in between).
  if (running < AT_ONCE) running++;
  else await new Promise<void>((resolve) => queue.push(resolve));
  try {
    return await work();
  } finally {
    const next = queue.shift();
    if (next) next();
    else running--;
  }
}

describe.concurrent('conformance suite, auth scenarios, through mcpmux serve with per-client logins', () => {
  it.for(BROWSER_LOGIN_SCENARIOS)('auth/%s', async (scenario, ctx) => {
    const node = node22(ctx);
    // The suite reports on both streams; a failed scenario exits non-zero. The driver stops its daemon itself.
    // The suite gives its client 30 s by default: a loaded machine needs more for login + daemon.
    const out = await slot(() => run(node, [SUITE, 'client', '--command', `${node} ${DRIVER}`, '--scenario', `auth/${scenario}`, '--timeout', '80000'], 150_000));
    expect(out, out.split('\n').filter((l) => /FAILURE|Failed Checks|Passed:|conformance-auth-serve:/.test(l)).join('\n')).toMatch(/OVERALL: PASSED/);
  }, 300_000);
});
