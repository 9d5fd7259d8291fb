// The audit log: one JSON line per host request and per server-initiated request, and one per
// operator action (a restart asked over HTTP, a config reload), built by hand (audit-line.ts:
// the bytes pino used to write, at a fraction of the cost) into its own file (audit-file.ts),
// never to the log. It listens on the bus (events.ts); nothing on the data path
// calls it. Every field is documented in the README ("Audit log").
//
// Arguments (of tools/call and prompts/get) are left out by default; `redacted` keeps their
// keys and replaces every value; `full` keeps them but replaces the values at `redact` paths.
// In every mode each line is scrubbed of the config's secrets (secret ${VAR} values, header
// values, secret-named env values, tokens: Config.secrets), the way log lines are.

import dc from 'node:diagnostics_channel';
import { ANONYMOUS_CLIENT, NO_CLIENT } from '../config/types.js';
import { restoreBigNumbers } from '../jsonrpc/big-numbers.js';
import { materialise } from '../jsonrpc/opaque.js';
import { AuditFile } from './audit-file.js';
import type { AuditRing } from './audit-ring.js';
import { IsoTimes, jsonValue, millisJson, quote, recordLine, REDACTED, redactedJson } from './audit-line.js';
import { CHANNEL, publishAuditError, type ConfigReloadEvent, type OperatorActionEvent, type RequestEvent } from './events.js';
import { makeScrubber, type Logger } from './logger.js';

export interface AuditOptions {
  path: string;
  arguments: 'none' | 'redacted' | 'full';
  redact: readonly string[];
  secrets: readonly string[];
  log: Logger;
  /** Gets every line as the file does (the web console's last lines): formatted and scrubbed. */
  ring?: AuditRing;
}

/** The `v` of every line: bumped if a field changes meaning or goes away (new fields do not bump it). */
const AUDIT_FORMAT = 1;
/**
 * How every line starts. The audit line is its own record, not a log entry: no level, no
 * message. It starts with the version of its format instead (`v`), for whoever parses it.
 */
const PREFIX = `{"v":${AUDIT_FORMAT}`;
const REQUEST_PREFIX = `${PREFIX},"time":"`;
/** A disk that keeps failing is reported this often in the log (the metric counts every line). */
const LOSS_LOG_MS = 5000;
/** Arguments nested deeper than this are cut (a hostile host can nest thousands deep). */
const MAX_DEPTH = 32;

export class AuditLog {
  private readonly file: AuditFile;
  /** Applied to each whole line: big ids and arguments back to their digits, then the config's secrets out. */
  private readonly finish: (line: string) => string;
  private readonly ring: AuditRing | undefined;
  private readonly redactPaths: string[][];
  /** The last session's `"client":…,"session":…,"transport":…` (under load, line after line is the same session's). */
  private who = { client: '', session: undefined as string | undefined, transport: undefined as string | undefined, json: '' };
  private readonly onEnd = (msg: unknown): void => this.record(msg as RequestEvent);
  private readonly onAction = (msg: unknown): void => this.operator(msg as OperatorActionEvent);
  private readonly onReload = (msg: unknown): void => this.reload(msg as ConfigReloadEvent);
  private lost = 0;
  private lastLossLog = 0;
  private readonly times = new IsoTimes();

  /** Opens the file; throws (with the reason) when it cannot be opened. */
  constructor(private readonly opts: AuditOptions) {
    this.file = new AuditFile(opts.path, { onLoss: (why, lines) => this.loss(why, lines) });
    const scrub = makeScrubber(opts.secrets);
    // Ids and arguments too big for a double are written as their digits, as they arrived.
    this.finish = scrub ? (line: string) => scrub(restoreBigNumbers(line)) : restoreBigNumbers;
    this.ring = opts.ring;
    this.redactPaths = opts.redact.map((p) => p.split('.'));
  }

  start(): void {
    dc.subscribe(CHANNEL.requestEnd, this.onEnd);
    dc.subscribe(CHANNEL.operatorAction, this.onAction);
    dc.subscribe(CHANNEL.configReload, this.onReload);
  }

  /** For logrotate: a renamed file is left behind complete, and a new one started. */
  reopen(): void {
    this.file.reopen();
    this.opts.log.info({ path: this.opts.path }, 'audit log reopened');
  }

  /** Stops listening and writes out every line still queued. */
  async close(): Promise<void> {
    dc.unsubscribe(CHANNEL.requestEnd, this.onEnd);
    dc.unsubscribe(CHANNEL.operatorAction, this.onAction);
    dc.unsubscribe(CHANNEL.configReload, this.onReload);
    await this.file.close();
  }

  private record(ev: RequestEvent): void {
    // A retry of a call mcpmux answered input_required: the call gets one line, when it ends.
    if (ev.roundOf) return;
    try {
      // The fields of the README's table, in its order; undefined ones are left out.
      let line = REQUEST_PREFIX + this.times.text(ev.startTime) + (ev.direction === 'host-to-server' ? '","direction":"host-to-server",' : '","direction":"server-to-host",');
      line += this.whoJson(ev.client ?? NO_CLIENT, ev.sessionId, ev.transport);
      line += ',"method":' + quote(ev.method);
      line += field(',"id":', ev.requestId) + field(',"server":', ev.server) + field(',"name":', ev.name) + field(',"upstreamName":', ev.upstreamName);
      line += field(',"outcome":', ev.outcome) + field(',"code":', ev.code) + field(',"retryAfterMs":', ev.retryAfterMs);
      line += ',"durationMs":' + millisJson(ev.durationMs);
      // A call that took several requests (input_required, then the host's retries).
      if (ev.rounds > 1) line += ',"rounds":' + jsonValue(ev.rounds);
      if (ev.direction === 'host-to-server') line += ',"bytesIn":' + jsonValue(ev.bytesIn) + ',"bytesOut":' + jsonValue(ev.bytesOut);
      const args = this.argumentsOf(ev);
      if (args !== undefined) line += ',"arguments":' + args;
      this.put(line + '}\n');
    } catch (err) {
      this.loss(`cannot write an audit line: ${(err as Error).message}`, 1);
    }
  }

