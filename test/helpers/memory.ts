// The memory of an mcpmux under test, measured after full garbage collections: a test compares
// what mcpmux holds, not what V8 has not collected yet (it collects when its own heuristics
// say, seconds after a burst). The process must be started with GC_ENV.

import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { ROOT, waitFor } from './harness.js';

/** Preloads test/fixtures/gc-on-signal.cjs: full collections on SIGWINCH, then a "forced gc" line. */
export const GC_ENV = { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${JSON.stringify(path.join(ROOT, 'test/fixtures/gc-on-signal.cjs'))}` };

export const MB = 1024 * 1024;

/** Collects garbage in `child` (started with GC_ENV), then its resident set size in bytes. */
export async function rssAfterGc(child: ChildProcess, stderr: () => string): Promise<number> {
  const from = stderr().length;
  child.kill('SIGWINCH');
  const rss = await waitFor(() => /"msg":"forced gc","heapUsed":\d+,"rss":(\d+)/.exec(stderr().slice(from))?.[1], {
    what: 'the memory after a forced GC',
    timeoutMs: 30_000,
  });
  return Number(rss);
}
