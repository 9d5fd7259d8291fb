// `mcpmux stdio` spawns its stdio upstreams before it loads its runtime, and the upstream layer
// adopts them (issue 23, start-up): the adopted child is the one that serves, with the same
// environment a normal spawn gives and its stderr relayed; a restart spawns a new one; and on
// every way out, the children spawned early are gone. That the spawn came before the load is a
// matter of timing (not asserted here); docs/performance.md measures it.

import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Config, StdioServerConfig } from '../src/config/types.js';
import { releaseGroup, signalGroup } from '../src/upstream/reaper.js';
import { PrestartedChildren } from '../src/upstream/prestart.js';
import { closeAll, isAlive, MUX_BIN, processesMentioning, ROOT, runMux, startRawMux, tempFile, waitFor, writeConfig } from './helpers/harness.js';

const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');
const bad = (opts: object, extra: object = {}) => ({ command: process.execPath, args: [BAD, JSON.stringify(opts)], ...extra });

const cleanups: (() => void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) c();
  await closeAll();
});

/** The pids a fixture with `pidFile` wrote, once there are `n`. */
const pidsIn = (file: string, n: number) =>
  waitFor(() => {
    const pids = existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number) : [];
    return pids.length >= n ? pids : undefined;
  }, { what: `${n} pid(s) in ${file}` });


const logLines = (stderr: string): Record<string, any>[] =>
  stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));

