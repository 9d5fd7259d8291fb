// The V8 flags `bin/mcpmux.js` sets before it loads the rest of mcpmux, and why. They live here,
// not in bin/, because compiled code mcpmux keeps on disk is named for them: V8 refuses code it
// cached under other flags (config/kept-validator.ts), so a test run (no flags) and the binary
// each keep their own instead of rewriting each other's at every start.

import { setFlagsFromString } from 'node:v8';

const FLAGS = [
  // Keep V8's young generation at its initial size (1 MB semi-spaces). Left alone, one burst of
  // allocation (start-up, a large tools/list) grows it to 2 x 16 MB, which stays committed while
  // the daemon idles: measured ~6 MB of peak RSS with 20 upstreams x 100 tools, ~20 MB under
  // call load. --max-semi-space-size only works on the command line (the heap is already set up
  // by then); the growth factor is read at each growth, so set here it takes effect.
  '--semi-space-growth-factor=1',
  // Let the old generation grow by at most 2x its live size between full collections. V8 picks
  // up to 4x on a machine with a large heap limit, and a daemon's live heap is small (~18 MB with
  // 2 000 tools): the garbage of start-up and of a burst of lists (parsed pages, read buffers,
  // pages replaced) then waited for a collection that never came, and was the peak RSS (issue 23:
  // 20 x 100 tools listed, ~4 MB of VmHWM). Read at every full collection, so it takes effect here.
  '--heap-growing-percent=100',
] as const;

let applied: readonly string[] = [];

/** Sets mcpmux's V8 flags; bin/mcpmux.js calls it before importing anything else of mcpmux. */
export function applyV8Flags(): void {
  for (const flag of FLAGS) setFlagsFromString(flag);
  applied = FLAGS;
}

/**
 * What decides, besides the source, whether V8 accepts code it compiled earlier: Node's version
 * and platform, and the flags (the command line's, NODE_OPTIONS', and those set above).
 */
export function v8Flavor(): string {
  return [process.version, process.arch, process.platform, ...process.execArgv, process.env.NODE_OPTIONS ?? '', ...applied].join('\0');
}
