// One process at a time per login, across processes sharing a state folder (a daemon and
// `mcpmux login`, two daemons, `mcpmux tools` beside a daemon): a refresh spends the refresh
// token, so two processes refreshing one login at once would leave one of them with a token the
// authorization server has already rotated away. A lock file beside the login, created with
// O_EXCL, holds the holder's pid, host and time; it is removed when the holder is done. A lock
// whose holder is gone (same host, its pid no longer runs) or that is older than the holder
// could hold it (its work is bounded by `holdMs`) is stale and taken over. A process waits for a
// held lock by looking again every POLL_MS, at most until the lock would be stale.
// (Two waiters breaking one stale lock at the same moment could both proceed: only after a
// holder died mid-refresh, and the loser's refresh is then refused and retried, never stored.)

import { randomUUID } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const POLL_MS = 25;
/** Beyond the holder's own bound: its clock, its process exiting after the abort. */
const GRACE_MS = 5_000;

interface Holder {
  pid: number;
  host: string;
  at: number;
  nonce: string;
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
  const me: Holder = { pid: process.pid, host: os.hostname(), at: Date.now(), nonce: randomUUID() };
  let waited = false;
  for (;;) {
    me.at = Date.now();
    if (create(file, me)) break;
    if (stale(file, holdMs)) {
      rmSync(file, { force: true });
      continue;
    }
    if (!waited) onWait?.();
    waited = true;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  try {
    return await fn();
  } finally {
    // Ours still (not taken over as stale meanwhile): removed.
    if (read(file)?.nonce === me.nonce) rmSync(file, { force: true });
  }
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
  return h !== undefined && h.host === os.hostname() && !alive(h.pid);
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
