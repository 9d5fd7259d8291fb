// A stdio upstream: a child process spawned with execa (never through a shell), or the one
// `mcpmux stdio` spawned for it before the runtime loaded (prestart.ts), its stdout and stdin as
// the MCP stream, its stderr into our logs (and its last lines kept, for status), and
// the spec's shutdown order on close.
//
// execa loads on the first spawn that needs it (execaLoaded), not with mcpmux: importing it is
// ~330 M instructions, half of what loading the stdio runtime costs, and a `mcpmux stdio` whose
// upstreams were all spawned early (prestart.ts) may never need it. That loading would run
// beside the children's boot, on the cores they boot on, while the host waits for them.

import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { ResultPromise } from 'execa';
import { maskSecretArgs } from '../config/secret-args.js';
import type { StdioServerConfig } from '../config/types.js';
import type { Logger } from '../observe/logger.js';
import { StreamTransport } from '../transport/stream.js';
import { endGroup, GROUPS, settlesWithin, shortenGroup, signalChild, spawnSpec, type ChildEnd, type ChildHandle, type SpawnSpec } from './child-spawn.js';
import type { Connection, StopGrace } from './connect.js';
import { guardGroup } from './reaper.js';

/**
 * How long a child gets after stdin closes, and again after SIGTERM, before the next step, when
 * nobody is waiting on mcpmux (a reload, a restart, a daemon's drain).
 */
const DEFAULT_GRACE: StopGrace = { afterEofMs: 2000, afterTermMs: 2000 };
const MAX_STDERR_LINE = 4096;
/** How long a child whose stdin broke gets to exit, so that its exit status is the reason told. */
const PIPE_ERROR_WAIT_MS = 1000;
/** What is kept of a child's stderr for status and `check --probe`: its last lines, this many, at most STDERR_TAIL_BYTES. */
const STDERR_TAIL_LINES = 5;
const STDERR_TAIL_BYTES = 1024;

/**
 * A stdio upstream's connection: the child `prestarted` (spawned for this very config before the
 * runtime loaded: prestart.ts), or else a new one.
 */
