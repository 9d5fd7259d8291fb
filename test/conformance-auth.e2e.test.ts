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

const run = promisify(execFile);
const SUITE = path.join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const DRIVER = path.join(ROOT, 'test/fixtures/conformance-auth-client.mjs');

/** The suite's auth scenarios: every one of them (`npx @modelcontextprotocol/conformance list`). */
const PASSING = [
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
  'client-credentials-basic',
  'client-credentials-jwt',
  'scope-step-up',
  'scope-retry-limit',
  'basic-cimd',
  'cross-app-access-complete-flow',
];

describe('conformance suite, auth scenarios, mcpmux as the client', () => {
  it.for(PASSING)('auth/%s', async (scenario, ctx) => {
    const node = node22(ctx);
    // The suite reports on both streams; a failed scenario exits non-zero.
    const out = await run(node, [SUITE, 'client', '--command', `${node} ${DRIVER}`, '--scenario', `auth/${scenario}`], {
      env: { ...process.env, MCPMUX_NODE: process.execPath },
      timeout: 90_000,
      maxBuffer: 16 * 1024 * 1024,
    }).then(
      (r) => r.stdout + r.stderr,
      (err: { stdout?: string; stderr?: string }) => (err.stdout ?? '') + (err.stderr ?? String(err)),
    );
    expect(out, out.split('\n').filter((l) => /FAILURE|Failed Checks|Passed:/.test(l)).join('\n')).toMatch(/OVERALL: PASSED/);
  }, 120_000);
});
