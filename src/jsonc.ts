// JSON with comments and trailing commas (JSONC), as VS Code, Cursor and people write their
// config files. Read with the VS Code team's jsonc-parser rather than a comment stripper of our
// own: it knows strings from comments, and the same library edits such files in place
// (`modify` + `applyEdits`) keeping every comment and the file's formatting.

import { parse, printParseErrorCode, type ParseError } from 'jsonc-parser';

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
export const JSONC_OPTIONS = { allowTrailingComma: true, disallowComments: false, allowEmptyContent: false } as const;

/** Parses JSONC text (a leading BOM is ignored); throws `JsoncError` at the first problem. */
export function parseJsonc(text: string): unknown {
  const source = text.replace(/^\uFEFF/, '');
  const errors: ParseError[] = [];
  const value: unknown = parse(source, errors, JSONC_OPTIONS);
  const first = errors[0];
  if (first) {
    const before = source.slice(0, first.offset).split('\n');
    throw new JsoncError(before.length, before.at(-1)!.length + 1, reasonOf(first));
  }
  return value;
}

function reasonOf(e: ParseError): string {
  // jsonc-parser names its codes in PascalCase ("CloseBraceExpected"): say them in words.
  const code = printParseErrorCode(e.error);
  if (code === 'EndOfFileExpected') return 'Unexpected text after the JSON value';
  return code.replace(/([a-z])([A-Z])/g, '$1 $2').replace(/^./, (c) => c.toUpperCase()).replace(/ ([A-Z])/g, (_, c: string) => ' ' + c.toLowerCase());
}
