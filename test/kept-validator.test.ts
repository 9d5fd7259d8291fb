// The config validator kept between starts (src/config/kept-validator.ts): ajv's standalone code
// and V8's compilation of it, each used when present and sound, each rebuilt when not, with the
// same answers and the same error objects every way. Real ajv, real files, a folder of its own;
// each start is a process of its own (dist/), as V8 also caches compiled code within a process.

import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { SCHEMA_URL } from '../src/config/load.js';
import { ROOT, tempDir } from './helpers/harness.js';

const SCHEMA = readFileSync(SCHEMA_URL, 'utf8');
const OPTIONS = { allErrors: true, verbose: true, allowUnionTypes: true };
const good = JSON.parse(readFileSync(path.join(path.dirname(new URL(SCHEMA_URL).pathname), '..', 'config.example.json'), 'utf8'));
const bad = { mcpServers: { 'bad name': { command: 3 }, ok: { url: 'ftp://x', headers: [] } }, timeouts: { requestMs: -1 }, surprise: true };

/** What ajv compiled in place says of a config: the answer every kept form must give. */
const reference = new Ajv(OPTIONS).compile(JSON.parse(SCHEMA));
function answers(validate: (v: unknown) => boolean & { errors?: unknown }, value: unknown): { ok: boolean; errors: unknown } {
  const ok = validate(value) as boolean;
  return { ok, errors: (validate as unknown as { errors: unknown }).errors };
}
const expected = (value: unknown) => answers(reference as never, value);

const KEPT = pathToFileURL(path.join(ROOT, 'dist/config/kept-validator.js')).href;
/** One start: a new Node process gets its validator from `dir` and validates `good` and `bad`. */
function keptValidator(schema: string, options: object, dir: string): { source: string; good: unknown; bad: unknown } {
  const script = `
    const { keptValidator } = await import(${JSON.stringify(KEPT)});
    const [schema, options, dir, good, bad] = JSON.parse(process.argv[1]);
    const { validate, source } = keptValidator(schema, options, dir);
    const answer = (v) => ({ ok: validate(v), errors: validate.errors });
    process.stdout.write(JSON.stringify({ source, good: answer(good), bad: answer(bad) }));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script, JSON.stringify([schema, options, dir, good, bad])], { encoding: 'utf8', timeout: 30_000 });
  return JSON.parse(out);
}
/** The reference's answers as they look once written as JSON. */
const asJson = (value: unknown) => JSON.parse(JSON.stringify(expected(value)));

describe('the kept config validator', () => {
  it('compiles, then keeps the code, then V8 compiles it once and the next start uses that: the same answers each time', () => {
    const dir = tempDir();
    const sources: string[] = [];
    for (let i = 0; i < 3; i++) {
      const start = keptValidator(SCHEMA, OPTIONS, dir);
      sources.push(start.source);
      expect(start.good).toStrictEqual(asJson(good));
      expect(start.bad).toStrictEqual(asJson(bad));
      expect((start.bad as { errors: unknown[] }).errors.length).toBeGreaterThan(3);
    }
    expect(sources).toEqual(['compiled', 'kept', 'kept, compiled by V8 before']);
    const files = readdirSync(dir);
    expect(files).toHaveLength(2);
    expect(files.filter((f) => /^config-schema\.[0-9a-f]{16}\.cjs$/.test(f))).toHaveLength(1);
    expect(files.filter((f) => /^config-schema\.[0-9a-f]{16}\.[0-9a-f]{16}\.v8$/.test(f))).toHaveLength(1);
  });

  it('a damaged V8 cache is refused by V8 and written again; damaged kept code is compiled again', () => {
    const dir = tempDir();
    keptValidator(SCHEMA, OPTIONS, dir);
    keptValidator(SCHEMA, OPTIONS, dir);
    const v8 = readdirSync(dir).find((f) => f.endsWith('.v8'))!;
    writeFileSync(path.join(dir, v8), Buffer.alloc(4096, 7));
    const again = keptValidator(SCHEMA, OPTIONS, dir);
    expect(again.source).toBe('kept');
    expect(again.bad).toStrictEqual(asJson(bad));
    expect(keptValidator(SCHEMA, OPTIONS, dir).source).toBe('kept, compiled by V8 before');

    const cjs = readdirSync(dir).find((f) => f.endsWith('.cjs'))!;
    writeFileSync(path.join(dir, cjs), 'this is not JavaScript {');
    const compiled = keptValidator(SCHEMA, OPTIONS, dir);
    expect(compiled.source).toBe('compiled');
    expect(compiled.bad).toStrictEqual(asJson(bad));
    expect(keptValidator(SCHEMA, OPTIONS, dir).source).not.toBe('compiled');
  });

  it("another schema's kept files go when this one's code is written; a folder that cannot be written still gives a validator", () => {
    const dir = tempDir();
    keptValidator(SCHEMA, OPTIONS, dir);
    keptValidator(SCHEMA, OPTIONS, dir);
    const old = readdirSync(dir);
    const other = SCHEMA.replace('"mcpServers"', '"mcpServers" ');
    expect(keptValidator(other, OPTIONS, dir).source).toBe('compiled');
    const now = readdirSync(dir);
    expect(now).toHaveLength(1);
    expect(old).not.toContain(now[0]);

    const missing = path.join(dir, 'no', 'such', 'folder');
    for (let i = 0; i < 2; i++) {
      const v = keptValidator(SCHEMA, OPTIONS, missing);
      expect(v.source).toBe('compiled');
      expect(v.bad).toStrictEqual(asJson(bad));
    }
  });
});
