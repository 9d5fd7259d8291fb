// Issue 23, target 1: a plain tools/call result goes back to the host as the text the upstream
// wrote, with the host's id spliced around it (jsonrpc/raw-result.ts), instead of being parsed
// and written again. What the host receives must mean exactly what the parse path gave it:
// - the scan accepts only what JSON.parse accepts (a differential check against it, on valid
//   results and on thousands of broken ones), and reads isError and the keys mcpmux rewrites;
// - only a request that asked gets a raw result, and never one that holds such a key;
// - through the real binary: ids exact (string, number, big number), escapes and numbers as the
//   upstream wrote them (the same JSON as the parse path, and the same bytes when the upstream
//   writes as JSON.stringify does), tool errors, resource links namespaced as before, an error
//   response, a 2026-07-28 upstream, an older host, a result over the size limit.

import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJson, restoreBigNumbers } from '../src/jsonrpc/big-numbers.js';
import { encodeMessage, LineDecoder, type Frame } from '../src/jsonrpc/framing.js';
import { PendingTable } from '../src/jsonrpc/pending.js';
import { RawResult, scanResponse } from '../src/jsonrpc/raw-result.js';
import { ROOT, startRawMux, writeConfig, type RawPeer } from './helpers/harness.js';

const VERBATIM = { command: process.execPath, args: [path.join(ROOT, 'test/fixtures/verbatim-upstream.mjs')] };
const MODERN = { command: process.execPath, args: [path.join(ROOT, 'test/fixtures/modern-upstream.mjs'), 'stdio', '{}'] };

/** Results as upstreams write them. `canonical`: written as JSON.stringify would (the parse path then gives the same bytes). */
const RESULTS: { what: string; text: string; canonical: boolean }[] = [
  { what: 'plain text', text: '{"content":[{"type":"text","text":"hello from the benchmark"}]}', canonical: true },
  { what: 'unicode as UTF-8', text: '{"content":[{"type":"text","text":"héllo wörld ✓ 😀 \u2028 tab\\tquote\\" backslash\\\\ nl\\n"}]}', canonical: true },
  { what: 'unicode as escapes', text: '{"content":[{"type":"text","text":"h\\u00e9llo \\ud83d\\ude00 \\/ \\u0001"}]}', canonical: false },
  { what: 'spacing and number forms', text: '{ "content" : [ {"type":"text","text":"n"} ] , "structuredContent": {"a": 1.0, "b": -1.50, "c": 1E5, "d": 0.1, "e": [true,false,null], "f": {}} }', canonical: false },
  { what: 'big numbers', text: '{"content":[],"structuredContent":{"big":12345678901234567890,"huge":1e400,"neg":-98765432109876543210}}', canonical: true },
  { what: 'isError', text: '{"content":[{"type":"text","text":"it failed"}],"isError":true}', canonical: true },
  { what: 'isError false and _meta', text: '{"content":[],"isError":false,"_meta":{"x":{"y":[1,2,{"isError":true}]}}}', canonical: true },
];

/** The keys raw-result.ts must notice, at any depth. */
const READ_KEYS = ['uri', 'task', 'taskId', 'elicitationId', 'resultType', 'inputRequests', 'requestState', 'io.modelcontextprotocol/related-task'];
function holdsReadKey(v: unknown): boolean {
  if (typeof v !== 'object' || v === null) return false;
  return Object.entries(v).some(([k, x]) => (!Array.isArray(v) && READ_KEYS.includes(k)) || holdsReadKey(x));
}

