// What a log line looks like. JSON (one object a line) for machines, hosts' log files and
// pipes; "pretty" for a person at a terminal:
//
//   18:59:01 INFO  ready: http://127.0.0.1:7330/mcp (2 servers, 14 tools)
//   18:59:01 WARN  [fs] upstream failed to start err="exited with code 3"
//   18:59:02 [fs] Failed to request initial roots from client
//
// The last form is an upstream's own stderr: no level (it is not mcpmux speaking), the server's
// name where the level would be. Pretty lines are made from the JSON line pino wrote, after it
// was scrubbed of secrets (logger.ts), so both forms carry the same fields and nothing more;
// this is our own small formatter rather than pino-pretty (no dependency tree, no worker thread).

export const LOG_FORMATS = ['json', 'pretty'] as const;
/** mcpmux's own log levels (pino's; `--log-level`, `logLevel`), not MCP's (protocol/mcp.ts). */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** Where the lines go, as far as choosing their form goes. */
export interface LogStream {
  isTTY?: boolean;
}

/** `--log-format` when given; else pretty on a terminal, JSON on anything else. */
export function chooseLogFormat(flag: string | undefined, stream: LogStream = process.stderr): LogFormat {
  if (flag === 'json' || flag === 'pretty') return flag;
  return stream.isTTY === true ? 'pretty' : 'json';
}

export interface LogOutput {
  /** JSON lines (the default), or lines for a person. */
  format?: LogFormat;
  /** ANSI colors in pretty lines. */
  color?: boolean;
}

/** How mcpmux's own log lines go to its stderr, given `--log-format` (or none). */
export function logOutput(flag: string | undefined, stream: LogStream = process.stderr, env: NodeJS.ProcessEnv = process.env): LogOutput {
  const format = chooseLogFormat(flag, stream);
  return { format, color: format === 'pretty' && wantsColor(stream, env) };
}

/** Colors only on a terminal, and never when NO_COLOR is set (to anything but ""; no-color.org). */
function wantsColor(stream: LogStream = process.stderr, env: NodeJS.ProcessEnv = process.env): boolean {
  return stream.isTTY === true && !env.NO_COLOR;
}

const LEVELS: Record<number, { name: string; color: string }> = {
  10: { name: 'TRACE', color: '90' },
  20: { name: 'DEBUG', color: '90' },
  30: { name: 'INFO', color: '32' },
  40: { name: 'WARN', color: '33' },
  50: { name: 'ERROR', color: '31' },
  60: { name: 'FATAL', color: '1;31' },
};

/** Fields the line's layout already shows (time, level, server) or that say nothing to a person. */
const SHOWN = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'server']);

/**
 * One JSON log line (with or without its newline) as a person reads it, newline kept. A line
 * that is not a JSON object passes as it is.
 */
export function prettyLine(line: string, color: boolean): string {
  const eol = line.endsWith('\n') ? '\n' : '';
  let o: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(line);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return line;
    o = parsed as Record<string, unknown>;
  } catch {
    return line;
  }
  const paint = (code: string, s: string): string => (color ? `\x1b[${code}m${s}\x1b[0m` : s);
  const time = clock(o.time);
  // A `hint` (what to do about it: the port in use...) reads as part of the message.
  const said = typeof o.msg === 'string' ? o.msg : '';
  const msg = printable(typeof o.hint === 'string' && said !== '' ? `${said}: ${o.hint}` : said);
  const server = typeof o.server === 'string' ? o.server : undefined;
  const head = time === '' ? '' : `${paint('2', time)} `;

  // An upstream's stderr (upstream/child.ts): the server's words, under its name, no level.
  if (server !== undefined && typeof o.stderr === 'string') {
    const rest = fields(o, new Set([...SHOWN, 'stderr']), '', paint);
    return `${head}${paint('36', `[${printable(server)}]`)} ${printable(o.stderr)}${rest}${eol}`;
  }

  const level = LEVELS[o.level as number] ?? { name: String(o.level ?? '?').toUpperCase(), color: '0' };
  const who = server === undefined ? '' : `${paint('36', `[${printable(server)}]`)} `;
  return `${head}${paint(level.color, level.name.padEnd(5))} ${who}${msg}${fields(o, SHOWN, msg, paint)}${eol}`;
}

/** ` key=value` for each field the layout does not show, leaving out what the message already says. */
function fields(o: Record<string, unknown>, shown: Set<string>, msg: string, paint: (code: string, s: string) => string): string {
  let out = '';
  for (const [k, v] of Object.entries(o)) {
    if (shown.has(k) || v === undefined || saidIn(msg, k, v)) continue;
    out += ` ${paint('2', `${k}=`)}${value(v)}`;
  }
  return out;
}

/**
 * Whether the message already says this field: a URL or other long string quoted in it, or a
 * count written as "14 tools" for `tools: 14` (the ready line).
 */
function saidIn(msg: string, key: string, v: unknown): boolean {
  if (msg === '') return false;
  if (typeof v === 'string') return v.length >= 8 && msg.includes(v);
  if (typeof v === 'number') return msg.includes(`${v} ${key}`) || (key.endsWith('s') && msg.includes(`${v} ${key.slice(0, -1)}`));
  return false;
}

/** A bare word as it is; anything with spaces, quotes or `=` (and every non-string) as JSON. */
function value(v: unknown): string {
  if (typeof v === 'string' && v !== '' && !/[\s"=]/.test(v)) return printable(v);
  return printable(JSON.stringify(v) ?? String(v));
}

/**
 * Control characters shown as escapes: what an upstream prints must not drive the person's
 * terminal (move the cursor, rewrite earlier lines, change its title). For every place that
 * prints an upstream's words to a person (the pretty log, `mcpmux status`, `check --probe`).
 */
export function printable(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** The local time of day of pino's ISO timestamp (a person's terminal is in their own zone). */
function clock(t: unknown): string {
  if (typeof t !== 'string' && typeof t !== 'number') return '';
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return '';
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}
