#!/usr/bin/env node
// A no-op stdio relay: the cheapest possible process in the middle. It spawns the given command
// and copies bytes both ways with stream.pipe — no parsing, no framing, no routing. The bench
// runs it in mcpmux's place to show how much of mcpmux's cost is just being an extra process
// (two more pipe crossings and event-loop wake-ups per call) on this machine.
//
//   node bench/relay.mjs node bench/echo-server.mjs

import { spawn } from 'node:child_process';

const [cmd, ...args] = process.argv.slice(2);
if (!cmd) {
  process.stderr.write('usage: node bench/relay.mjs COMMAND [ARGS...]\n');
  process.exit(2);
}
const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });
process.stdin.pipe(child.stdin);
child.stdout.pipe(process.stdout);
child.stdin.on('error', () => {});
process.stdout.on('error', () => {});
child.on('exit', (code, signal) => process.exit(signal ? 1 : (code ?? 0)));
const stop = () => child.kill('SIGTERM');
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
