// Starts `mcpmux serve` for end-to-end tests and keeps track of it, so every daemon a test file
// starts is stopped after it (SIGTERM, then SIGKILL past a bound).

import { spawn, type ChildProcess } from 'node:child_process';
import { awaitJsonLine, exitWithin, MUX_BIN, writeConfig } from './harness.js';

export interface Daemon {
  child: ChildProcess;
  port: number;
  base: string;
  url: string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, then SIGKILL if it has not exited within `timeoutMs`. */
  stop(timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const daemons = new Set<Daemon>();

/** Spawns `mcpmux serve --port 0` and resolves once it logged its "listening" line. */
export async function startDaemon(config: object | string, env: Record<string, string> = {}, port = 0): Promise<Daemon> {
  const file = typeof config === 'string' ? config : await writeConfig(config);
  const child = spawn(process.execPath, [MUX_BIN, 'serve', '--config', file, '--port', String(port)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const bound = await awaitJsonLine(child.stderr!, exited, (j) => (j.msg === 'listening' ? (j.port as number) : undefined), {
    ms: 15_000,
    what: 'mcpmux serve "listening" line',
    log: () => err,
  });
  const base = `http://127.0.0.1:${bound}`;
  const d: Daemon = {
    child,
    port: bound,
    base,
    url: `${base}/mcp`,
    stderr: () => err,
    exited,
    async stop(timeoutMs = 10_000) {
      daemons.delete(d);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exitWithin(child, exited, timeoutMs);
    },
  };
  daemons.add(d);
  return d;
}


/** Stops every daemon still running (for afterAll). */
export async function stopAllDaemons(): Promise<void> {
  await Promise.allSettled([...daemons].map((d) => d.stop()));
}

export { isAlive } from './harness.js';
