// How a stdio upstream's process is started, in one place for both ways of starting it: with
// execa (child.ts: every start once mcpmux is running) and with Node's own spawn (prestart.ts:
// the first start of `mcpmux stdio`, before the rest of mcpmux has loaded). Both give the child
// the same command, arguments, working folder, environment and process group, and both hand
// child.ts a ChildHandle. Light on purpose: `mcpmux stdio` loads this before it spawns.

import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { finished, PassThrough, pipeline, type Readable } from 'node:stream';
import type { StdioServerConfig } from '../config/types.js';
import { childEnv, withOwnNode } from './child-env.js';
import { guardGroup, releaseGroup, signalGroup } from './reaper.js';

/** Process groups exist on POSIX systems. */
export const GROUPS = process.platform !== 'win32';

/** What a child is started with. */
export interface SpawnSpec {
  command: string;
  args: string[];
  cwd: string | undefined;
  /** Only what a login shell needs, plus its own env, and our Node findable (child-env.ts). */
  env: Record<string, string>;
}

export function spawnSpec(cfg: StdioServerConfig): SpawnSpec {
  return {
    command: cfg.command,
    args: cfg.args,
    cwd: cfg.cwd,
    env: withOwnNode(childEnv(process.env, cfg.env, cfg.inheritEnv), cfg.env, path.dirname(process.execPath)),
  };
}

/** Two specs start the same child (a prestarted child is adopted only for the spec it was started with). */
export function sameSpec(a: SpawnSpec, b: SpawnSpec): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** How a child ended: its exit code or signal, or the system's error when it could not start at all. */
export interface ChildEnd {
  exitCode?: number;
  signal?: string;
  /** It never ran (ENOENT, EACCES, …): the error's code, or its message when it has none. */
  startError?: { code: string | undefined; message: string };
}

/** What child.ts uses of a child process: Node's, or execa's (which extends it). */
export type SpawnedProcess = Pick<ChildProcess, 'pid' | 'stdin' | 'stdout' | 'stderr' | 'exitCode' | 'signalCode' | 'kill'>;

/** A started child as child.ts drives it, however it was started. */
export interface ChildHandle {
  readonly proc: SpawnedProcess;
  /** Its process group (POSIX), registered with the reaper from the moment it was spawned. */
  readonly pgid: number | undefined;
  /** Resolves (never rejects) once it exited and its pipes closed, or could not start. */
  readonly ended: Promise<ChildEnd>;
  /** What it writes on stderr, from its first byte. */
  readonly stderr: Readable | null;
}

/**
 * Starts a child with Node's own spawn (no shell), as execa would with child.ts's options, in
 * its own process group guarded by the reaper at once. Used for the prestarted children: execa
 * itself (~100 modules) would be loaded before the first spawn, on the path a host waits on.
 */
export function spawnRaw(spec: SpawnSpec): ChildHandle {
  const proc = spawn(spec.command, spec.args, {
    cwd: spec.cwd,
    env: spec.env,
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: GROUPS,
    windowsHide: true,
  });
  const pgid = GROUPS ? proc.pid : undefined;
  if (pgid !== undefined) guardGroup(pgid);
  let startError: ChildEnd['startError'];
  // Without a listener, a spawn error (command not found) would be thrown: it is how it ended.
  proc.on('error', (err: NodeJS.ErrnoException) => {
    if (proc.pid === undefined) startError ??= { code: err.code, message: err.message };
  });
  // Nothing is written before the child is adopted, but its pipe must never throw meanwhile.
  proc.stdin?.on('error', () => {});
  // Read from the start and kept until adopted: Node discards what an exited child left in a
  // pipe nobody reads, and a child that dies before its adoption must still say why.
  // pipeline, not pipe: a read error ends the copy too, so `ended` below still settles.
  const stderr = proc.stderr && pipeline(proc.stderr, new PassThrough(), () => {});
  // Ended once it exited and its pipes closed, and what it wrote on stderr was all read: as
  // execa's promise settles, so child.ts has its last words when it says why it ended.
  const ended = new Promise<ChildEnd>((resolve) => {
    let end: ChildEnd | undefined;
    let read = stderr === null;
    const settle = (): void => void (end && read && resolve(end));
    proc.on('close', (code, signal) => {
      end = startError ? { startError } : { ...(code !== null && { exitCode: code }), ...(signal !== null && { signal }) };
      settle();
    });
    if (stderr) finished(stderr, () => ((read = true), settle()));
  });
  return { proc, pgid, ended, stderr };
}

/** Signals the child's whole group (POSIX), or the child alone where there is none or it is gone. */
export function signalChild(proc: SpawnedProcess, pgid: number | undefined, signal: NodeJS.Signals): void {
  if (pgid === undefined || !signalGroup(pgid, signal)) proc.kill(signal);
}

/** Resolves true once `p` settled, false once `ms` passed first. */
export function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    void p.then(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** A group being ended gets at most `graceMs` from now (nothing if none is being ended). */
export function shortenGroup(pgid: number, graceMs: number): void {
  const now = ending.get(pgid);
  if (now) now.deadline = Math.min(now.deadline, Date.now() + graceMs);
}

/** Groups being ended (endGroup): one ending each, which a shorter grace may bring forward. */
const ending = new Map<number, { done: Promise<void>; deadline: number }>();

/**
 * Ends what is left of a child's process group once the child itself is gone (what it started
 * may outlive it: an `sh -c` wrapper that died): SIGTERM, then SIGKILL after the grace; then
 * releases the group from the reaper.
 */
export function endGroup(pgid: number, graceMs: number): Promise<void> {
  const deadline = Date.now() + graceMs;
  const now = ending.get(pgid);
  if (now) {
    // A stop with a shorter grace (the host is waiting) shortens the wait already under way.
    now.deadline = Math.min(now.deadline, deadline);
    return now.done;
  }
  const entry = { done: Promise.resolve(), deadline };
  entry.done = (async () => {
    if (signalGroup(pgid, 'SIGTERM')) {
      while (signalGroup(pgid, 0) && Date.now() < entry.deadline) await new Promise((r) => setTimeout(r, 50));
      signalGroup(pgid, 'SIGKILL');
    }
    releaseGroup(pgid);
    ending.delete(pgid);
  })();
  ending.set(pgid, entry);
  return entry.done;
}
