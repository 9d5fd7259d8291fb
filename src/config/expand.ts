// `${VAR}` / `${VAR:-default}` expansion over a parsed JSON value.
//
// Only string VALUES are expanded (never keys), so the shape of the document is unchanged and
// every issue can be located by the JSON path of the string it came from. `$${` is an escape
// for a literal `${`. Expansion runs before schema validation: `"port": "${PORT}"` stays a
// string and is refused by the schema, which keeps the rule simple (no type coercion).

import type { ConfigIssue } from './types.js';

/** One `${NAME}` read from the environment, where it was used. */
export interface VariableUse {
  /** JSON Pointer of the string it was in. */
  path: string;
  name: string;
  /** What it expanded to: the variable's value, never a `:-default` (that is in the file). */
  value: string;
}

export interface ExpandResult {
  value: unknown;
  /** Malformed references and missing variables (the latter also in `missing`). */
  issues: ConfigIssue[];
  /** Every variable that is not set (and has no default), where it was used. */
  missing: { path: string; name: string }[];
  /** Every non-empty value read from the environment; the loader decides which are secret. */
  used: VariableUse[];
}

/** Escapes one JSON Pointer segment (RFC 6901). */
export function pointerSegment(key: string | number): string {
  return String(key).replace(/~/g, '~0').replace(/\//g, '~1');
}

/** Builds a JSON Pointer (`/mcpServers/fs/args/0`) from raw segments. */
export function jsonPointer(segments: readonly (string | number)[]): string {
  return segments.map((s) => '/' + pointerSegment(s)).join('');
}

// `$${` (escape), or `${NAME}` / `${NAME:-default}`; the default runs to the first `}`.
// `${` followed by anything else is caught separately as a malformed reference.
const REFERENCE = /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$\{/g;

export function expandEnv(value: unknown, env: NodeJS.ProcessEnv): ExpandResult {
  const issues: ConfigIssue[] = [];
  const missing: { path: string; name: string }[] = [];
  const used: VariableUse[] = [];

  const expandString = (s: string, path: string): string =>
    s.replace(REFERENCE, (match: string, name: string | undefined, fallback: string | undefined) => {
      if (match === '$${') return '${';
      if (name === undefined) {
        issues.push({ path, message: 'malformed ${...} reference (use ${NAME}, ${NAME:-default}, or $${ for a literal ${)' });
        return match;
      }
      const found = env[name];
      // Like the shell, `:-` also applies when the variable is set but empty.
      if (fallback !== undefined && (found === undefined || found === '')) return fallback;
      if (found === undefined) {
        issues.push({ path, message: `environment variable ${name} is not set` });
        missing.push({ path, name });
        return '';
      }
      if (found !== '') used.push({ path, name, value: found });
      return found;
    });

  const walk = (v: unknown, path: string): unknown => {
    if (typeof v === 'string') return expandString(v, path || '/');
    if (Array.isArray(v)) return v.map((item, i) => walk(item, `${path}/${i}`));
    if (v !== null && typeof v === 'object') {
      // Object.fromEntries defines own properties, so a `__proto__` key stays a plain key.
      return Object.fromEntries(
        Object.entries(v).map(([k, item]) => [k, walk(item, `${path}/${pointerSegment(k)}`)]),
      );
    }
    return v;
  };

  return { value: walk(value, ''), issues, missing, used };
}
