// A stdio upstream: a child process spawned with execa (never through a shell), its stdout and
// stdin as the MCP stream, its stderr into our logs, and the spec's shutdown order on close.

import { execa, type ResultPromise } from 'execa';
import type { StdioServerConfig } from '../config/types.js';
import type { Logger } from '../observe/logger.js';
import { StreamTransport } from '../transport/stream.js';
import { childEnv } from './child-env.js';
import type { Connection } from './connect.js';

/** How long a child gets after stdin closes, and again after SIGTERM, before the next step. */
const GRACE_MS = 2000;
const MAX_STDERR_LINE = 4096;


export function spawnChild(cfg: StdioServerConfig, maxMessageBytes: number, log: Logger): Connection {
  const proc: ResultPromise = execa(cfg.command, cfg.args, {
    cwd: cfg.cwd,
    // Only what a login shell needs, plus its own env (child-env.ts).
    env: childEnv(process.env, cfg.env, cfg.inheritEnv),
    extendEnv: false,
    stdin: 'pipe',
    stdout: 'pipe',
    stderr: 'pipe',
    buffer: false,
    reject: false,
    cleanup: true,
    windowsHide: true,
  });
  log.info({ command: cfg.command, args: cfg.args, childPid: proc.pid }, 'spawned upstream');

  const exited = proc.then((r) => {
    // execa's messages quote the whole command line, whose arguments may hold secrets: hosts
    // read this reason, so it names the command and the system's error only.
    if (r.failed && r.exitCode === undefined && r.signal === undefined) return `failed to start ${JSON.stringify(cfg.command)}: ${r.code ?? r.originalMessage ?? 'unknown error'}`;
    if (r.signal) return `killed by ${r.signal}`;
    return `exited with code ${r.exitCode}`;
  });

  pipeStderr(proc, log);
  const transport = new StreamTransport(proc.stdout!, proc.stdin!, maxMessageBytes, false);
  void exited.then((how) => transport.finish(how));
  // A write to a child that already died must not become an unhandled 'error'.
  proc.stdin!.on('error', () => {});

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.stdin?.end();
      if (await exitsWithin(exited, GRACE_MS)) return;
      proc.kill('SIGTERM');
      if (await exitsWithin(exited, GRACE_MS)) return;
      proc.kill('SIGKILL');
      await exited;
    })());

  return { transport, exited, stop, pid: proc.pid };
}

function exitsWithin(exited: Promise<string>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    void exited.then(() => {
      clearTimeout(t);
      resolve(true);
    });
  });
}

function pipeStderr(proc: ResultPromise, log: Logger): void {
  let rest = '';
  proc.stderr?.setEncoding('utf8');
  proc.stderr?.on('data', (chunk: string) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop() ?? '';
    if (rest.length > MAX_STDERR_LINE) rest = rest.slice(0, MAX_STDERR_LINE);
    for (const line of lines) if (line.trim()) log.info({ stderr: line.slice(0, MAX_STDERR_LINE) }, 'upstream stderr');
  });
  proc.stderr?.on('end', () => {
    if (rest.trim()) log.info({ stderr: rest }, 'upstream stderr');
  });
}