describe('scanResponse: what it accepts, JSON.parse accepts and reads the same', () => {
  const envelope = (result: string, layout: 'sdk' | 'python' = 'sdk', id = '7') =>
    layout === 'sdk' ? `{"result":${result},"jsonrpc":"2.0","id":${id}}` : `{"jsonrpc":"2.0","id":${id},"result":${result}}`;

  it('keeps every result above as its own text, in both member orders, with its id', () => {
    for (const { text } of RESULTS) {
      for (const layout of ['sdk', 'python'] as const) {
        const scanned = scanResponse(envelope(text, layout));
        expect(scanned, text).toBeDefined();
        expect(scanned!.id).toBe(7);
        expect(scanned!.result.text).toBe(text);
        expect(scanned!.result.read).toBe(false);
        // The parse path's value, whatever reads it later (toJSON too).
        expect(scanned!.result.parse()).toEqual(parseJson(text));
        expect(restoreBigNumbers(JSON.stringify(scanned!.result))).toBe(restoreBigNumbers(JSON.stringify(parseJson(text))));
      }
    }
  });

  it('reads the top-level isError as JSON.parse would (the last one; a boolean only), and nothing nested', () => {
    const isError = (result: string) => scanResponse(envelope(result))?.result.isError;
    expect(isError('{"isError":true}')).toBe(true);
    expect(isError('{"isError":false}')).toBe(false);
    expect(isError('{"content":[]}')).toBeUndefined();
    expect(isError('{"isError":"true"}')).toBeUndefined();
    expect(isError('{"isError":{"a":true}}')).toBeUndefined();
    expect(isError('{"isError":true,"isError":false}')).toBe(false);
    expect(isError('{"a":{"isError":true}}')).toBeUndefined();
    expect(isError('{"is\\u0045rror":true}')).toBe(true);
  });

  it('marks a result holding a key mcpmux reads or rewrites, at any depth and however spelt', () => {
    const read = (result: string) => scanResponse(envelope(result))!.result.read;
    expect(read('{"content":[{"type":"resource_link","uri":"file:///a","name":"a"}]}')).toBe(true);
    expect(read('{"content":[{"type":"resource","resource":{"uri":"file:///a","text":"x"}}]}')).toBe(true);
    expect(read('{"content":[{"type":"resource_link","\\u0075ri":"file:///a"}]}')).toBe(true);
    expect(read('{"task":{"taskId":"t1","status":"working"}}')).toBe(true);
    expect(read('{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t1"}},"content":[]}')).toBe(true);
    expect(read('{"resultType":"input_required","inputRequests":{}}')).toBe(true);
    // A URI in a value, or a longer key, is not one.
    expect(read('{"content":[{"type":"text","text":"\\"uri\\": file:///a"}],"uris":1,"url":"x"}')).toBe(false);
  });

  it('leaves every other message, and results nested too deep, to the parse path', () => {
    for (const line of [
      '{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"no"}}',
      '{"jsonrpc":"2.0","method":"notifications/progress","params":{}}',
      '{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}}',
      '{"jsonrpc":"2.0","id":"7","result":{}}',
      '{"jsonrpc":"2.0","id":7.5,"result":{}}',
      '{"jsonrpc":"2.0","id":12345678901234567890,"result":{}}',
      '{"jsonrpc":"2.0","id":07,"result":{}}',
      '{"jsonrpc":"2.0","id":7,"result":[]}',
      '{"jsonrpc":"2.0","id":7,"result":{},"extra":1}',
      '{"jsonrpc":"2.0","id":7,"result":{},"result":{}}',
      '{"jsonrpc":"2.0","id":7,"id":8,"result":{}}',
      '{"jsonrpc":"1.0","id":7,"result":{}}',
      '{"jsonrpc":"2.0","\\u0069d":7,"result":{}}',
      '{"id":7,"result":{}}',
      '[{"jsonrpc":"2.0","id":7,"result":{}}]',
      // A carriage return between tokens is JSON whitespace, but passed on it would end an SSE
      // line (and a line for readers that split on CR): parsed, and written without it.
      '{"jsonrpc":"2.0","id":7,"result":{"content":[],\r"isError":false}}',
      '{"jsonrpc":"2.0",\r"id":7,"result":{}}',
    ]) {
      expect(scanResponse(line), line).toBeUndefined();
    }
    // Valid JSON, but deeper than the scan goes.
    const deep = envelope(`{"a":${'['.repeat(200)}${']'.repeat(200)}}`);
    expect(JSON.parse(deep).id).toBe(7);
    expect(scanResponse(deep)).toBeUndefined();
  });

  it('never accepts what JSON.parse refuses: thousands of broken results', () => {
    // Every one-character deletion, insertion and substitution of a few results, plus known traps.
    const seeds = [RESULTS[1]!.text, RESULTS[2]!.text, RESULTS[3]!.text, RESULTS[4]!.text, '{"content":[{"type":"resource_link","uri":"f","name":"a"}],"isError":true,"task":{"taskId":"t"}}'];
    const alphabet = ['"', '\\', '{', '}', '[', ']', ',', ':', ' ', '0', '-', '.', 'e', 'u', 't', 'n', '\u0001', '\u0000'];
    const broken = new Set<string>(['{"a":01}', '{"a":1.}', '{"a":.5}', '{"a":-}', '{"a":1e}', '{"a":+1}', '{"a":tru}', '{"a":nul}', '{"a":"\\x"}', '{"a":"\\u12g4"}', "{'a':1}", '{"a":1,}', '{"a" 1}', '{"a":[1,]}', '{"a":NaN}', '{"a":"x\ty"}', '{a:1}', '{"a":1}}', '{"a":[}']);
    for (const seed of seeds) {
      for (let i = 0; i < seed.length; i++) {
        broken.add(seed.slice(0, i) + seed.slice(i + 1));
        for (const c of alphabet) {
          broken.add(seed.slice(0, i) + c + seed.slice(i));
          broken.add(seed.slice(0, i) + c + seed.slice(i + 1));
        }
      }
    }
    let accepted = 0;
    let refusedByParse = 0;
    for (const result of broken) {
      const line = envelope(result);
      let parsed: any;
      try {
        parsed = JSON.parse(line);
      } catch {
        parsed = undefined;
        refusedByParse++;
      }
      const scanned = scanResponse(line);
      if (!scanned) continue;
      accepted++;
      expect(parsed, `accepted what JSON.parse refuses: ${line}`).toBeDefined();
      expect(JSON.parse(scanned.result.text), line).toEqual(parsed.result);
      expect(scanned.result.isError).toBe(typeof parsed.result.isError === 'boolean' ? parsed.result.isError : undefined);
      expect(scanned.result.read, line).toBe(holdsReadKey(parsed.result));
    }
    // The check checked something both ways.
    expect(accepted).toBeGreaterThan(100);
    expect(refusedByParse).toBeGreaterThan(1000);
  });
});

