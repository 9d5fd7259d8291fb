// The config schema's validator, kept on disk between starts. Importing ajv and compiling the
// schema was the largest piece of `mcpmux stdio`'s start-up CPU (a host waits for it), so the
// code ajv generates is kept in dist/config (its "standalone" output, named for a hash of ajv's
// version, the options and the schema: a changed schema never meets an old file), and so is
// V8's compiled form of that code (Node 20 has no compile cache of its own), named also for
// Node's version and V8's flags (../v8-flags.ts), which V8 checks. Either file missing, stale
// or unreadable costs time, never a different answer: the validator's errors are the same
// objects. Where dist/ cannot be written (an install owned by root), every start compiles, as
// before. Nothing is ever written outside mcpmux's own folder: code loaded from a shared
// temporary folder could be planted by another user.

import { readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Script } from 'node:vm';
import type { Options, ValidateFunction } from 'ajv';
import { v8Flavor } from '../v8-flags.js';

/** A config that reaches the server checks: validating it once compiles what the cache then holds. */
const WARM_UP = { mcpServers: { a: { command: 'x', args: ['y'], env: { K: 'v' } }, b: { url: 'http://127.0.0.1/mcp' } } };

/** src/config and dist/config are both two levels down: the files live in dist/ either way. */
export const KEPT_DIR = fileURLToPath(new URL('../../dist/config/', import.meta.url));

/** How this start got its validator: compiled by ajv, or the kept code with or without V8's compilation of it. */
export type ValidatorSource = 'compiled' | 'kept' | 'kept, compiled by V8 before';

export function keptValidator(schemaText: string, options: Options, dir = KEPT_DIR): { validate: ValidateFunction; source: ValidatorSource } {
  const require = createRequire(import.meta.url);
  const version = (require('ajv/package.json') as { version: string }).version;
  const key = cacheKey(`${version}\0${JSON.stringify(options)}\0${schemaText}`);
  const file = path.join(dir, `config-schema.${key}.cjs`);
  try {
    return loadKept(file, path.join(dir, `config-schema.${key}.${cacheKey(v8Flavor())}.v8`), require);
  } catch {
    // Not there yet (or unreadable): compile, and keep the code for the next start.
  }
  const { Ajv } = require('ajv') as typeof import('ajv');
  const ajv = new Ajv({ ...options, code: { source: true } });
  const validate = ajv.compile(JSON.parse(schemaText) as object);
  const standalone = (require('ajv/dist/standalone') as typeof import('ajv/dist/standalone/index.js')).default;
  if (writeWhole(file, standalone(ajv, validate))) {
    // Another schema's files (an older mcpmux's) are of no more use.
    for (const old of readdirSync(dir)) if (old.startsWith('config-schema.') && !old.startsWith(`config-schema.${key}.`)) rmSync(path.join(dir, old), { force: true });
  }
  return { validate, source: 'compiled' };
}

/**
 * Runs the kept standalone code as `require` would (the same wrapper and arguments), with V8's
 * cached compilation of it when there is one V8 accepts; otherwise compiles it, validates a
 * config once (V8 compiles a function on its first call) and keeps what V8 compiled.
 */
function loadKept(file: string, codeFile: string, require: NodeJS.Require): { validate: ValidateFunction; source: ValidatorSource } {
  const source = readFileSync(file, 'utf8');
  let cached: Buffer | undefined;
  try {
    cached = readFileSync(codeFile);
  } catch {
    // None yet for this Node and these flags.
  }
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: file, cachedData: cached });
  const module = { exports: {} as unknown };
  // Its `require` is this module's: the code needs the ajv that wrote it (its runtime helpers).
  (script.runInThisContext() as (...args: unknown[]) => void).call(module.exports, module.exports, require, module, file, path.dirname(file));
  const validate = module.exports as ValidateFunction;
  if (typeof validate !== 'function') throw new Error(`${file} is not a validator`);
  if (cached !== undefined && script.cachedDataRejected === false) return { validate, source: 'kept, compiled by V8 before' };
  validate(WARM_UP);
  writeWhole(codeFile, script.createCachedData());
  return { validate, source: 'kept' };
}

/** Writes under a temporary name and renames: another mcpmux starting now reads the old state or the new file. */
function writeWhole(file: string, data: string | Buffer): boolean {
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, data);
    renameSync(tmp, file);
    return true;
  } catch {
    rmSync(tmp, { force: true });
    return false;
  }
}

/**
 * 16 hex digits that change with `text`: two 32-bit FNV-1a hashes (other offsets and primes).
 * Names a cached file of mcpmux's own, with no adversary: node:crypto's sha256 did the same, but
 * loading node:crypto was ~5 % of `mcpmux stdio`'s CPU before its first upstream's spawn.
 */
function cacheKey(text: string): string {
  let a = 0x811c9dc5;
  let b = 0x050c5d1f;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000931);
  }
  return (a >>> 0).toString(16).padStart(8, '0') + (b >>> 0).toString(16).padStart(8, '0');
}
