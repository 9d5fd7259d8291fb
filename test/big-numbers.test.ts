// Numbers a double cannot hold pass through exactly: parsed as marked strings, written back as
// the digits they arrived as.

import { describe, expect, it } from 'vitest';
import { isText, jsonText, parseJson } from '../src/jsonrpc/big-numbers.js';
import { encodeMessage } from '../src/jsonrpc/framing.js';

const roundTrip = (text: string): string => encodeMessage(parseJson(text));

describe('parseJson + the encoder', () => {
  it.each([
    ['an id past 2^53', '{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping"}'],
    ['a negative one', '{"jsonrpc":"2.0","id":-98765432109876543210,"result":{}}'],
    ['2^53 + 1 in an argument', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"n":9007199254740993,"xs":[1,18446744073709551615]}}}'],
    ['a decimal with 20 digits', '{"jsonrpc":"2.0","id":1,"result":{"v":0.12345678901234567891}}'],
    ['an exponent that overflows', '{"jsonrpc":"2.0","id":1,"result":{"v":1e400}}'],
    ['one that underflows', '{"jsonrpc":"2.0","id":1,"result":{"v":-2.5e-400}}'],
  ])('%s comes back as the same digits', (_what, text) => {
    expect(roundTrip(text)).toBe(text);
  });

  it('leaves digits inside strings and keys alone, and ordinary numbers as numbers', () => {
    const text = '{"jsonrpc":"2.0","id":7,"result":{"card":"1234567812345678","12345678901234567":1,"n":3.5,"t":1700000000000}}';
    const v = parseJson(text) as any;
    expect(v.result.card).toBe('1234567812345678');
    expect(v.result.n).toBe(3.5);
    expect(v.id).toBe(7);
    expect(roundTrip(text)).toBe(text);
  });

  it('two equal big ids parse to equal values (a cancellation finds its request)', () => {
    const a = (parseJson('{"id":12345678901234567890}') as any).id;
    const b = (parseJson('{"params":{"requestId":12345678901234567890}}') as any).params.requestId;
    expect(a).toBe(b);
    expect(a).not.toBe((parseJson('{"id":12345678901234567891}') as any).id);
  });

  it('a kept number is not text; printed or caught inside a longer string, it is its digits (never the marker)', () => {
    const id = (parseJson('{"id":1e400}') as any).id;
    expect(isText(id)).toBe(false);
    expect(isText('1e400')).toBe(true);
    expect(jsonText(id)).toBe('1e400');
    expect(jsonText('a')).toBe('"a"');
    // Code that builds text from the value: the encoder still writes no marker.
    const msg = { jsonrpc: '2.0', id, error: { code: -1, message: `unknown ${id}`, data: { nested: JSON.stringify({ id }) } } };
    expect(encodeMessage(msg)).toBe('{"jsonrpc":"2.0","id":1e400,"error":{"code":-1,"message":"unknown 1e400","data":{"nested":"{\\"id\\":\\"1e400\\"}"}}}');
  });

  it('invalid JSON still fails the way JSON.parse does', () => {
    expect(() => parseJson('{"id":12345678901234567890,}')).toThrow(SyntaxError);
    expect(() => parseJson('{"id":"1234567890123456789')).toThrow(SyntaxError);
  });
});
