#!/usr/bin/env node
import module from 'node:module';
import { applyV8Flags } from '../dist/v8-flags.js';

// The young generation kept small and the old one collected sooner: why, in src/v8-flags.ts.
applyV8Flags();

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