describe('the decoder and the pending table hand a raw result only to the request that asked', () => {
  const frames = (lines: string[], raw: boolean): Frame[] => {
    const out: Frame[] = [];
    const d = new LineDecoder(1 << 20);
    d.rawResults = () => raw;
    d.push(Buffer.from(lines.map((l) => l + '\n').join('')), (f) => out.push(f));
    return out;
  };

  it('decodes as before unless a raw result is wanted', () => {
    const line = `{"result":${RESULTS[0]!.text},"jsonrpc":"2.0","id":3}`;
    expect((frames([line], false)[0] as { value: any }).value).toEqual(JSON.parse(line));
    const value = (frames([line], true)[0] as { value: any }).value;
    expect(value.result).toBeInstanceOf(RawResult);
    expect(value.id).toBe(3);
    // A broken line is still the parse error it always was.
    expect(frames(['{"result":{"a":01},"jsonrpc":"2.0","id":3}'], true)[0]).toMatchObject({ ok: false, error: 'parse' });
  });

  it('settles: raw for a request that asked, parsed for one that did not or when a rewritten key is in it', async () => {
    const t = new PendingTable(() => {});
    const asked = t.add(1, { raw: true });
    const other = t.add(2, {});
    const linked = t.add(3, { raw: true });
    expect(t.rawWaiting).toBe(true);
    const [a, b, c] = frames(
      [`{"result":${RESULTS[0]!.text},"jsonrpc":"2.0","id":1}`, `{"result":${RESULTS[0]!.text},"jsonrpc":"2.0","id":2}`, '{"result":{"content":[{"type":"resource_link","uri":"file:///a","name":"a"}]},"jsonrpc":"2.0","id":3}'],
      true,
    ) as { value: any }[];
    for (const f of [a!, b!, c!]) t.settle(f.value);
    expect(await asked).toBeInstanceOf(RawResult);
    expect(await other).toEqual(JSON.parse(RESULTS[0]!.text));
    expect(await linked).toEqual({ content: [{ type: 'resource_link', uri: 'file:///a', name: 'a' }] });
    expect(t.rawWaiting).toBe(false);
  });

  it('writes the host id around the text: string, number and big-number ids exact', () => {
    const raw = scanResponse(`{"result":${RESULTS[4]!.text},"jsonrpc":"2.0","id":1}`)!.result;
    const bigId = (parseJson('{"id":12345678901234567890}') as { id: unknown }).id;
    for (const [id, written] of [['é-1', '"é-1"'], [42, '42'], [bigId, '12345678901234567890']] as const) {
      const spliced = encodeMessage({ jsonrpc: '2.0', id, result: raw });
      expect(spliced).toBe(`{"jsonrpc":"2.0","id":${written},"result":${RESULTS[4]!.text}}`);
      // Byte for byte what the parse path writes for the same message.
      expect(spliced).toBe(encodeMessage({ jsonrpc: '2.0', id, result: raw.parse() }));
    }
  });
});

