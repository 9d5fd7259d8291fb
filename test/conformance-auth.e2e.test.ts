// The official MCP conformance suite (@modelcontextprotocol/conformance, client mode, its auth
// scenarios) against mcpmux's upstream side (issue 14): the suite runs its own authorization
// and MCP servers, and test/fixtures/conformance-auth-client.mjs puts mcpmux between them and a
// host (`mcpmux login`, then `mcpmux stdio`). The suite needs Node 22: test/setup/node22.mjs
// installs one before the tests; on linux-x64 its absence fails these tests, elsewhere they
// are skipped.

import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ROOT } from './helpers/harness.js';
import { node22 } from './helpers/node22.js';
import { AUTH_SCENARIOS, BROWSER_LOGIN_SCENARIOS, SUITE } from './helpers/conformance.js';

const run = promisify(execFile);
const DRIVER = path.join(ROOT, 'test/fixtures/conformance-auth-client.mjs');

describe('conformance suite, auth scenarios, mcpmux as the client', () => {
  it.for(AUTH_SCENARIOS)('auth/%s', async (scenario, ctx) => {
    expect(await scenarioOutput(node22(ctx), scenario)).toMatch(/OVERALL: PASSED/);
  }, 120_000);

  // Issue 22: through `mcpmux stdio` alone, no `mcpmux login` step: mcpmux opens the browser
  // ($BROWSER, headless) itself when the server asks for a login or more scope.
  it.for(BROWSER_LOGIN_SCENARIOS)('auth/%s, the login opening itself in mcpmux stdio', async (scenario, ctx) => {
    expect(await scenarioOutput(node22(ctx), scenario, { MCPMUX_CONFORMANCE_INTERACTIVE: '1' })).toMatch(/OVERALL: PASSED/);
  }, 120_000);
});

/** The suite's report of one scenario run against the driver (the failed checks first, when it failed). */
async function scenarioOutput(node: string, scenario: string, env: Record<string, string> = {}): Promise<string> {
  // The suite reports on both streams; a failed scenario exits non-zero.
  const out = await run(node, [SUITE, 'client', '--command', `${node} ${DRIVER}`, '--scenario', `auth/${scenario}`], {
    env: { ...process.env, MCPMUX_NODE: process.execPath, ...env },
    timeout: 90_000,
    maxBuffer: 16 * 1024 * 1024,
  }).then(
    (r) => r.stdout + r.stderr,
    (err: { stdout?: string; stderr?: string }) => (err.stdout ?? '') + (err.stderr ?? String(err)),
  );
  if (/OVERALL: PASSED/.test(out)) return out;
  return `${out.split('\n').filter((l) => /FAILURE|Failed Checks|Passed:/.test(l)).join('\n')}\n${out}`;
}