export function spawnChild(cfg: StdioServerConfig, maxMessageBytes: number, log: Logger, prestarted?: ChildHandle): Connection {
  const spec = spawnSpec(cfg);
  const { proc, pgid, ended, stderr } = prestarted ?? spawnWithExeca(spec);
  // Arguments may hold secrets written as they are (`--api-key sk-…`): shown masked (and the
  // loader made every log line's scrubber know them, for what the server itself prints).
  log.info({ command: cfg.command, args: maskSecretArgs(cfg.args), childPid: proc.pid, ...(prestarted && { prestarted: true }) }, 'spawned upstream');

  let permanent: string | undefined;
  const exited = ended.then((r) => {
    // execa's messages quote the whole command line, whose arguments may hold secrets: hosts
    // read this reason, so it names the command and the system's error only.
    if (r.startError) {
      permanent = cannotRun(cfg, spec.env, r.startError.code);
      return permanent ?? `failed to start ${JSON.stringify(cfg.command)}: ${r.startError.code ?? r.startError.message}`;
    }
    if (r.signal) return `killed by ${r.signal}`;
    return `exited with code ${r.exitCode}`;
  });

  const stderrTail = pipeStderr(stderr, log);
  const transport = new StreamTransport(proc.stdout!, proc.stdin!, maxMessageBytes, false);
  // How long the child, and what is left of its group, get after SIGTERM: each stop() may shorten it.
  let groupGraceMs = DEFAULT_GRACE.afterTermMs;
  void exited.then((how) => {
    transport.finish(how);
    // What it started may outlive it (an `sh -c` wrapper that died): the group goes too.
    if (pgid !== undefined) void endGroup(pgid, groupGraceMs);
  });
  // A write to a child that died fails (EPIPE): its exit status is the reason worth telling
  // ("exited with code 1", with its stderr), not the pipe's. Only a child that closed its stdin
  // and stays is reported by the pipe's error.
  let pipeFailed = false;
  proc.stdin!.on('error', (err) => {
    if (pipeFailed) return;
    pipeFailed = true;
    void settlesWithin(exited, PIPE_ERROR_WAIT_MS).then((gone) => gone || transport.finish(`output error: ${err.message}`));
  });

  let stopping: Promise<void> | undefined;
  /** The step of a stop under way: its deadline, which a later stop with a shorter grace may bring forward. */
  let step: { after: 'eof' | 'term'; deadline: number; reschedule(): void } | undefined;
  /** Resolves true once the child exited, false once `after`'s deadline (perhaps shortened meanwhile) passes. */
  const exitsBy = (after: 'eof' | 'term', ms: number): Promise<boolean> =>
    new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const s = {
        after,
        deadline: Date.now() + ms,
        reschedule: () => {
          clearTimeout(timer);
          timer = setTimeout(() => resolve(false), Math.max(0, s.deadline - Date.now()));
        },
      };
      step = s;
      s.reschedule();
      void exited.then(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  const stop = (grace: StopGrace = DEFAULT_GRACE): Promise<void> => {
    groupGraceMs = Math.min(groupGraceMs, grace.afterTermMs);
    if (stopping) {
      // A stop already under way (a reload's, with the default grace) and now a shorter one
      // (the host is waiting): the current step's deadline, and the next's, come forward.
      if (step) {
        const deadline = Date.now() + (step.after === 'eof' ? grace.afterEofMs : grace.afterTermMs);
        if (deadline < step.deadline) {
          step.deadline = deadline;
          step.reschedule();
        }
      }
      if (pgid !== undefined) shortenGroup(pgid, grace.afterTermMs);
      return stopping;
    }
    return (stopping = (async () => {
      if (proc.exitCode === null && proc.signalCode === null) {
        // The spec's order: stdin closed, then SIGTERM, then SIGKILL (to the whole group).
        proc.stdin?.end();
        if (!(await exitsBy('eof', grace.afterEofMs))) {
          signalChild(proc, pgid, 'SIGTERM');
          if (!(await exitsBy('term', groupGraceMs))) {
            signalChild(proc, pgid, 'SIGKILL');
            await exited;
          }
        }
      }
      step = undefined;
      if (pgid !== undefined) await endGroup(pgid, groupGraceMs);
    })());
  };

  return {
    transport,
    exited,
    stop,
    pid: proc.pid,
    stderrTail,
    get permanent() {
      return permanent;
    },
  };
}

/** execa's spawn once loaded (execaLoaded); the load under way or done. */
let execa: typeof import('execa').execa | undefined;
let loading: Promise<void> | undefined;

/** Loads execa, once; a spawn without a prestarted child waits for it (before its spawn turn). */
export function execaLoaded(): Promise<void> {
  return (loading ??= import('execa').then((m) => void (execa = m.execa)));
}

/** Starts the child with execa (never through a shell), as spawnRaw does (child-spawn.ts). */
function spawnWithExeca(spec: SpawnSpec): ChildHandle {
  // Upstream.run awaits execaLoaded() unless a prestarted child waits for it: only a child taken
  // meanwhile by another start of the same server ends here, and its start fails and is retried.
  if (execa === undefined) throw new Error('execa is not loaded yet (execaLoaded)');
  const proc: ResultPromise = execa(spec.command, spec.args, {
    cwd: spec.cwd,
    env: spec.env,
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
  const ended = proc.then((r): ChildEnd => {
    if (r.failed && r.exitCode === undefined && r.signal === undefined) return { startError: { code: r.code, message: r.originalMessage ?? 'unknown error' } };
    return { ...(r.exitCode !== undefined && { exitCode: r.exitCode }), ...(r.signal !== undefined && { signal: r.signal }) };
  });
  return { proc, pgid, ended, stderr: proc.stderr };
}

/**
 * Why the command can never run as configured (not found, not executable, no such working
 * folder), said so a person can fix it; undefined for other spawn errors (worth retrying).
 * Node reports a missing cwd as ENOENT too, so that is checked first.
 */
function cannotRun(cfg: StdioServerConfig, env: Record<string, string>, code: string | undefined): string | undefined {
  if (code === 'ENOENT' && cfg.cwd !== undefined && !existsSync(cfg.cwd)) return `working folder not found: ${cfg.cwd} (the server's cwd)`;
  if (code === 'ENOENT') {
    if (cfg.command.includes('/') || cfg.command.includes('\\')) {
      // The file is there: what is missing is the interpreter its #! line names.
      if (existsSync(path.resolve(cfg.cwd ?? process.cwd(), cfg.command))) return `cannot run ${cfg.command}: the interpreter on its #! line was not found`;
      return `command not found: ${cfg.command} (no such file)`;
    }
    return `command not found: ${cfg.command} (not on PATH=${env.PATH ?? '(unset)'}; give its full path, or set PATH in the server's "env")`;
  }
  if (code === 'EACCES') return `permission denied: ${cfg.command} (not executable by this user; check its mode, or give the interpreter as the command)`;
  return undefined;
}

/**
 * What a server writes on its stderr is its own diagnostics, often alarming out of context
 * ("Failed to request initial roots from client: -32601" from a healthy server). It is relayed
 * at info, as the server's words and not mcpmux's, so a user reading the log knows whose line it
 * is and that mcpmux did not fail.
 */
const STDERR_MSG = "the server's own stderr, relayed (its words, not an mcpmux error)";

function pipeStderr(stderr: Readable | null, log: Logger): () => string[] {
  let rest = '';
  const tail: string[] = [];
  const keep = (line: string): void => {
    log.info({ stderr: line }, STDERR_MSG);
    tail.push(line.length > STDERR_TAIL_BYTES ? `${line.slice(0, STDERR_TAIL_BYTES)}…` : line);
    if (tail.length > STDERR_TAIL_LINES) tail.shift();
  };
  stderr?.setEncoding('utf8');
  stderr?.on('data', (chunk: string) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop() ?? '';
    if (rest.length > MAX_STDERR_LINE) rest = rest.slice(0, MAX_STDERR_LINE);
    for (const line of lines) if (line.trim()) keep(line.slice(0, MAX_STDERR_LINE).trimEnd());
  });
  stderr?.on('end', () => {
    if (rest.trim()) keep(rest.trimEnd());
    rest = '';
  });
  // The last lines within STDERR_TAIL_BYTES all told, newest kept; a partial last line counts
  // (a server that dies mid-line still said it).
  return () => {
    const lines = rest.trim() ? [...tail, rest.trimEnd()].slice(-STDERR_TAIL_LINES) : [...tail];
    let bytes = 0;
    const out: string[] = [];
    for (let i = lines.length - 1; i >= 0; i--) {
      bytes += Buffer.byteLength(lines[i]!);
      if (bytes > STDERR_TAIL_BYTES && out.length > 0) break;
      out.unshift(lines[i]!);
    }
    return out;
  };
}
