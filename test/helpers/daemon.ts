// Starts `mcpmux serve` for end-to-end tests and keeps track of it, so every daemon a test file
// starts is stopped after it (SIGTERM, then SIGKILL past a bound).

import { spawn, type ChildProcess } from 'node:child_process';
import { exitWithin, MUX_BIN, writeConfig } from './harness.js';

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
  const bound = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "listening" line within 15 s:\n${err}`)), 15_000);
    let buf = '';
    child.stderr!.setEncoding('utf8').on('data', (c: string) => {
      err += c;
      buf += c;
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try {
          const j = JSON.parse(line);
          if (j.msg === 'listening') {
            clearTimeout(timer);
            resolve(j.port);
          }
        } catch {
          /* not a log line */
        }
      }
    });
    void exited.then((e) => (clearTimeout(timer), reject(new Error(`mcpmux serve exited (${e.code ?? e.signal}):\n${err}`))));
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
