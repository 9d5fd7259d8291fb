// Long string values kept as raw bytes (src/jsonrpc/opaque.ts): what is kept raw, what is not,
// and that the bytes written out are exactly the bytes read in.

import { describe, expect, it } from 'vitest';
import { encodeChunks, encodeMessage, parseBytes } from '../src/jsonrpc/framing.js';
import { decodeJson, materialise, MARK_JSON, OPAQUE, OPAQUE_MIN_LINE, opaqueSlices } from '../src/jsonrpc/opaque.js';
import { adaptForHost } from '../src/router/downgrade.js';

const LONG = 'a'.repeat(OPAQUE_MIN_LINE); // alone makes a line long enough to be scanned
// Every kind of escape, non-ASCII text, and text that looks like a placeholder of another process.
const TRICKY = `quote " backslash \\ slash / tab \t newline \n nul \u0000 é 漢字 🎉 \u0000mcpmux-000000000000-0 `.repeat(2000);

const bytes = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));
const wireBytes = (msg: unknown): Buffer => {
  const wire = encodeChunks(msg);
  return Buffer.concat((typeof wire === 'string' ? [wire] : wire).map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
};

function call(args: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'fx__echo', arguments: args, ...extra } };
}

describe('decodeJson', () => {
  it('a short line is plain JSON.parse: nothing is kept raw', () => {
    const v = decodeJson(bytes(call({ text: 'x'.repeat(20_000) }))) as any;
    expect(v.params.arguments.text).toBe('x'.repeat(20_000));
    expect(opaqueSlices(v.params)).toBeUndefined();
  });

  it('a long argument is kept raw, and written back byte for byte, escapes and all', () => {
    const input = bytes(call({ text: TRICKY, small: 'kept' }));
    const v = decodeJson(input) as any;
    expect(opaqueSlices(v.params)).toHaveLength(1);
    expect(v.params.arguments.text).not.toBe(TRICKY); // a placeholder
    expect(v.params.arguments.small).toBe('kept');
    expect(v.params.name).toBe('fx__echo');
    v.params.name = 'echo'; // what the router does
    v.id = 42;
    const out = wireBytes(v);
    expect(out.equals(bytes({ ...call({ text: TRICKY, small: 'kept' }), id: 42, params: { ...call({}).params, name: 'echo', arguments: { text: TRICKY, small: 'kept' } } }))).toBe(true);
    // The raw value is the very bytes that came in, not a copy.
    const wire = encodeChunks(v) as (string | Buffer)[];
    const raw = wire.find((p): p is Buffer => Buffer.isBuffer(p))!;
    expect(raw.buffer).toBe(input.buffer);
    expect(JSON.parse(encodeMessage(v)).params.arguments.text).toBe(TRICKY);
  });

  it('array elements and values nested deep are kept raw; results carry their slices too', () => {
    const msg = { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: LONG }], structuredContent: { list: [LONG, 'b'] } } };
    const v = decodeJson(bytes(msg)) as any;
    expect(opaqueSlices(v.result)).toHaveLength(2);
    expect(JSON.parse(encodeMessage(v))).toEqual(msg);
  });

  it('values of keys mcpmux reads (name, uri, type, cursor...) are always parsed, however long', () => {
    const longName = 'n'.repeat(OPAQUE_MIN_LINE);
    const msg = { jsonrpc: '2.0', id: 1, method: 'resources/read', params: { uri: `data:,${LONG}`, name: longName, cursor: LONG } };
    const v = decodeJson(bytes(msg)) as any;
    expect(opaqueSlices(v.params)).toBeUndefined();
    expect(v).toEqual(msg);
  });

  it('a key written with escapes ("na\\u006de") is recognised as the key it is', () => {
    const text = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"na\\u006de":"${LONG}"}}`;
    const v = decodeJson(Buffer.from(text)) as any;
    expect(v.params.name).toBe(LONG);
  });

  it('a long string outside params/result (an unknown envelope field) makes the whole message parse as usual', () => {
    const msg = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { arguments: { a: LONG } }, extra: { note: LONG } };
    const v = decodeJson(bytes(msg)) as any;
    expect(opaqueSlices(v.params)).toBeUndefined();
    expect(v).toEqual(msg);
  });

  it('a message with both params and result: a long value in the one that is not the payload makes it parse as usual', () => {
    const msg = { jsonrpc: '2.0', id: 1, method: 'x', params: { a: LONG }, result: { b: LONG } };
    const v = decodeJson(bytes(msg)) as any;
    expect(v).toEqual(msg);
    expect(opaqueSlices(v.params)).toBeUndefined();
  });

  it('a batch is parsed as usual', () => {
    const batch = [call({ text: LONG }), call({ text: LONG })];
    const v = decodeJson(bytes(batch)) as any[];
    expect(v).toEqual(batch);
    expect(opaqueSlices(v[0].params)).toBeUndefined();
  });

  it('a long string with a raw control character or a bad escape is a parse error, as JSON.parse would say', () => {
    for (const bad of [`${LONG}\u0001`, `${LONG}\t`, `${LONG}\\x41`, `${LONG}\\u12G4`, `\\${LONG}\\q`]) {
      const text = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"a":"${bad}"}}}`;
      const frame = parseBytes(Buffer.from(text));
      expect(frame.ok, bad.slice(-8)).toBe(false);
      expect(() => JSON.parse(text)).toThrow(); // and JSON.parse agrees
    }
  });

  it('a control character is found wherever it sits in a long value (every alignment, both ends)', () => {
    const size = OPAQUE_MIN_LINE + 37;
    for (const at of [...Array(80).keys(), size - 40, size - 9, size - 5, size - 2, size - 1]) {
      const value = 'v'.repeat(at) + '\u0001' + 'v'.repeat(size - at - 1);
      for (const pad of ['', 'p', 'pp', 'ppp']) {
        const text = `{"jsonrpc":"2.0","id":1,"method":"m","params":{"${pad}a":"${value}"}}`;
        expect(parseBytes(Buffer.from(text)).ok, `control byte at ${at}, key ${pad}a`).toBe(false);
      }
    }
  });

  it('invalid UTF-8 in a long string is decoded (U+FFFD), never passed on raw', () => {
    const head = Buffer.from(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"a":"${LONG}`);
    const input = Buffer.concat([head, Buffer.from([0xff, 0xfe]), Buffer.from('"}}}')]);
    const v = decodeJson(input) as any;
    expect(opaqueSlices(v.params)).toBeUndefined();
    expect(v.params.arguments.a.endsWith('\ufffd\ufffd')).toBe(true);
  });

  it('materialise turns every placeholder back into its string and drops the slices', () => {
    const msg = call({ text: TRICKY, list: [LONG] });
    const v = decodeJson(bytes(msg)) as any;
    materialise(v.params);
    expect(v).toEqual(msg);
    expect(v.params[OPAQUE]).toBeUndefined();
    expect(JSON.stringify(v)).not.toContain(MARK_JSON);
  });

  it('a placeholder copied into a payload without slices stays a valid JSON string', () => {
    const v = decodeJson(bytes(call({ text: LONG }))) as any;
    const stray = { jsonrpc: '2.0', id: 2, result: { copied: v.params.arguments.text } };
    expect(() => JSON.parse(encodeMessage(stray))).not.toThrow();
  });

  it('a message that spreads a payload keeps its slices (the router builds notifications that way)', () => {
    const v = decodeJson(bytes(call({ text: LONG }))) as any;
    const copy = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { ...v.params, extra: 1 } };
    expect(JSON.parse(encodeMessage(copy)).params.arguments.text).toBe(LONG);
  });

  it('nesting as deep as the peer likes neither overflows the stack nor hides a placeholder', () => {
    const deep = '['.repeat(20_000) + ']'.repeat(20_000);
    const text = `{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"${LONG}","b":${deep}}}`;
    const v = decodeJson(Buffer.from(text)) as any;
    expect(opaqueSlices(v.params)).toHaveLength(1);
    expect(() => materialise(v.params)).not.toThrow();
    expect(v.params.a === LONG).toBe(true);
    // The same depth outside the payload is looked through too.
    const env = `{"jsonrpc":"2.0","method":"x","params":{"a":"${LONG}"},"extra":${deep}}`;
    const e = decodeJson(Buffer.from(env)) as any;
    materialise(e.params);
    expect(e.params.a === LONG).toBe(true);
  });

  it('a parse error names the peer\'s own text, never a placeholder', () => {
    const text = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"a":"${LONG}",]}}}`;
    const frame = parseBytes(Buffer.from(text));
    expect(frame.ok).toBe(false);
    expect(frame.ok ? '' : frame.detail).not.toContain('mcpmux-');
  });

  it('a result adapted for an older host has real strings in the blocks it rewrites', () => {
    const msg = { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'resource_link', name: 'n', uri: [LONG] }, { type: 'audio', data: 'x', mimeType: [LONG] }] } };
    const v = decodeJson(bytes(msg)) as any;
    expect(opaqueSlices(v.result)).toHaveLength(2);
    const out = JSON.stringify(adaptForHost('2024-11-05', v.result));
    expect(out).not.toContain(MARK_JSON);
    expect(out).toContain(LONG);
  });
});
