// One process at a time per login, across processes sharing a state folder (a daemon and
// `mcpmux login`, two daemons, `mcpmux tools` beside a daemon): a refresh spends the refresh
// token, so two processes refreshing one login at once would leave one of them with a token the
// authorization server has already rotated away. A lock file beside the login, created with
// O_EXCL, holds the holder's pid, host, pid namespace and time; it is removed when the holder is
// done. A lock whose holder is gone (same host and pid namespace, its pid no longer runs) or that
// is older than the holder could hold it (its work is bounded by `holdMs`) is stale and taken
// over. A process waits for a held lock by looking again every POLL_MS, at most until the lock
// would be stale.
// Removing a lock file is a read-then-remove on a path, which no file system does atomically: two
// waiters that both judged one stale lock could each remove it, the second removing the lock the
// first had just created. So every removal (a stale takeover, a holder's own release) happens
// inside a short break lock (`<file>.break`, O_EXCL, held for a few synchronous calls): under it
// the lock is read again and removed only if it is still the one judged. A break lock whose
// process died inside that section is cleared by its age (BREAK_STALE_MS).

import { randomUUID } from 'node:crypto';
import { closeSync, linkSync, mkdirSync, openSync, readFileSync, readlinkSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const POLL_MS = 25;
/** Beyond the holder's own bound: its clock, its process exiting after the abort. */
const GRACE_MS = 5_000;
/** A break section is a few synchronous calls: a break lock this old was left by a process that died in it. */
const BREAK_STALE_MS = 10_000;
const BREAK_POLL_MS = 5;

interface Holder {
  pid: number;
  host: string;
  /** The pid namespace (Linux): containers sharing a hostname see each other's pids as absent. */
  ns?: string;
  at: number;
  nonce: string;
}

const PID_NS = pidNamespace();

function pidNamespace(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}

/** This process's own holders, per file: locks of one process queue here, not by polling their own file. */
const queues = new Map<string, Promise<unknown>>();

/** Runs `fn` holding `file` (created beside a login). `holdMs`: how long `fn` may take at most. */
export function withFileLock<T>(file: string, holdMs: number, fn: () => Promise<T>, onWait?: () => void): Promise<T> {
  const before = queues.get(file) ?? Promise.resolve();
  const run = before.catch(() => {}).then(() => held(file, holdMs, fn, onWait));
  const tail = run.catch(() => {});
  queues.set(file, tail);
  void tail.then(() => {
    if (queues.get(file) === tail) queues.delete(file);
  });
  return run;
}

async function held<T>(file: string, holdMs: number, fn: () => Promise<T>, onWait?: () => void): Promise<T> {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const me: Holder = { pid: process.pid, host: os.hostname(), ns: PID_NS, at: Date.now(), nonce: randomUUID() };
  let waited = false;
  for (;;) {
    me.at = Date.now();
    if (create(file, me)) break;
    if (stale(file, holdMs)) {
      // Removed under the break lock if still stale then; either way, try to create again.
      const removeIfStale = (): void => {
        if (stale(file, holdMs)) rmSync(file, { force: true });
      };
      if (underBreakLock(file, removeIfStale) !== undefined) continue;
    }
    if (!waited) onWait?.();
    waited = true;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  try {
    return await fn();
  } finally {
    // Ours still (not taken over as stale meanwhile): removed, under the break lock so a
    // takeover's new lock is never the one removed.
    const removeIfOurs = (): void => {
      if (read(file)?.nonce === me.nonce) rmSync(file, { force: true });
    };
    while (underBreakLock(file, removeIfOurs) === undefined) {
      await new Promise((resolve) => setTimeout(resolve, BREAK_POLL_MS));
    }
  }
}

/**
 * Runs `fn` (synchronous: no other code of this process runs inside) holding `<file>.break`;
 * undefined when another process holds it now (look again shortly).
 */
function underBreakLock<T>(file: string, fn: () => T): { value: T } | undefined {
  const breakFile = `${file}.break`;
  const me: Holder = { pid: process.pid, host: os.hostname(), ns: PID_NS, at: Date.now(), nonce: randomUUID() };
  if (!create(breakFile, me)) {
    clearDeadBreakLock(breakFile);
    return undefined;
  }
  try {
    return { value: fn() };
  } finally {
    rmSync(breakFile, { force: true });
  }
}

/**
 * A break lock older than BREAK_STALE_MS: moved aside to a name of our own (atomic, so only one
 * process gets it), then removed if it is the one judged old; a live one moved by mistake (it
 * replaced the old one meanwhile) is put back, unless a new one is there already.
 */
function clearDeadBreakLock(breakFile: string): void {
  const judged = read(breakFile);
  const at = judged?.at ?? mtime(breakFile);
  if (at === undefined || Date.now() - at <= BREAK_STALE_MS) return;
  const aside = `${breakFile}.${randomUUID()}`;
  try {
    renameSync(breakFile, aside);
  } catch {
    return; // gone meanwhile
  }
  const moved = read(aside);
  if (moved !== undefined && moved.nonce !== judged?.nonce) {
    try {
      linkSync(aside, breakFile);
    } catch {
      // EEXIST: a newer break lock is there; the one moved finishes within microseconds anyway.
    }
  }
  rmSync(aside, { force: true });
}

function create(file: string, me: Holder): boolean {
  let fd: number;
  try {
    fd = openSync(file, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  try {
    writeSync(fd, JSON.stringify(me));
  } finally {
    closeSync(fd);
  }
  return true;
}

function read(file: string): Holder | undefined {
  try {
    const h = JSON.parse(readFileSync(file, 'utf8')) as Holder;
    return typeof h.pid === 'number' && typeof h.at === 'number' ? h : undefined;
  } catch {
    return undefined;
  }
}

function stale(file: string, holdMs: number): boolean {
  const h = read(file);
  // Not written yet (its holder is between the create and the write), or unreadable: by its age.
  const at = h?.at ?? mtime(file);
  if (at === undefined) return false; // gone meanwhile: the next create decides
  if (Date.now() - at > holdMs + GRACE_MS) return true;
  // By its pid only where that pid means the same process: same host and the same pid namespace
  // (containers may share a hostname but not pids). Otherwise by its age alone.
  return h !== undefined && h.host === os.hostname() && h.ns === PID_NS && !alive(h.pid);
}

function mtime(file: string): number | undefined {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it runs, as another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
