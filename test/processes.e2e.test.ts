// Process hygiene through the real binary: upstreams that ignore stdin EOF and SIGTERM, and
// ones started through `sh -c` with the real server a grandchild, are all gone after mcpmux is
// SIGKILLed (the reaper) or stopped normally (process groups); and crashing upstreams leave no
// zombies behind.

import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { closeAll, isAlive, MUX_BIN, tempFile, waitFor, writeConfig } from './helpers/harness.js';

afterEach(async () => {
  await closeAll();
  await stopAllDaemons();
});

/** A process that writes its pid to `file`, then ignores stdin's end and SIGTERM: only SIGKILL ends it. */
const STUBBORN = (file: string) =>
  `require('fs').writeFileSync(${JSON.stringify(file)}, String(process.pid)); process.on('SIGTERM', () => {}); process.stdin.on('data', () => {}); process.stdin.on('end', () => {}); setInterval(() => {}, 1000);`;

function upstreams() {
  const direct = tempFile('direct.pid');
  const grand = tempFile('grandchild.pid');
  return {
    files: { direct, grand },
    servers: {
      // Never answers initialize, ignores EOF and SIGTERM.
      stubborn: { command: process.execPath, args: ['-e', STUBBORN(direct)] },
      // `sh -c` that stays the parent (the `; true`), the stubborn server its grandchild.
      wrapped: { command: '/bin/sh', args: ['-c', `"${process.execPath}" -e "${STUBBORN(grand).replace(/"/g, '\\"')}"; true`] },
    },
  };
}

const pidIn = (file: string) => waitFor(() => {
  try {
    return Number(readFileSync(file, 'utf8')) || undefined;
  } catch {
    return undefined;
  }
}, { what: `a pid in ${file}`, timeoutMs: 15_000 });

const gone = (pids: number[]) => waitFor(() => pids.every((p) => !isAlive(p)), { what: `processes ${pids.join(', ')} gone`, timeoutMs: 10_000 });

describe('no upstream outlives mcpmux', () => {
  it('mcpmux stdio is SIGKILLed: the stubborn child and the grandchild of sh -c are ended by the reaper', async () => {
    const { files, servers } = upstreams();
    const config = await writeConfig({ mcpServers: servers, timeouts: { startupMs: 60_000, startupWaitMs: 100 } });
    const mux = spawn(process.execPath, [MUX_BIN, 'stdio', '--config', config], { stdio: ['pipe', 'ignore', 'ignore'] });
    const pids = [await pidIn(files.direct), await pidIn(files.grand)];
    expect(pids.every(isAlive)).toBe(true);
    mux.kill('SIGKILL');
    await gone(pids);
  });

  it('mcpmux serve is SIGKILLed: the same', async () => {
    const { files, servers } = upstreams();
    const d = await startDaemon({ mcpServers: servers, timeouts: { startupMs: 60_000, startupWaitMs: 100 } });
    const pids = [await pidIn(files.direct), await pidIn(files.grand)];
    d.child.kill('SIGKILL');
    await gone(pids);
  });

  it('mcpmux serve is stopped normally (SIGTERM): the grandchild of sh -c goes with its group, and the exit is clean', async () => {
    const { files, servers } = upstreams();
    const d = await startDaemon({ mcpServers: servers, timeouts: { startupMs: 60_000, startupWaitMs: 100 } });
    const pids = [await pidIn(files.direct), await pidIn(files.grand)];
    expect((await d.stop(20_000)).code).toBe(0);
    await gone(pids);
  });
});

describe('crashing upstreams', () => {
  it('100 upstreams that crash at once leave no zombie behind', async () => {
    const servers = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`c${i}`, { command: '/bin/sh', args: ['-c', 'exit 1'], restart: { maxRetries: 0, backoffMs: 1 } }]));
    const d = await startDaemon({ mcpServers: servers });
    await waitFor(() => (d.stderr().match(/"msg":"upstream failed to start"/g) ?? []).length >= 100, { what: '100 crashes', timeoutMs: 30_000 });
    const pid = d.child.pid!;
    const children = readdirSync(`/proc/${pid}/task`).flatMap((t) => readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean));
    const zombies = children.filter((c) => {
      try {
        return readFileSync(`/proc/${c}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
      } catch {
        return false;
      }
    });
    expect(zombies).toEqual([]);
    expect((await d.stop()).code).toBe(0);
  }, 60_000);
});
