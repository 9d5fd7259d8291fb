// JSON with comments and trailing commas (JSONC), as VS Code, Cursor and people write their
// config files. Read with the VS Code team's jsonc-parser rather than a comment stripper of our
// own: it knows strings from comments, and the same library edits such files in place
// (`modify` + `applyEdits`) keeping every comment and the file's formatting.
//
// Plain JSON (most files) is read by JSON.parse, and jsonc-parser is loaded only for the rest:
// loading it took ~20 ms of `mcpmux stdio`'s ~85 ms before its first upstream's spawn, which a
// host waits on (issue 23, target 5).

import { createRequire } from 'node:module';
import type { Node, ParseError } from 'jsonc-parser';

/** jsonc-parser, loaded on first use (a UMD package: `require` loads it synchronously). */
let parser: typeof import('jsonc-parser') | undefined;
const jsoncParser = (): typeof import('jsonc-parser') => (parser ??= createRequire(import.meta.url)('jsonc-parser') as typeof import('jsonc-parser'));

/**
 * Nesting past which a value JSON.parse read is read again by jsonc-parser, which gives what it
 * always gave: the value, or "Nested too deeply" where its recursion ends. Far above any config.
 */
const PLAIN_DEPTH = 256;

/** A file that is not JSONC; `line` and `column` are 1-based and point at the first problem. */
export class JsoncError extends Error {
  constructor(
    readonly line: number,
    readonly column: number,
    readonly reason: string,
  ) {
    super(`invalid JSON at line ${line}, column ${column}: ${reason}`);
  }
}

/** Options every reader here uses: comments and trailing commas allowed, nothing else lenient. */
const JSONC_OPTIONS = { allowTrailingComma: true, disallowComments: false, allowEmptyContent: false } as const;

/**
 * Parses JSONC text (a leading BOM is ignored); throws `JsoncError` at the first problem.
 * Values are what JSON.parse would build from the same text without its comments and trailing
 * commas: numbers as doubles, the last of duplicate keys wins, every key an own property.
 */
export function parseJsonc(text: string): unknown {
  const source = text.replace(/^\uFEFF/, '');
  const plain = parsePlain(source);
  if (plain.ok) return plain.value;
  const { parseTree } = jsoncParser();
  const errors: ParseError[] = [];
  let tree: Node | undefined;
  try {
    tree = parseTree(source, errors, JSONC_OPTIONS);
  } catch (err) {
    // The parser recurses once per nesting level; JSON.parse does not, so say what happened.
    if (err instanceof RangeError) throw new JsoncError(1, 1, 'Nested too deeply');
    throw err;
  }
  const first = errors[0];
  if (first) throw errorAt(source, first);
  return valueOf(tree!);
}

/**
 * JSON.parse's reading, where it is jsonc-parser's: plain JSON builds the same values both ways
 * (doubles, the last duplicate key winning in the first one's place, `"__proto__"` an own key).
 * Not ok for text JSON.parse refuses (comments, trailing commas, errors: jsonc-parser reads
 * those and places the error) and for nesting jsonc-parser might refuse.
 */
function parsePlain(source: string): { ok: true; value: unknown } | { ok: false } {
  let value: unknown;
  try {
    value = JSON.parse(source);
  } catch {
    return { ok: false };
  }
  return depthAtMost(value, PLAIN_DEPTH) ? { ok: true, value } : { ok: false };
}

/** Whether `value` nests at most `limit` arrays and objects deep (without recursion). */
function depthAtMost(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= limit) return false;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
  }
  return true;
}

/**
 * A node's value. Not jsonc-parser's own `parse()`/`getNodeValue()`: they assign keys, so a
 * `"__proto__"` key would become the object's prototype (its keys then seen through every read
 * but listed by none) where JSON.parse makes it an ordinary key.
 */
function valueOf(node: Node): unknown {
  if (node.type === 'array') return node.children!.map(valueOf);
  if (node.type !== 'object') return node.value as unknown;
  const o: Record<string, unknown> = {};
  for (const [key, value] of node.children!.map((p) => p.children!)) {
    Object.defineProperty(o, key!.value as string, { value: valueOf(value!), enumerable: true, writable: true, configurable: true });
  }
  return o;
}

/** Punctuation a parse error may stop at: safe to quote (unlike a token, which may be a secret). */
const PUNCTUATION = new Set(['{', '}', '[', ']', ':', ',']);

function errorAt(source: string, e: ParseError): JsoncError {
  const end = source.replace(/[ \t\r\n]+$/, '').length;
  let offset = e.offset;
  let reason = reasonOf(e);
  if (end === 0) {
    offset = 0;
    reason = 'Empty file';
  } else if (offset >= end) {
    // A cut-off file: point just after its last character, where the rest went missing.
    offset = end;
    reason = `Unexpected end of file (${lower(reason)})`;
  } else if (PUNCTUATION.has(source[offset]!)) {
    // "Comma expected" at a stray "]" says too little: name what was found, then what was wanted.
    const found = `'${source[offset]}'`;
    reason = jsoncParser().printParseErrorCode(e.error) === 'EndOfFileExpected' ? `Unexpected ${found} after the JSON value` : `Unexpected ${found} (${lower(reason)})`;
  }
  const before = source.slice(0, offset).split('\n');
  return new JsoncError(before.length, before.at(-1)!.length + 1, reason);
}

function reasonOf(e: ParseError): string {
  // jsonc-parser names its codes in PascalCase ("CloseBraceExpected"): say them in words.
  const code = jsoncParser().printParseErrorCode(e.error);
  if (code === 'EndOfFileExpected') return 'Unexpected text after the JSON value';
  return code.replace(/([a-z])([A-Z])/g, '$1 $2').replace(/^./, (c) => c.toUpperCase()).replace(/ ([A-Z])/g, (_, c: string) => ' ' + c.toLowerCase());
}

const lower = (s: string): string => s[0]!.toLowerCase() + s.slice(1);
