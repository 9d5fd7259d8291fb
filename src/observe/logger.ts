// Structured logs (pino) to stderr. Never stdout: in stdio mode stdout carries only MCP.
// Every line is scrubbed of known secret values (Config.secrets: secret ${VAR} values, header values, tokens), and
// carries numbers too big for a double as their digits (never mcpmux's internal marker).

import { pino, type Logger } from 'pino';
import { restoreBigNumbers } from '../jsonrpc/big-numbers.js';
import { prettyLine, type LogFormat, type LogOutput } from './log-format.js';

export type { Logger };

/**
 * Log lines waiting for stderr beyond this are dropped (and counted in the next line that gets
 * through): a host that never reads mcpmux's stderr must not freeze it (a synchronous write
 * to a full pipe blocks the event loop) nor grow it without bound.
 */
const MAX_QUEUED_LOG_BYTES = 4 * 1024 * 1024;

/**
 * Secrets learnt at run time, per source (an OAuth login's tokens, per server): the newest few
 * of each are scrubbed, so a daemon that refreshes a token every hour for a year does not
 * scrub every line for thousands of dead ones.
 */
const RUNTIME_SECRETS_PER_SOURCE = 4;

interface ScrubHolder {
  scrub: ((s: string) => string) | undefined;
  /** The config's secrets (every reload's: none is dropped). */
  all: string[];
  /** Run-time secrets by source, newest last. */
  runtime: Map<string, string[]>;
  format: LogFormat;
  /** How many values each line is searched for now: what a line costs (scrubbedValueCount). */
  needles: number;
  /**
   * Secrets changed since `scrub` was built: it is built again at the next line, not at each
   * change (a thousand people signing in between two lines cost one sort, not a thousand).
   */
  dirty: boolean;
}


/** Each logger's scrubber, replaceable when a reload or a login brings new secrets. */
const scrubbers = new WeakMap<Logger, ScrubHolder>();

export function createLogger(level = 'info', secrets: readonly string[] = [], output: LogOutput = {}): Logger {
  const format = output.format ?? 'json';
  const holder: ScrubHolder = { scrub: undefined, all: [...secrets], runtime: new Map(), format, needles: 0, dirty: true };
  const dest = pino.destination({ dest: 2, sync: false, minLength: 0, maxLength: MAX_QUEUED_LOG_BYTES });
  const scrubLine = (line: string): string => {
    if (holder.dirty) rebuild(holder);
    return holder.scrub ? holder.scrub(line) : line;
  };
  // A pretty line is made from the scrubbed JSON one: it can say no more than the JSON says.
  const color = output.color === true;
  const shape = format === 'pretty' ? (line: string): string => prettyLine(line, color) : (line: string): string => line;
  let dropped = 0;
  dest.on('drop', () => dropped++);
  // A write that fails for good (stderr closed) must not become an uncaught 'error'.
  dest.on('error', () => {});
  const log = pino(
    {
      level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      // Numbers too big for a double are marked strings inside mcpmux: the line gets their digits.
      hooks: { streamWrite: (line: string) => shape(scrubLine(restoreBigNumbers(line))) },
      mixin: () => (dropped === 0 ? {} : { droppedLogLines: takeDropped() }),
    },
    dest,
  );
  const takeDropped = (): number => {
    const n = dropped;
    dropped = 0;
    return n;
  };
  scrubbers.set(log, holder);
  return log;
}

/**
 * A reload's secrets join the ones scrubbed so far (none is dropped: lines about the old
 * config may still be written). Children of `log` share its stream hook, so they follow.
 */
export function addLogSecrets(log: Logger, secrets: readonly string[]): void {
  const holder = holderOf(log);
  if (!holder) return;
  holder.all = [...new Set([...holder.all, ...secrets])];
  holder.dirty = true;
}

/**
 * Secrets obtained at run time (an OAuth access or refresh token, a registered client's
 * secret) join the scrubber of `log` (or of the logger it is a child of). `source` groups them
 * (`oauth:github`): only its newest RUNTIME_SECRETS_PER_SOURCE values are kept. Cheap when they
 * are known already (every request asks).
 */
export function addRuntimeSecrets(log: Logger, source: string, secrets: readonly (string | undefined)[]): void {
  const holder = holderOf(log);
  if (!holder) return;
  const known = holder.runtime.get(source) ?? [];
  const fresh = secrets.filter((s): s is string => s !== undefined && s !== '' && !known.includes(s));
  if (fresh.length === 0) return;
  holder.runtime.set(source, [...known, ...fresh].slice(-RUNTIME_SECRETS_PER_SOURCE));
  holder.dirty = true;
}

/**
 * A source's secrets are no longer scrubbed: its login is gone from this process (a per-client
 * connection closed, its tokens dropped). Per-person sources come and go with people; without
 * this, every line would be searched for the tokens of everyone who ever signed in.
 */
export function removeRuntimeSecrets(log: Logger, source: string): void {
  const holder = holderOf(log);
  if (!holder || !holder.runtime.delete(source)) return;
  holder.dirty = true;
}

/** How many values each line of `log` is searched for now (the per-line cost; for tests and bounds). */
export function scrubbedValueCount(log: Logger): number {
  const holder = holderOf(log);
  if (!holder) return 0;
  if (holder.dirty) rebuild(holder);
  return holder.needles;
}

/** The form of `log`'s lines (of the logger it is a child of); JSON for a logger not made here. */
export function logFormatOf(log: Logger): LogFormat {
  return holderOf(log)?.format ?? 'json';
}

/** A child logger (pino's `child`) has its root on its prototype chain. */
function holderOf(log: Logger): ScrubHolder | undefined {
  for (let l: object | null = log; l !== null; l = Object.getPrototypeOf(l) as object | null) {
    const h = scrubbers.get(l as Logger);
    if (h) return h;
  }
  return undefined;
}

function rebuild(holder: ScrubHolder): void {
  const needles = needlesOf([...holder.all, ...[...holder.runtime.values()].flat()]);
  holder.needles = needles.length;
  holder.scrub = scrubberOf(needles);
  holder.dirty = false;
}

/** Waits (at most `ms`) for queued log lines to reach stderr; for just before process.exit. */
export function flushLogs(log: Logger, ms = 1000): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    timer.unref();
    try {
      log.flush(() => {
        clearTimeout(timer);
        resolve();
      });
    } catch {
      clearTimeout(timer);
      resolve();
    }
  });
}

/** Builds a function that replaces each secret (raw and JSON-escaped) with a marker. */
export function makeScrubber(secrets: readonly string[]): ((s: string) => string) | undefined {
  return scrubberOf(needlesOf(secrets));
}

/** What a line is searched for: each secret raw and JSON-escaped, longest first. */
function needlesOf(secrets: readonly string[]): string[] {
  const needles = new Set<string>();
  for (const s of secrets) {
    // Very short values would redact half the log and protect nothing.
    if (s.length < 4) continue;
    needles.add(s);
    needles.add(JSON.stringify(s).slice(1, -1));
  }
  return [...needles].sort((a, b) => b.length - a.length);
}

function scrubberOf(list: readonly string[]): ((s: string) => string) | undefined {
  if (list.length === 0) return undefined;
  return (line: string) => {
    for (const n of list) if (line.includes(n)) line = line.split(n).join('[REDACTED]');
    return line;
  };
}
