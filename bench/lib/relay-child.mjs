// The upstream a bench relay stands in front of (bench/relay.mjs, bench/rewrite-relay.mjs):
// spawned with its stdin and stdout piped to the relay and its stderr shared; the relay exits
// with it (1 if a signal ended it) and passes SIGTERM and SIGINT on to it. A command that cannot
// be spawned is said on stderr, exit 1.

import { spawn } from 'node:child_process';

/** Spawns `cmd args`, wired as above; `usage` is printed (exit 2) when there is no command. */
export function spawnRelayed([cmd, ...args], usage) {
  if (!cmd) {
    process.stderr.write(`${usage}\n`);
    process.exit(2);
  }
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  child.on('error', (e) => {
    process.stderr.write(`cannot start ${cmd}: ${e.message}\n`);
    process.exit(1);
  });
  // The upstream or the host went away mid-write: the exit below says how it ended.
  child.stdin.on('error', () => {});
  process.stdout.on('error', () => {});
  child.on('exit', (code, signal) => process.exit(signal ? 1 : (code ?? 0)));
  const stop = () => child.kill('SIGTERM');
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  return child;
}
