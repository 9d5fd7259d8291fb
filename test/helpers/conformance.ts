// The official conformance suite (@modelcontextprotocol/conformance, client mode) as the tests
// run it: where it is, and its auth scenarios (`npx @modelcontextprotocol/conformance list`).

import path from 'node:path';
import { ROOT } from './harness.js';

export const SUITE = path.join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');

/** Every auth scenario of the suite; each passes through mcpmux. */
export const AUTH_SCENARIOS = [
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

/** The scenarios a person logs in to (authorization code); the others' grants need no person. */
export const BROWSER_LOGIN_SCENARIOS = AUTH_SCENARIOS.filter((s) => !s.startsWith('client-credentials-') && !s.startsWith('cross-app-access'));
