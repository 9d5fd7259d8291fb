#!/usr/bin/env node
import { main } from '../dist/cli/main.js';

main(process.argv).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`mcpmux: ${err && err.stack ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  },
);