  /** `"client":…,"session":…,"transport":…` (those defined), kept while the session is the same. */
  private whoJson(client: string, session: string | undefined, transport: string | undefined): string {
    const w = this.who;
    if (w.client !== client || w.session !== session || w.transport !== transport) {
      this.who = { client, session, transport, json: '"client":' + quote(client) + field(',"session":', session) + field(',"transport":', transport) };
    }
    return this.who.json;
  }

  /** An operator action asked over HTTP: who, what, on which server, and the answer. */
  private operator(ev: OperatorActionEvent): void {
    this.write({
      time: this.times.text(Date.now()),
      direction: 'operator',
      // No tokens configured: the caller is `anonymous`, as hosts are then.
      client: ev.client ?? ANONYMOUS_CLIENT,
      action: ev.action,
      server: ev.target,
      tool: ev.tool,
      outcome: ev.outcome,
      status: ev.status,
      remote: ev.remote,
    });
  }

  /** A reload (SIGHUP or the watched file): the operator's change of the config, applied or refused. */
  private reload(ev: ConfigReloadEvent): void {
    const applied = ev.result === 'applied';
    this.write({
      time: this.times.text(Date.now()),
      direction: 'operator',
      action: 'reload',
      trigger: ev.trigger,
      outcome: applied ? 'ok' : 'error',
      file: ev.file,
      ...(applied ? { added: ev.added, removed: ev.removed, restarted: ev.restarted, updated: ev.updated, needsRestart: ev.needsRestart } : { error: ev.error }),
    });
  }

  private write(fields: Record<string, unknown>): void {
    try {
      this.put(recordLine(PREFIX, fields));
    } catch (err) {
      this.loss(`cannot write an audit line: ${(err as Error).message}`, 1);
    }
  }

  /** A whole line (with its newline) to the file, big numbers restored and secrets scrubbed. */
  private put(line: string): void {
    const done = this.finish(line);
    // The console's ring gets the very line the file gets: formatted, scrubbed.
    this.ring?.push(done);
    this.file.write(done);
  }

  /** The `arguments` field's JSON, or undefined when the line has none. */
  private argumentsOf(ev: RequestEvent): string | undefined {
    if (this.opts.arguments === 'none' || ev.direction !== 'host-to-server') return undefined;
    if (ev.method !== 'tools/call' && ev.method !== 'prompts/get') return undefined;
    const args = ev.params?.arguments;
    if (args === undefined) return undefined;
    if (this.opts.arguments === 'redacted') return redactedJson(args, 0, MAX_DEPTH);
    // The request has been answered: decoding its long values now costs the audit only.
    return jsonValue(fullArguments(ev.params!, this.redactPaths));
  }

  /** Counted every time; logged at most every LOSS_LOG_MS, with what was lost meanwhile. */
  private loss(why: string, lines: number): void {
    publishAuditError({ error: why, lines });
    this.lost += lines;
    const now = Date.now();
    if (now - this.lastLossLog < LOSS_LOG_MS) return;
    this.lastLossLog = now;
    this.opts.log.error({ path: this.opts.path, lines: this.lost }, why);
    this.lost = 0;
  }
}

/**
 * The arguments of an answered request as `audit.arguments: "full"` keeps them (traces too):
 * its long values decoded, a copy cut at MAX_DEPTH, the redacted paths (split at '.') replaced.
 */
export function fullArguments(params: Record<string, unknown>, paths: readonly (readonly string[])[]): unknown {
  materialise(params);
  const copy = copyBounded(params.arguments, 0);
  for (const p of paths) redactPath(copy, p, 0);
  return copy;
}

/** A copy to redact in, cut at MAX_DEPTH. */
function copyBounded(v: unknown, depth: number): unknown {
  if (typeof v !== 'object' || v === null) return v;
  if (depth >= MAX_DEPTH) return '[TOO DEEP]';
  if (Array.isArray(v)) return v.map((x) => copyBounded(x, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = copyBounded(x, depth + 1);
  return out;
}

/** Replaces the value(s) at `path` (segments; `*` is any key or index) in place. */
function redactPath(v: unknown, path: readonly string[], i: number): void {
  if (typeof v !== 'object' || v === null) return;
  const obj = v as Record<string, unknown>;
  const seg = path[i]!;
  const last = i === path.length - 1;
  const keys = seg === '*' ? Object.keys(obj) : Object.hasOwn(obj, seg) ? [seg] : [];
  for (const k of keys) {
    if (last) obj[k] = REDACTED;
    else redactPath(obj[k], path, i + 1);
  }
}

/** `,"key":value` for a defined value, else nothing (as pino left undefined fields out). */
function field(keyJson: string, v: unknown): string {
  const value = jsonValue(v);
  return value === undefined ? '' : keyJson + value;
}
