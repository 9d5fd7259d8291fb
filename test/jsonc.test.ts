// parseJsonc reads plain JSON with JSON.parse and everything else with jsonc-parser (loaded only
// then: issue 23, start-up). Both readers must build the same value from the same JSON, so each
// text here is read once as it is (JSON.parse) and once with a comment after it (jsonc-parser).

import { describe, expect, it } from 'vitest';
import { JsoncError, parseJsonc } from '../src/jsonc.js';

const viaJsonc = (text: string): unknown => parseJsonc(`${text}\n// a comment: JSON.parse refuses this, so jsonc-parser reads it`);

describe('parseJsonc', () => {
  const texts = [
    '{"a": 1, "b": [true, false, null], "c": {"d": "e"}}',
    '{"n": [0, -0, 1.5, -2e-7, 1e400, 9007199254740993, 12345678901234567890]}',
    '{"s": "\\u00e9\\ud83d\\ude00 \\"quoted\\" \\\\ \\/ \\b\\f\\n\\r\\t", "lone": "\\ud800"}',
    '{"dup": 1, "other": 2, "dup": 3}',
    '{"__proto__": {"polluted": true}, "constructor": 1}',
    '"just a string"',
    '42',
    '[[[[[]]]], {}, [{}]]',
    `${'['.repeat(300)}${']'.repeat(300)}`,
  ];

  it('builds the same value from plain JSON with either reader', () => {
    for (const text of texts) {
      const plain = parseJsonc(text);
      expect(plain, text).toStrictEqual(JSON.parse(text));
      expect(viaJsonc(text), text).toStrictEqual(plain);
    }
  });

  it('keeps "__proto__" an own key, in the first duplicate\'s place, either way', () => {
    for (const v of [parseJsonc(texts[4]!), viaJsonc(texts[4]!)] as Record<string, unknown>[]) {
      expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
      expect(Object.keys(v)).toEqual(['__proto__', 'constructor']);
      expect((v as { polluted?: boolean }).polluted).toBeUndefined();
    }
    for (const v of [parseJsonc(texts[3]!), viaJsonc(texts[3]!)]) expect(Object.entries(v as object)).toEqual([['dup', 3], ['other', 2]]);
  });

  it('reads comments, trailing commas and a BOM, and places errors, as before', () => {
    expect(parseJsonc('\uFEFF{"a": [1, 2,], /* c */ "b": 2,}')).toEqual({ a: [1, 2], b: 2 });
    expect(() => parseJsonc('{"a": 1,\n  "b" 2}')).toThrow(new JsoncError(2, 7, 'Colon expected'));
    expect(() => parseJsonc('   ')).toThrow(/Empty file/);
  });

  it('says "Nested too deeply" where jsonc-parser\'s recursion ends, though JSON.parse could read it', () => {
    const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
    expect(() => JSON.parse(deep)).not.toThrow();
    expect(() => parseJsonc(deep)).toThrow(new JsoncError(1, 1, 'Nested too deeply'));
  });
});
