// Where a single-purpose bench script leaves its run (bench/interleaved.mjs,
// bench/throughput-floor.mjs): the table on stdout, and DIR/NAME-latest.md and .json.

import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The checkout's short commit, or `unknown` (not a git checkout). */
export function shortCommit(root) {
  try {
    return execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

/** Prints `md` (first: an unwritable DIR still leaves the table), then writes it and `raw` (dated) to DIR/NAME-latest.{md,json}. */
export function saveLatest(dir, name, md, raw) {
  console.log(md);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${name}-latest.md`), md + '\n');
  writeFileSync(join(dir, `${name}-latest.json`), JSON.stringify({ date: new Date().toISOString(), ...raw }, null, 2));
}
