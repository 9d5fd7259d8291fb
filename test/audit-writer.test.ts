// The audit line built by hand (src/observe/audit-line.ts), on the real AuditLog writing a real
// file, fed by the real request events: the same bytes pino wrote for the same record, every
// hostile string back intact through JSON.parse, secrets and redacted values nowhere, and (on
// the real binary) not one line lost when a loaded stdio session is stopped with SIGTERM.

import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { NO_CLIENT } from '../src/config/types.js';
import { parseJson, restoreBigNumbers } from '../src/jsonrpc/big-numbers.js';
import { AuditLog } from '../src/observe/audit.js';
import { AuditFile } from '../src/observe/audit-file.js';
import { IsoTimes, millisJson } from '../src/observe/audit-line.js';
import { endRequest, startHostRequest, startServerRequest, type RequestEvent } from '../src/observe/events.js';
import { createLogger, makeScrubber } from '../src/observe/logger.js';
import { closeAll, fixture, startRawMux, tempFile, WAIT_MS, waitFor, writeConfig } from './helpers/harness.js';

afterEach(closeAll);
const BUSY_MS = 4 * WAIT_MS;

const SECRET = 'audit-writer-secret-5c1d';
const HOSTILE = ['quote " and \\ backslash', 'nul \u0000 bell \u0007 del \u007f', 'line\nbreak\r\ttab', 'sep \u2028 \u2029', 'naïve 日本 🎉', 'lone \ud800 surrogate', '</script>', ''];

function lines(path: string): string[] {
  const text = readFileSync(path, 'utf8');
  expect(text.endsWith('\n')).toBe(true);
  return text.split('\n').slice(0, -1);
}

/** The line pino wrote for the same record before (audit.ts up to issue 23), as the reference. */
function pinoLine(record: Record<string, unknown>, secrets: string[]): string {
  let out = '';
  const sink = new Writable({ write: (c, _e, cb) => ((out += c.toString()), cb()) });
  const scrub = makeScrubber(secrets)!;
  const p = pino({ base: null, timestamp: false, formatters: { level: () => ({ v: 1 }) }, hooks: { streamWrite: (l: string) => scrub(restoreBigNumbers(l)) } }, { write: (s: string) => sink.write(s) } as never);
  p.info(record);
  return out;
}

const REDACTED = '[REDACTED]';
function redactAll(v: unknown): unknown {
  if (typeof v !== 'object' || v === null) return REDACTED;
  if (Array.isArray(v)) return v.map(redactAll);
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, redactAll(x)]));
}

/** The record audit.ts handed pino for a request event. */
function oldRecord(ev: RequestEvent, args: unknown): Record<string, unknown> {
  return {
    time: new Date(ev.startTime).toISOString(),
    direction: ev.direction,
    client: ev.client ?? NO_CLIENT,
    session: ev.sessionId,
    transport: ev.transport,
    method: ev.method,
    id: ev.requestId,
    server: ev.server,
    name: ev.name,
    upstreamName: ev.upstreamName,
    outcome: ev.outcome,
    code: ev.code,
    retryAfterMs: ev.retryAfterMs,
    durationMs: Math.round(ev.durationMs * 1000) / 1000,
    ...(ev.rounds > 1 && { rounds: ev.rounds }),
    ...(ev.direction === 'host-to-server' && { bytesIn: ev.bytesIn, bytesOut: ev.bytesOut }),
    arguments: args === undefined ? undefined : redactAll(args),
  };
}

