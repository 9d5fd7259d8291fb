// The newline framing under the stdio transport: real LineDecoder, byte chunks split anywhere.

import { describe, expect, it } from 'vitest';
import { LineDecoder, peekId, type Frame } from '../src/jsonrpc/framing.js';

function decode(max: number, ...chunks: (string | Buffer)[]): Frame[] {
  const out: Frame[] = [];
  const d = new LineDecoder(max);
  for (const c of chunks) d.push(typeof c === 'string' ? Buffer.from(c) : c, (f) => out.push(f));
  return out;
}

describe('LineDecoder', () => {
  it('yields one value per line, whatever the chunk boundaries (including inside a multi-byte character)', () => {
    const text = '{"a":"é"}\n{"b":2}\r\n\n{"c":[3]}\n';
    const bytes = Buffer.from(text);
    for (let cut = 1; cut < bytes.length; cut++) {
      const frames = decode(1024, bytes.subarray(0, cut), bytes.subarray(cut));
      expect(frames.filter((f) => f.ok && f.value !== undefined).map((f) => (f as { value: unknown }).value)).toEqual([{ a: 'é' }, { b: 2 }, { c: [3] }]);
    }
  });

  it('reports bad JSON per line and goes on; a good line carries its size', () => {
    const frames = decode(1024, 'not json\n{"ok":true}\r\n');
    expect(frames[0]).toMatchObject({ ok: false, error: 'parse' });
    expect(frames[1]).toEqual({ ok: true, value: { ok: true }, bytes: '{"ok":true}'.length });
  });

  it('drops a line over the limit without buffering it, keeps its ends, and reads the next line', () => {
    const big = `{"jsonrpc":"2.0","method":"x","params":{"pad":"${'z'.repeat(5000)}"},"id":"tail-id"}`;
    const frames = decode(1000, big.slice(0, 2000), big.slice(2000) + '\n{"after":1}\n');
    expect(frames[0]).toMatchObject({ ok: false, error: 'too-large', bytes: big.length });
    const f = frames[0] as Extract<Frame, { error: 'too-large' }>;
    expect(peekId(f.head, f.tail)).toEqual({ id: 'tail-id', isRequest: true });
    expect(frames[1]).toEqual({ ok: true, value: { after: 1 }, bytes: 11 });
  });
});

describe('peekId', () => {
  it('takes a top-level id from the head or the tail, never one nested in params', () => {
    expect(peekId('{"jsonrpc":"2.0","id":7,"method":"m","params":{', '')).toEqual({ id: 7, isRequest: true });
    expect(peekId('{"result":{"x":1', ',"jsonrpc":"2.0","id":12}')).toEqual({ id: 12, isRequest: false });
    expect(peekId('{"method":"m","params":{"id":5,', 'zz"}}}')).toBeUndefined();
    expect(peekId('{"method":"m","params":{"a":1', '{"id":3}}')).toBeUndefined();
  });

  it('gives up on a malformed id string instead of throwing', () => {
    expect(peekId('{"id":"\\x","method":"m","params":{', '')).toBeUndefined();
  });
});
