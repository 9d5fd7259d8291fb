// What test/fixtures/grants-as.mjs says about itself (its first JSON line) and what it saw
// (GET /admin/stats): one authorization server, IdP and set of MCP servers for the grant tests.

import path from 'node:path';
import { ROOT } from './harness.js';

export const GRANTS = path.join(ROOT, 'test/fixtures/grants-as.mjs');

/** Its first line: where it listens and who its IdP is. */
export interface GrantsFx {
  url: string;
  idpIssuer: string;
  idpTokenEndpoint: string;
  idpClientId: string;
}

/** GET /admin/stats: discovery GETs, token requests (and what a granted one asked for), what each MCP server was shown. */
export interface GrantsStats {
  discovery: string[];
  tokens: Array<{ kind: string; ok: boolean; error?: string; sub?: string; name?: string; audience?: string; resource?: string; scope?: string }>;
  mcp: Array<{ server: string; authorization: string | null; verdict: string; sub?: string }>;
}
