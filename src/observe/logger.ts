// Structured logs (pino) to stderr. Never stdout: in stdio mode stdout carries only MCP.
// Every line is scrubbed of known secret values (expanded ${VAR}s, header values, tokens), and
// carries numbers too big for a double as their digits (never mcpmux's internal marker).

import { pino, type Logger } from 'pino';
import { restoreBigNumbers } from '../jsonrpc/big-numbers.js';

export type { Logger };

/**
 * Log lines waiting for stderr beyond this are dropped (and counted in the next line that gets
 * through): a host that never reads mcpmux's stderr must not freeze it (a synchronous write
 * to a full pipe blocks the event loop) nor grow it without bound.
 */
const MAX_QUEUED_LOG_BYTES = 4 * 1024 * 1024;

/** Each logger's scrubber, replaceable when a reload brings new secrets. */
const scrubbers = new WeakMap<Logger, { scrub: ((s: string) => string) | undefined; all?: string[] }>();

export function createLogger(level = 'info', secrets: readonly string[] = []): Logger {
  const holder: { scrub: ((s: string) => string) | undefined; all?: string[] } = { scrub: makeScrubber(secrets), all: [...secrets] };
  const dest = pino.destination({ dest: 2, sync: false, minLength: 0, maxLength: MAX_QUEUED_LOG_BYTES });
  const scrubLine = (line: string): string => (holder.scrub ? holder.scrub(line) : line);
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
      hooks: { streamWrite: (line: string) => scrubLine(restoreBigNumbers(line)) },
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
  const holder = scrubbers.get(log);
  if (!holder) return;
  holder.all = [...new Set([...(holder.all ?? []), ...secrets])];
  holder.scrub = makeScrubber(holder.all);
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
  const needles = new Set<string>();
  for (const s of secrets) {
    // Very short values would redact half the log and protect nothing.
    if (s.length < 4) continue;
    needles.add(s);
    needles.add(JSON.stringify(s).slice(1, -1));
  }
  if (needles.size === 0) return undefined;
  const list = [...needles].sort((a, b) => b.length - a.length);
  return (line: string) => {
    for (const n of list) if (line.includes(n)) line = line.split(n).join('[REDACTED]');
    return line;
  };
}