describe('the hand-built audit line', () => {
  it('is byte for byte what pino wrote, parses back to every hostile string, and carries no secret or redacted value', async () => {
    const path = tempFile('audit.jsonl');
    const audit = new AuditLog({ path, arguments: 'redacted', redact: [], secrets: [SECRET], log: createLogger('silent') });
    audit.start();
    const events: { ev: RequestEvent; args: unknown }[] = [];
    const session = { id: 'sess-1', client: 'ci', transport: 'stdio' as const };
    // A big id (kept as its digits), a string id, hostile names, nested arguments, an error, a limit.
    const big = parseJson('{"id": 123456789012345678901234567890}') as { id: string };
    const cases: [string | number, string, Record<string, unknown> | undefined, object][] = [
      [1, 'tools/call', { name: 'gh__search', arguments: { q: 'find me', n: 3, deep: { list: [1, 'two', { three: null }], flag: true } } }, { result: { content: [] } }],
      [big.id, 'tools/call', { name: 'gh__big', arguments: {} }, { error: { code: -32603, message: 'x' } }],
      ['str-id "quoted"', 'prompts/get', { name: 'p', arguments: { [`key ${SECRET}`]: `value ${SECRET}` } }, { result: { isError: true } }],
      [2, 'tools/list', undefined, { result: { tools: [] } }],
      ...HOSTILE.map((h, i): [number, string, Record<string, unknown>, object] => [10 + i, 'tools/call', { name: h, arguments: { [h]: h, arr: [h] } }, { result: {} }]),
    ];
    for (const [id, method, params, answer] of cases) {
      const ev = startHostRequest(session, method, id, params, 100 + JSON.stringify(params ?? {}).length)!;
      ev.server = 'gh';
      ev.name = params?.name as string | undefined;
      ev.upstreamName = ev.name === undefined ? undefined : `up-${ev.name}`;
      if (id === 2) (ev.outcome = 'limited'), (ev.retryAfterMs = 1500);
      events.push({ ev, args: params?.arguments });
      endRequest(ev, { jsonrpc: '2.0', id, ...answer } as never, 321);
    }
    // A server-initiated request no session could take: no session, no transport, no bytes.
    const up = startServerRequest(undefined, 'sampling/createMessage', 7, { messages: [] }, 'gh')!;
    events.push({ ev: up, args: undefined });
    endRequest(up, { jsonrpc: '2.0', id: 7, error: { code: -32601, message: 'no' } } as never, 0);
    await audit.close();

    const got = lines(path);
    expect(got).toHaveLength(events.length);
    got.forEach((line, i) => {
      const { ev, args } = events[i]!;
      const parsed = JSON.parse(line);
      // Every value comes back as it was given, hostile or not (secrets aside).
      expect(parsed.name).toBe(ev.name?.includes(SECRET) ? undefined : ev.name);
      expect(Object.keys(parsed)[0]).toBe('v');
      if (ev.method === 'tools/call' || ev.method === 'prompts/get') {
        expect(JSON.stringify(parsed.arguments)).not.toMatch(/find me|value|"two"|true|null/);
        if (!JSON.stringify(args).includes(SECRET)) expect(parsed.arguments).toEqual(redactAll(args));
      }
      // The bytes pino wrote, except a raw lone surrogate (pino wrote it raw, the disk got U+FFFD).
      if (!line.includes('\\ud800')) expect(line + '\n').toBe(pinoLine(oldRecord(ev, ev.direction === 'host-to-server' && /call|get/.test(ev.method) ? args : undefined), [SECRET]));
    });
    expect(JSON.parse(got[1]!).id).toBe(123456789012345678901234567890);
    expect(got[1]).toContain('"id":123456789012345678901234567890,');
    expect(got[HOSTILE.indexOf('lone \ud800 surrogate') + 4]).toContain('\\ud800');
    expect(JSON.parse(got.at(-1)!)).toMatchObject({ direction: 'server-to-host', client: 'none', method: 'sampling/createMessage', server: 'gh', outcome: 'error', code: -32601 });
    const text = readFileSync(path, 'utf8');
    expect(text).not.toContain(SECRET);
    expect(text).toContain(`"key [REDACTED]":"[REDACTED]"`);
  });

  it('writes durations and times as String() and toISOString() do, from integers', () => {
    let seed = 11;
    const rand = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    const durations = [0, -0, 0.0004, 0.0005, 0.001, 0.01, 0.1, 0.15, 1, 1.05, 1.005, 1.5, 999.9995, 1e6 + 0.001, 123456789.123, 2 ** 31 + 0.5, 9e11, 1e12 - 0.001, 1e12, 5e14];
    for (let i = 0; i < 20000; i++) durations.push(rand() * 10 ** Math.floor(rand() * 13));
    for (const d of durations) expect(millisJson(d)).toBe(String(Math.round(d * 1000) / 1000));
    // Off the fast path: negative, not finite, huge.
    for (const d of [-1.5, NaN, Infinity, 1e20]) expect(millisJson(d)).toBe(JSON.stringify(Math.round(d * 1000) / 1000));

    const times = new IsoTimes();
    const epochs = [0, 1, 999, 1000, 1001, Date.UTC(2026, 10, 26, 23, 59, 59, 999), Date.UTC(2026, 10, 27), 253402300799999, 253402300800000];
    let t = Date.UTC(2026, 10, 26, 17, 0, 0, 0);
    for (let i = 0; i < 5000; i++) epochs.push((t += Math.floor(rand() * 3)), t);
    for (const ms of epochs) expect(times.text(ms)).toBe(new Date(ms).toISOString());
  });

  it('reuses its chunk buffers: a steady trickle of lines allocates none after the first two', async () => {
    const path = tempFile('trickle.jsonl');
    const file = new AuditFile(path, { onLoss: (why) => expect.fail(why) });
    const chunks: number[] = [];
    const alloc = Buffer.allocUnsafe;
    Buffer.allocUnsafe = (n: number) => (n >= 256 * 1024 && chunks.push(n), alloc(n));
    try {
      // Each line waits for the one before it to reach the disk (a flush, then a write), so
      // writes end before the next line arrives: the case that dropped a buffer each time.
      const line = `${'x'.repeat(200)}\n`;
      for (let i = 1; i <= 30; i++) {
        file.write(line);
        await waitFor(() => readFileSync(path).length === i * line.length, { what: `line ${i} written` });
      }
    } finally {
      Buffer.allocUnsafe = alloc;
    }
    await file.close();
    expect(chunks.length).toBeLessThanOrEqual(2);
  });

  it('keeps a `__proto__` argument key (pino\'s copy dropped it) and cuts nesting at 32 levels', async () => {
    const path = tempFile('audit.jsonl');
    const audit = new AuditLog({ path, arguments: 'redacted', redact: [], secrets: [], log: createLogger('silent') });
    audit.start();
    let deep: unknown = 'bottom';
    for (let i = 0; i < 1000; i++) deep = { d: deep };
    const params = { name: 't', arguments: { ...(JSON.parse('{"__proto__": {"polluted": 1}}') as object), deep } };
    const ev = startHostRequest({ id: 's', client: 'c', transport: 'stdio' }, 'tools/call', 1, params, 10)!;
    endRequest(ev, { jsonrpc: '2.0', id: 1, result: {} } as never, 10);
    await audit.close();
    const [line] = lines(path);
    const parsed = JSON.parse(line!);
    expect(Object.hasOwn(parsed.arguments, '__proto__')).toBe(true);
    expect(parsed.arguments.__proto__).toEqual({ polluted: REDACTED });
    let d = parsed.arguments.deep;
    let depth = 1;
    while (typeof d === 'object') (d = d.d), depth++;
    expect([d, depth]).toEqual([REDACTED, 32]);
  });

  it('the real binary under load: SIGTERM leaves one complete line per answered call', async () => {
    const path = tempFile('audit.jsonl');
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) }, audit: { path, arguments: 'redacted' } }));
    await peer.request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'audit-writer', version: '0' } }, BUSY_MS);
    peer.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    // Bounds for a loaded machine: start-up alone has taken over 15 s with 40 runnable processes.
    await waitFor(async () => (await peer.request('tools/list', {}, BUSY_MS)).result.tools.some((t: { name: string }) => t.name === 'fx__echo'), { what: 'fx listed', timeoutMs: BUSY_MS });
    const N = 400;
    const answers = await Promise.all(Array.from({ length: N }, (_, i) => peer.request('tools/call', { name: 'fx__echo', arguments: { i, s: `"\\${i}` } }, BUSY_MS)));
    expect(answers.every((a) => a.result && !a.result.isError)).toBe(true);
    peer.child.kill('SIGTERM');
    expect((await peer.exited).code).toBe(0);
    const calls = lines(path).map((l) => JSON.parse(l)).filter((l) => l.method === 'tools/call');
    expect(calls).toHaveLength(N);
    expect(new Set(calls.map((l) => l.id)).size).toBe(N);
    expect(calls.every((l) => l.outcome === 'ok' && l.arguments.i === REDACTED && l.arguments.s === REDACTED)).toBe(true);
  });
});
