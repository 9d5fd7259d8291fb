// Restarting an upstream while it is still starting (issue 18, item 2): whatever asks for the
// restart (`POST /status/restart`, `mcpmux restart`), one upstream has at most one live child,
// and the start it replaced neither lingers nor schedules a run of its own.

import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { isAlive, ROOT, tempFile, waitFor } from './helpers/harness.js';

afterAll(stopAllDaemons);

const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');
const status = async (d: Daemon) => (await fetch(`${d.base}/status`)).json() as Promise<any>;
const upstream = async (d: Daemon, name: string) => (await status(d)).upstreams.find((u: any) => u.name === name);
// The operator header: what `mcpmux restart` sends (no tokens here, so no bearer header).
const restart = (d: Daemon, name: string) => fetch(`${d.base}/status/restart?server=${name}`, { method: 'POST', headers: { 'x-mcpmux-operator': '1' } });
/** Every child the fixture says was spawned (it appends its pid on start). */
const spawned = (file: string): number[] => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number) : []);

/**
 * A daemon whose only upstream answers initialize only once the test lets it (the `hold` file
 * is gone): every restart below lands in a handshake. A retry would come after ~20 ms.
 */
async function slowStarter(): Promise<{ d: Daemon; pids: string; hold: string }> {
  const pids = tempFile('pids');
  const hold = tempFile('hold');
  writeFileSync(hold, '');
  const d = await startDaemon({
    mcpServers: { slow: { command: process.execPath, args: [BAD, JSON.stringify({ holdInitWhile: hold, pidFile: pids })], restart: { maxRetries: 5, backoffMs: 20 } } },
    timeouts: { startupMs: 60_000, startupWaitMs: 1000 },
  });
  // Its first child is up and mcpmux is waiting for its initialize answer.
  await waitFor(async () => spawned(pids).length === 1 && (await upstream(d, 'slow'))?.state === 'starting', { what: 'the first start under way', timeoutMs: 15_000 });
  return { d, pids, hold };
}

/**
 * Once the restart's child is spawned, the handshakes may end; once the upstream is ready:
 * exactly one of its children lives, and /status names that one.
 */
async function oneLiveChild(d: Daemon, pids: string, hold: string): Promise<number[]> {
  await waitFor(() => spawned(pids).length >= 2, { what: "the restart's child spawned", timeoutMs: 15_000 });
  rmSync(hold);
  const up = await waitFor(async () => {
    const u = await upstream(d, 'slow');
    return u?.state === 'ready' && u;
  }, { what: 'slow ready after the restart', timeoutMs: 30_000 });
  const all = spawned(pids);
  const alive = all.filter(isAlive);
  expect(alive, `spawned ${JSON.stringify(all)}`).toEqual([up.pid]);
  return all;
}

describe('restart during startup', () => {
  it('a restart while the upstream is in its handshake leaves one child, and the replaced start schedules no run of its own', async () => {
    const { d, pids, hold } = await slowStarter();
    expect((await restart(d, 'slow')).status).toBe(202);
    const all = await oneLiveChild(d, pids, hold);
    // The first child and the restart's: no third one from the replaced start's failure.
    expect(all).toHaveLength(2);
    expect((await upstream(d, 'slow')).restarts).toBe(1);
    expect(d.stderr()).not.toMatch(/"msg":"restarting upstream"/);
    await d.stop();
  }, 60_000);

  it('two restarts in a row during the handshake still leave one child', async () => {
    const { d, pids, hold } = await slowStarter();
    const [a, b] = await Promise.all([restart(d, 'slow'), restart(d, 'slow')]);
    expect([a.status, b.status]).toEqual([202, 202]);
    const all = await oneLiveChild(d, pids, hold);
    expect(all.length).toBeLessThanOrEqual(3);
    await d.stop();
  }, 60_000);
});