describe('through mcpmux stdio', () => {
  let host: RawPeer;
  /** A 2025-03-26 host: its results are adapted (resource links become text), so it always takes the parse path. */
  let older: RawPeer;

  beforeAll(async () => {
    const limits = { maxMessageBytes: 64 * 1024 };
    host = startRawMux(await writeConfig({ mcpServers: { vb: VERBATIM, mo: MODERN }, limits }));
    older = startRawMux(await writeConfig({ mcpServers: { vb: VERBATIM }, limits }));
    await Promise.all([
      host.request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'splice', version: '0' } }, 30_000),
      older.request('initialize', { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'splice-old', version: '0' } }, 30_000),
    ]);
    for (const p of [host, older]) p.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  });

  afterAll(async () => {
    await Promise.all([host?.close(), older?.close()]);
  });

  /**
   * How mcpmux writes an id back: a number as its digits, exactly as sent (big ones too); a
   * string as JSON.stringify writes its value (an id is a value, as with the parse path).
   */
  const idText = (literal: string) => (literal.startsWith('"') ? JSON.stringify(JSON.parse(literal)) : literal);

  /** Sends a tools/call with this id literal (as written) and returns the raw answer line. */
  async function call(peer: RawPeer, idLiteral: string, args: object, name = 'vb__reply'): Promise<string> {
    const before = peer.lines.length;
    peer.send(`{"jsonrpc":"2.0","id":${idLiteral},"method":"tools/call","params":${JSON.stringify({ name, arguments: args })}}`);
    await peer.next((m) => !('method' in m) && JSON.stringify(m.id) === JSON.stringify(JSON.parse(idLiteral)), 30_000);
    return peer.lines.slice(before).find((l) => l.startsWith(`{"jsonrpc":"2.0","id":${idText(idLiteral)},`))!;
  }

  it('a current host gets the upstream text with its own id: the same JSON as the parse path (an older host), the same bytes when written as JSON.stringify does', async () => {
    let n = 0;
    for (const { what, text, canonical } of RESULTS) {
      for (const layout of ['sdk', 'python']) {
        const id = String(++n);
        const [line, reference] = await Promise.all([call(host, id, { result: text, layout }), call(older, id, { result: text, layout })]);
        expect(line, what).toBe(`{"jsonrpc":"2.0","id":${id},"result":${text}}`);
        expect(parseJson(line), what).toEqual(parseJson(reference));
        if (canonical) expect(line, what).toBe(reference);
      }
    }
  });

  it('string, number and big-number ids come back exact', async () => {
    const text = RESULTS[0]!.text;
    for (const id of ['"s-é\\u00e9-\\"q\\""', '4242', '12345678901234567890', '-7', '1e400']) {
      expect(await call(host, id, { result: text })).toBe(`{"jsonrpc":"2.0","id":${idText(id)},"result":${text}}`);
    }
  });

  it('a tool error is passed on and counted as one; an error response stays an error', async () => {
    expect(await call(host, '"e1"', { result: RESULTS[5]!.text })).toBe(`{"jsonrpc":"2.0","id":"e1","result":${RESULTS[5]!.text}}`);
    const error = JSON.parse(await call(host, '"e2"', { error: '{"code":-32050,"message":"upstream says no","data":{"n":12345678901234567890}}' }));
    expect(error).toMatchObject({ id: 'e2', error: { code: -32050, message: 'upstream says no' } });
    expect(error.result).toBeUndefined();
  });

  it('resource links and embedded resources are read and namespaced as before, for every host', async () => {
    const text = '{"content":[{"type":"resource_link","uri":"file:///a.txt","name":"a"},{"type":"resource","resource":{"uri":"file:///b.txt","text":"b"}}]}';
    expect(JSON.parse(await call(host, '"r1"', { result: text })).result.content).toEqual([
      { type: 'resource_link', uri: 'vb+file:///a.txt', name: 'a' },
      { type: 'resource', resource: { uri: 'vb+file:///b.txt', text: 'b' } },
    ]);
    // An older host gets the link as text (it does not know resource_link), the embedded one namespaced.
    const old = JSON.parse(await call(older, '"r1"', { result: text })).result.content;
    expect(old[0]).toEqual({ type: 'text', text: 'Resource link: a <vb+file:///a.txt>' });
    expect(old[1]).toEqual({ type: 'resource', resource: { uri: 'vb+file:///b.txt', text: 'b' } });
  });

  it("a 2026-07-28 upstream's result is reshaped as before (no resultType, no serverInfo)", async () => {
    const answer = JSON.parse(await call(host, '"m1"', { text: 'hi' }, 'mo__echo'));
    expect(answer.result.content).toEqual([{ type: 'text', text: 'echo: hi' }]);
    expect(answer.result.resultType).toBeUndefined();
    expect(JSON.stringify(answer.result._meta ?? {})).not.toContain('serverInfo');
  });

  it('a result over the size limit is refused as before, and the next call is fine', async () => {
    const refused = JSON.parse(await call(host, '"big"', { pad: 70 * 1024 }));
    expect(refused.error.message).toMatch(/^Response too large: Message of \d+ bytes exceeds the limit/);
    expect(await call(host, '"after"', { result: RESULTS[0]!.text })).toBe(`{"jsonrpc":"2.0","id":"after","result":${RESULTS[0]!.text}}`);
  });
});
