// The MCP inspector needs Node >= 22.19 and the conformance suite Node 22; the project runs on
// Node 20. test/setup/node22.mjs installs one into .cache/node22 before the tests (`npm test`
// runs it); this only looks for it, and never installs anything while tests run.

import { existsSync } from 'node:fs';
import path from 'node:path';
import type { TestContext } from 'vitest';
import { lastError, newEnough, NODE22_BIN, NODE22_PLATFORM } from '../setup/node22.mjs';
import { ROOT } from './harness.js';

/** Where the Node for the inspector is, or why there is none and whether that fails the tests. */
export type Node22 = { node: string } | { missing: string; required: boolean };

export function findNode22(): Node22 {
  if (newEnough()) return { node: process.execPath };
  if (existsSync(NODE22_BIN)) return { node: NODE22_BIN };
  const here = `${process.platform}-${process.arch}`;
  if (here !== NODE22_PLATFORM) {
    // Nothing to install it from here: a skip, and the reason with it.
    return { missing: `needs Node >= 22.19, and the registry has no package of it for ${here} (only ${NODE22_PLATFORM}); run the tests under Node 22 to include these`, required: false };
  }
  // On linux-x64 these tests must run: a missing Node is a failure, not a skip.
  const why = lastError();
  return {
    missing: why ? `installing Node 22 failed: ${why}` : 'Node 22 is not installed in .cache/node22: run `npm run setup:node22` (`npm test` does)',
    required: true,
  };
}

const found = findNode22();

/** The Node 22 to run the inspector or the suite with; skips the test (saying why) or fails it when there is none. */
export function node22(ctx: TestContext): string {
  if ('node' in found) return found.node;
  if (!found.required) ctx.skip(found.missing);
  throw new Error(found.missing);
}

/** Whether a Node 22 was found (to skip expensive setup when it was not). */
export const haveNode22 = 'node' in found;

export const INSPECTOR = path.join(ROOT, 'node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js');
