// Child processes for the benchmark: each spawned in its own process group, tracked, and killed
// (with everything it started) at the end, even when the run fails or is interrupted.
// Also the /proc readers: CPU ticks, VmHWM/VmRSS, children, process-group members; and a free
// loopback port for a child that must be told one.

import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';

const tracked = new Set(); // ChildProcess, spawned detached (pgid === pid)
const STDERR_KEEP = 64 * 1024;

/**
 * Spawns `cmd args` detached (its own process group) with piped stdio. stderr is drained into
 * a bounded tail (child.stderrTail()) and offered line by line to child.onStderrLine.
 */
export function spawnTracked(cmd, args, { label, env, cwd } = {}) {
  const child = spawn(cmd, args, {
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: env ?? process.env,
    cwd,
  });
  child.label = label ?? cmd;
  tracked.add(child);
  let tail = '';
  let partial = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (s) => {
    tail = (tail + s).slice(-STDERR_KEEP);
    if (child.onStderrLine) {
      const lines = (partial + s).split('\n');
      partial = lines.pop() ?? '';
      if (partial.length > STDERR_KEEP) partial = '';
      for (const l of lines) child.onStderrLine(l);
    }
  });
  child.stderrTail = (n = 2000) => tail.slice(-n).trim();
  child.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  child.on('error', (e) => {
    child.spawnError = e;
  });
  child.stdin.on('error', () => {});
  return child;
}

function alive(child) {
  return child.exitCode === null && child.signalCode === null;
}

function within(p, ms) {
  let t;
  return Promise.race([p.then(() => true), new Promise((r) => (t = setTimeout(() => r(false), ms)))]).finally(() => clearTimeout(t));
}

/**
 * Stops a tracked child: close its stdin (the stdio way to end a session) or send `signal`,
 * wait up to graceMs, then SIGTERM, then SIGKILL; finally kills any process still in its
 * group (grandchildren it failed to stop). Returns the pids of such leftovers, if any.
 */
export async function stopTracked(child, { graceMs = 5000, first = 'stdin' } = {}) {
  if (!child) return [];
  if (alive(child)) {
    if (first === 'stdin') child.stdin.end();
    else signal(child.pid, first);
    if (!(await within(child.exited, graceMs))) {
      signal(child.pid, 'SIGTERM');
      if (!(await within(child.exited, 3000))) {
        signal(child.pid, 'SIGKILL');
        await within(child.exited, 3000);
      }
    }
  }
  // Give the group a moment to finish exiting: a proxy that waited for its upstreams has already
  // reaped them, so anything still in the group after this is a leftover.
  let left = groupMembers(child.pid);
  for (let i = 0; i < 20 && left.length; i++) {
    await new Promise((r) => setTimeout(r, 100));
    left = groupMembers(child.pid);
  }
  for (const pid of left) signal(pid, 'SIGKILL');
  tracked.delete(child);
  return left;
}

function signal(pid, sig) {
  try {
    process.kill(pid, sig);
  } catch {
    /* already gone */
  }
}

/** Synchronously kills every tracked child and its group's members (for exit paths). */
export function killAllTracked() {
  for (const child of tracked) {
    for (const pid of groupMembers(child.pid)) signal(pid, 'SIGKILL');
    signal(child.pid, 'SIGKILL');
  }
  tracked.clear();
}

let installed = false;
/** Makes sure nothing outlives the harness: normal exit, Ctrl-C, SIGTERM, uncaught errors. */
export function installCleanup() {
  if (installed) return;
  installed = true;
  process.on('exit', killAllTracked);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => {
      process.stderr.write(`\nbench: ${sig}: stopping every child process\n`);
      killAllTracked();
      process.exit(130);
    });
  }
}

/** A free loopback port (bound, then released) for a child that needs a fixed --port. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// ---- /proc ------------------------------------------------------------------------------------

/** utime + stime of a process, in clock ticks (1/100 s on Linux), or undefined if gone. */
export function cpuTicks(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    // fields after "pid (comm) ": state=0 ppid=1 pgrp=2 ... utime=11 stime=12
    return Number(f[11]) + Number(f[12]);
  } catch {
    return undefined;
  }
}
export const TICK_MS = 10; // getconf CLK_TCK = 100 on Linux x86-64/arm64

/** {hwmKb, rssKb} from /proc/<pid>/status, or undefined. */
export function memory(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s)?.[1]);
    return { hwmKb: kb('VmHWM'), rssKb: kb('VmRSS') };
  } catch {
    return undefined;
  }
}

/**
 * Resets a process's peak RSS (VmHWM) to its current RSS (Linux: clear_refs 5) and returns
 * that RSS in kB; undefined where the kernel does not allow it.
 */
export function resetPeak(pid) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return memory(pid)?.rssKb;
  } catch {
    return undefined;
  }
}

/** Direct children of a process (all its threads' children files). */
export function childrenOf(pid) {
  const out = [];
  try {
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      try {
        const s = readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim();
        if (s) out.push(...s.split(/\s+/).map(Number));
      } catch {
        /* thread gone */
      }
    }
  } catch {
    /* process gone */
  }
  return out;
}

/** The bench's echo servers among a process's children (mcpmux has another: its reaper). */
export function echoServersOf(pid) {
  return childrenOf(pid).filter((p) => cmdline(p).includes('echo-server.mjs'));
}

/** The one echo server behind a middle process, if any. */
export function echoServerOf(pid) {
  return echoServersOf(pid)[0];
}

/** Pids of live (non-zombie) processes whose process group is `pgid`. */
export function groupMembers(pgid) {
  const out = [];
  let entries;
  try {
    entries = readdirSync('/proc');
  } catch {
    return out;
  }
  for (const e of entries) {
    if (e.charCodeAt(0) < 48 || e.charCodeAt(0) > 57) continue;
    try {
      const s = readFileSync(`/proc/${e}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      if (Number(f[2]) === pgid && f[0] !== 'Z' && f[0] !== 'X') out.push(Number(e));
    } catch {
      /* gone */
    }
  }
  return out;
}

export function cmdline(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
  } catch {
    return '';
  }
}
