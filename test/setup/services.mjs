#!/usr/bin/env node
// Installs the real services the scale-out tests run (Debian's redis-server and haproxy), and
// the browser the web console's test drives (Debian's chromium, through playwright-core), when
// they are missing: `npm test` runs this after setup:node22, and `npm run setup:services` runs
// it alone. The tests start and stop their own servers (and browser) on loopback ports; nothing
// here starts one. apt needs root (or sudo); on a machine without apt the packages must be installed by
// hand, and the tests that need them fail saying which binary is missing.
//
// It never fails the run itself: every other test still runs.

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const NEEDED = [
  { bin: '/usr/bin/redis-server', pkg: 'redis-server' },
  { bin: '/usr/sbin/haproxy', pkg: 'haproxy' },
  { bin: '/usr/bin/chromium', pkg: 'chromium' },
];

const missing = NEEDED.filter((n) => !existsSync(n.bin)).map((n) => n.pkg);
if (missing.length === 0) process.exit(0);

const root = process.getuid?.() === 0;
const sudo = root ? [] : ['sudo', '-n'];
const apt = (args) => {
  const [cmd, ...rest] = [...sudo, 'apt-get', ...args];
  return spawnSync(cmd, rest, { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }).status === 0;
};
const install = () => apt(['install', '-y', '--no-install-recommends', ...missing]);
process.stderr.write(`setup:services: installing ${missing.join(', ')} (apt)\n`);
// A fresh machine's package lists may be stale: update once, and only if the first try fails.
if (!install() && !(apt(['update']) && install())) {
  process.stderr.write(`setup:services: could not install ${missing.join(', ')}; the scale-out and console tests will fail until they are installed (apt-get install ${missing.join(' ')})\n`);
}
