#!/usr/bin/env node
import module from 'node:module';
import { setFlagsFromString } from 'node:v8';

// Keep V8's young generation at its initial size (1 MB semi-spaces). Left alone, one burst of
// allocation (start-up, a large tools/list) grows it to 2 x 16 MB, which stays committed while
// the daemon idles: measured ~6 MB of peak RSS with 20 upstreams x 100 tools, ~20 MB under
// call load. --max-semi-space-size only works on the command line (the heap is already set up
// by now); the growth factor is read at each growth, so here it takes effect.
setFlagsFromString('--semi-space-growth-factor=1');

// Let the old generation grow by at most 2x its live size between full collections. V8 picks
// up to 4x on a machine with a large heap limit, and a daemon's live heap is small (~18 MB with
// 2 000 tools): the garbage of start-up and of a burst of lists (parsed pages, read buffers,
// pages replaced) then waited for a collection that never came, and was the peak RSS (issue 23:
// 20 x 100 tools listed, ~4 MB of VmHWM). Read at every full collection, so it takes effect here.
setFlagsFromString('--heap-growing-percent=100');

// Node 22.1+ keeps the compiled code of the modules loaded below on disk (in the system's
// temporary folder, or $NODE_COMPILE_CACHE), so the next start skips most parsing and
// compiling: a host waits for mcpmux's first answer. Node 20 has no such cache (a no-op there).
module.enableCompileCache?.();

const { main } = await import('../dist/cli/main.js');

main(process.argv).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`mcpmux: ${err && err.stack ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  },
);
