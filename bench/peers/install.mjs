// The peers are not dependencies of mcpmux: they are installed on demand, at pinned versions,
// into .cache/peers (gitignored), with their own package.json so that npm never touches the
// project's node_modules. A peer that cannot be installed is reported "not available" and the
// run goes on without it.

import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Pinned versions: change them here (and the README's table says which ran). */
export const PINNED = {
  supergateway: '4.0.0',
  'mcp-proxy': '6.7.19',
  'mcp-hub': '4.2.1',
};

export function peersDir(root) {
  return join(root, '.cache', 'peers');
}

/** The installed version of `pkg` under dir, or undefined. */
export function installedVersion(dir, pkg) {
  try {
    return JSON.parse(readFileSync(join(dir, 'node_modules', pkg, 'package.json'), 'utf8')).version;
  } catch {
    return undefined;
  }
}

/**
 * Makes sure each wanted peer is installed at its pinned version. Returns
 * {pkg: {version} | {error}}. With install false, only reports what is there.
 */
export async function ensurePeers(root, wanted, { install = true, log = () => {} } = {}) {
  const dir = peersDir(root);
  const out = {};
  const missing = wanted.filter((p) => installedVersion(dir, p) !== PINNED[p]);
  if (missing.length && install) {
    mkdirSync(dir, { recursive: true });
    const pj = join(dir, 'package.json');
    if (!existsSync(pj)) writeFileSync(pj, JSON.stringify({ name: 'mcpmux-bench-peers', private: true, description: 'peers for bench/peers.mjs; not a dependency of mcpmux' }, null, 2) + '\n');
    const specs = missing.map((p) => `${p}@${PINNED[p]}`);
    log(`installing ${specs.join(' ')} into ${dir}`);
    // --ignore-scripts: nothing of theirs runs at install time (none needs a build step).
    const err = await new Promise((resolve) =>
      execFile('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', '--ignore-scripts', '--save-exact', ...specs], { cwd: dir, timeout: 10 * 60_000, maxBuffer: 16 << 20 }, (e, _so, se) =>
        resolve(e ? `npm install failed: ${(se || e.message).trim().split('\n').slice(-3).join(' ')}` : undefined),
      ),
    );
    if (err) log(err);
    for (const p of missing) if (installedVersion(dir, p) !== PINNED[p]) out[p] = { error: err ?? `not installed at ${PINNED[p]}` };
  }
  for (const p of wanted) {
    if (out[p]) continue;
    const v = installedVersion(dir, p);
    out[p] = v === PINNED[p] ? { version: v } : { error: v ? `installed ${v}, pinned ${PINNED[p]} (run without --no-install)` : 'not installed (run without --no-install)' };
  }
  return out;
}
