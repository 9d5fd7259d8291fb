#!/usr/bin/env node
// A no-op stdio relay: the cheapest possible process in the middle. It spawns the given command
// and copies bytes both ways with stream.pipe — no parsing, no framing, no routing. The bench
// runs it in mcpmux's place to show how much of mcpmux's cost is just being an extra process
// (two more pipe crossings and event-loop wake-ups per call) on this machine.
//
//   node bench/relay.mjs node bench/echo-server.mjs

import { spawnRelayed } from './lib/relay-child.mjs';

const child = spawnRelayed(process.argv.slice(2), 'usage: node bench/relay.mjs COMMAND [ARGS...]');
process.stdin.pipe(child.stdin);
child.stdout.pipe(process.stdout);