describe('mcpmux stdio adopts the upstreams it spawned before loading', () => {
  it('the adopted child serves, with the environment a normal spawn gives and its stderr relayed; a restart spawns a new one', async () => {
    const pidFile = tempFile('pids');
    const config = await writeConfig({
      mcpServers: { early: bad({ pidFile, say: 'early child says hello' }, { env: { OWN_SETTING: 'mine' }, restart: { maxRetries: 5, backoffMs: 10 } }) },
    });
    const peer = startRawMux(config, { env: { MCPMUX_TEST_SECRET: 'not-for-children' } });
    await peer.initialize();
    const envOf = async (): Promise<Record<string, string>> =>
      JSON.parse((await peer.request('tools/call', { name: 'early__misbehave', arguments: { mode: 'env' } })).result.content[0].text);

    const [first] = await pidsIn(pidFile, 1);
    const adopted = await envOf();
    expect(adopted.OWN_SETTING).toBe('mine');
    expect(adopted.MCPMUX_TEST_SECRET).toBeUndefined();
    expect(adopted.MCPMUX_PARENT_CONFIGS).toMatch(/\.json$/);
    const spawned = () => logLines(peer.stderr()).filter((l) => l.msg === 'spawned upstream');
    expect(spawned()).toEqual([expect.objectContaining({ server: 'early', childPid: first, prestarted: true })]);
    // Written before mcpmux read the child's stderr at all: kept, and relayed once adopted.
    await waitFor(() => logLines(peer.stderr()).some((l) => l.server === 'early' && l.stderr === 'early child says hello'), { what: "the early child's stderr relayed" });

    // Lost: the restart spawns a new child the normal way (execa), with the same environment.
    process.kill(first!, 'SIGKILL');
    const [, second] = await pidsIn(pidFile, 2);
    await waitFor(() => logLines(peer.stderr()).filter((l) => l.msg === 'upstream ready' && l.server === 'early').length === 2, { what: 'early ready again' });
    expect(second).not.toBe(first);
    expect(spawned()[1]).toMatchObject({ server: 'early', childPid: second });
    expect(spawned()[1]!.prestarted).toBeUndefined();
    expect(await envOf()).toEqual(adopted);
    await peer.close(20_000);
    expect(isAlive(second!)).toBe(false);
  });

  it('a child that dies before mcpmux has loaded still has its last words relayed, before the failure is told', async () => {
    // sh is gone within milliseconds; mcpmux loads for far longer before it adopts the child.
    const config = await writeConfig({ mcpServers: { crash: { command: '/bin/sh', args: ['-c', 'echo "dying words" >&2; exit 3'], restart: { maxRetries: 0 } } } });
    const peer = startRawMux(config);
    await peer.initialize();
    const lines = await waitFor(() => {
      const l = logLines(peer.stderr()).filter((j) => j.server === 'crash');
      return l.some((j) => j.msg === 'upstream failed to start') ? l : undefined;
    }, { what: 'crash failed' });
    expect(lines[0]).toMatchObject({ msg: 'spawned upstream', prestarted: true });
    const said = lines.findIndex((j) => j.stderr === 'dying words');
    expect(said, 'its stderr relayed').toBeGreaterThan(0);
    expect(said).toBeLessThan(lines.findIndex((j) => j.msg === 'upstream failed to start'));
    expect(lines.find((j) => j.msg === 'upstream failed to start')).toMatchObject({ how: 'exited with code 3' });
  });

  it('a command not found, spawned early: the reason a normal start gives, said once, not retried', async () => {
    const config = await writeConfig({ mcpServers: { missing: { command: 'no-such-mcp-server-here', args: [] } } });
    const peer = startRawMux(config);
    await peer.initialize();
    const gaveUp = await waitFor(() => logLines(peer.stderr()).find((j) => j.server === 'missing' && j.msg?.startsWith('upstream cannot start, not retried')), { what: 'missing given up' });
    expect(gaveUp.reason).toMatch(/^command not found: no-such-mcp-server-here \(not on PATH=/);
    expect(logLines(peer.stderr()).filter((j) => j.server === 'missing' && j.msg === 'spawned upstream')).toEqual([expect.objectContaining({ prestarted: true })]);
  });

  it('cannot start (the admin port is in use): exits 1 with no child left; an unknown --toolset spawns nothing', async () => {
    const busy: Server = createServer();
    cleanups.push(() => busy.close());
    const port = await new Promise<number>((resolve) => busy.listen(0, '127.0.0.1', () => resolve((busy.address() as { port: number }).port)));
    const pidFile = tempFile('pids');
    const config = await writeConfig({ mcpServers: { early: bad({ pidFile }) } });
    // Were a child spawned early left running, its pipes would keep mcpmux from exiting at all.
    const r = await runMux(['stdio', '--config', config, '--admin-port', String(port)], { timeoutMs: 30_000 });
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toContain('cannot listen on the admin port');
    // The child may have been stopped before it ran far enough to write its pid: none is left either way.
    expect(processesMentioning(pidFile)).toEqual([]);
    if (existsSync(pidFile)) expect(readFileSync(pidFile, 'utf8').split('\n').filter(Boolean).map(Number).filter(isAlive)).toEqual([]);

    const unused = tempFile('pids');
    const r2 = await runMux(['stdio', '--config', await writeConfig({ mcpServers: { early: bad({ pidFile: unused }) } }), '--toolset', 'nope'], { timeoutMs: 30_000 });
    expect(r2.status, r2.stderr).toBe(1);
    expect(r2.stderr).toContain('--toolset');
    // Checked before anything is spawned.
    expect(processesMentioning(unused)).toEqual([]);
    expect(existsSync(unused), 'spawned for an unknown toolset').toBe(false);
  });

  it('SIGKILLed as soon as its upstream runs: the reaper ends the child', async () => {
    const pidFile = tempFile('pids');
    const config = await writeConfig({ mcpServers: { early: bad({ pidFile, ignoreEof: true }) } });
    const mux = spawn(process.execPath, [MUX_BIN, 'stdio', '--config', config], { stdio: ['pipe', 'ignore', 'ignore'] });
    cleanups.push(() => mux.kill('SIGKILL'));
    const [pid] = await pidsIn(pidFile, 1);
    mux.kill('SIGKILL');
    await waitFor(() => !isAlive(pid!), { what: `child ${pid} gone` });
  });
});

describe('PrestartedChildren', () => {
  const KEEP = 'setInterval(() => {}, 1000)';
  const server = (name: string, marker: string, extra: Partial<StdioServerConfig> = {}): StdioServerConfig =>
    ({ name, transport: 'stdio', command: process.execPath, args: ['-e', `${KEEP} // ${marker}`], env: {}, inheritEnv: false, cwd: undefined, disabled: false, sharing: 'shared', ...extra }) as StdioServerConfig;

  it('spawns the enabled shared stdio servers up to its limit; each is taken once, only for the same spawn; the rest are stopped', async () => {
    const marker = `prestart-${process.pid}-${Date.now()}`;
    const m = (s: string) => `${marker}-${s}`;
    const servers = [
      server('off', m('off'), { disabled: true }),
      server('mine', m('mine'), { sharing: 'session' }),
      server('a', m('a')),
      server('b', m('b')),
      server('c', m('c')),
      server('d', m('d')),
    ];
    const pre = PrestartedChildren.start({ servers } as unknown as Config, 3);
    expect(pre.size).toBe(3);
    expect(processesMentioning(m('off'))).toEqual([]);
    expect(processesMentioning(m('mine'))).toEqual([]);
    expect(processesMentioning(m('d')), 'started past the limit').toEqual([]);

    const a = pre.take(servers[2]!);
    expect(a?.proc.pid).toBeGreaterThan(0);
    cleanups.push(() => {
      signalGroup(a!.pgid!, 'SIGKILL');
      releaseGroup(a!.pgid!);
    });
    expect(processesMentioning(m('a'))).toEqual([a!.proc.pid]);
    expect(pre.take(servers[2]!), 'taken twice').toBeUndefined();

    // The config changed how b starts: not adopted, and the early b is stopped.
    expect(pre.take({ ...servers[3]!, env: { OTHER: '1' } })).toBeUndefined();
    await waitFor(() => processesMentioning(m('b')).length === 0, { what: 'the early b stopped' });

    expect(processesMentioning(m('c'))).toHaveLength(1);
    await pre.stopUntaken();
    expect(processesMentioning(m('c'))).toEqual([]);
    expect(pre.take(servers[4]!)).toBeUndefined();
    expect(pre.take(servers[5]!)).toBeUndefined();
  });
});
