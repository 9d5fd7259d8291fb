// A stdio upstream: a child process spawned with execa (never through a shell), its stdout and
// stdin as the MCP stream, its stderr into our logs, and the spec's shutdown order on close.

import { execa, type ResultPromise } from 'execa';
import { maskSecretArgs } from '../config/secret-args.js';
import type { StdioServerConfig } from '../config/types.js';
import type { Logger } from '../observe/logger.js';
import { StreamTransport } from '../transport/stream.js';
import { childEnv } from './child-env.js';
import { guardGroup, releaseGroup, signalGroup } from './reaper.js';

/** Process groups exist on POSIX systems. */
const GROUPS = process.platform !== 'win32';
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
    // Its own process group (reaper.ts): stopping it reaches its own children too. On Windows
    // there are no groups; execa's cleanup ends the child with mcpmux instead.
    detached: GROUPS,
    cleanup: !GROUPS,
    windowsHide: true,
  });
  const pgid = GROUPS ? proc.pid : undefined;
  if (pgid !== undefined) guardGroup(pgid);
  // Arguments may hold secrets written as they are (`--api-key sk-…`): shown masked (and the
  // loader made every log line's scrubber know them, for what the server itself prints).
  log.info({ command: cfg.command, args: maskSecretArgs(cfg.args), childPid: proc.pid }, 'spawned upstream');

  const exited = proc.then((r) => {
    // execa's messages quote the whole command line, whose arguments may hold secrets: hosts
    // read this reason, so it names the command and the system's error only.
    if (r.failed && r.exitCode === undefined && r.signal === undefined) return `failed to start ${JSON.stringify(cfg.command)}: ${r.code ?? r.originalMessage ?? 'unknown error'}`;
    if (r.signal) return `killed by ${r.signal}`;
    return `exited with code ${r.exitCode}`;
  });

  pipeStderr(proc, log);
  const transport = new StreamTransport(proc.stdout!, proc.stdin!, maxMessageBytes, false);
  void exited.then((how) => {
    transport.finish(how);
    // What it started may outlive it (an `sh -c` wrapper that died): the group goes too.
    if (pgid !== undefined) void endGroup(pgid);
  });
  // A write to a child that already died must not become an unhandled 'error'.
  proc.stdin!.on('error', () => {});

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      if (proc.exitCode === null && proc.signalCode === null) {
        // The spec's order: stdin closed, then SIGTERM, then SIGKILL (to the whole group).
        proc.stdin?.end();
        if (!(await exitsWithin(exited, GRACE_MS))) {
          if (pgid === undefined || !signalGroup(pgid, 'SIGTERM')) proc.kill('SIGTERM');
          if (!(await exitsWithin(exited, GRACE_MS))) {
            if (pgid === undefined || !signalGroup(pgid, 'SIGKILL')) proc.kill('SIGKILL');
            await exited;
          }
        }
      }
      if (pgid !== undefined) await endGroup(pgid);
    })());

  return { transport, exited, stop, pid: proc.pid };
}

/** Ends what is left of a process group (SIGTERM, then SIGKILL after the grace), then releases it. */
const ending = new Map<number, Promise<void>>();
function endGroup(pgid: number): Promise<void> {
  let p = ending.get(pgid);
  if (!p) {
    p = (async () => {
      if (signalGroup(pgid, 'SIGTERM')) {
        const deadline = Date.now() + GRACE_MS;
        while (signalGroup(pgid, 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        signalGroup(pgid, 'SIGKILL');
      }
      releaseGroup(pgid);
      ending.delete(pgid);
    })();
    ending.set(pgid, p);
  }
  return p;
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

/**
 * What a server writes on its stderr is its own diagnostics, often alarming out of context
 * ("Failed to request initial roots from client: -32601" from a healthy server). It is relayed
 * at info, as the server's words and not mcpmux's, so a user reading the log knows whose line it
 * is and that mcpmux did not fail.
 */
const STDERR_MSG = "the server's own stderr, relayed (its words, not an mcpmux error)";

function pipeStderr(proc: ResultPromise, log: Logger): void {
  let rest = '';
  proc.stderr?.setEncoding('utf8');
  proc.stderr?.on('data', (chunk: string) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop() ?? '';
    if (rest.length > MAX_STDERR_LINE) rest = rest.slice(0, MAX_STDERR_LINE);
    for (const line of lines) if (line.trim()) log.info({ stderr: line.slice(0, MAX_STDERR_LINE) }, STDERR_MSG);
  });
  proc.stderr?.on('end', () => {
    if (rest.trim()) log.info({ stderr: rest }, STDERR_MSG);
  });
}
