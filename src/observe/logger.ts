// Structured logs (pino) to stderr. Never stdout: in stdio mode stdout carries only MCP.
// Every line is scrubbed of known secret values (expanded ${VAR}s, header values, tokens).

import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level = 'info', secrets: readonly string[] = []): Logger {
  const scrub = makeScrubber(secrets);
  return pino(
    {
      level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      hooks: scrub ? { streamWrite: scrub } : {},
    },
    pino.destination({ dest: 2, sync: true }),
  );
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
