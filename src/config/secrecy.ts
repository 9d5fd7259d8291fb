// Which `${VAR}` values are secrets (issue 19): redact secrets, not words. A value read from the
// environment is a secret when its variable's NAME says so, when it is used where secrets go
// (a header value, OAuth client secret or private key), when it looks like a token by itself,
// or when the config's top-level `"secrets"` names the variable. Everything else (a folder, a
// mode such as "stdio", a port) is an ordinary word and stays readable in logs and errors.

import type { VariableUse } from './expand.js';
import { tokenLike } from './secret-args.js';

/**
 * Parts of a variable name that make its value a secret, matched case-insensitively anywhere in
 * the name (`GITHUB_TOKEN`, `OPENAI_API_KEY`, `DB_PASSWORD`, `SLACK_AUTH`, `SESSION_COOKIE`).
 * Deliberately broad (`MONKEY` and `AUTHOR` match too): a hidden word costs less than a leaked
 * key. Not `PWD` (the shell's current folder) nor `PASS` (`PASSTHROUGH`): list those in
 * `"secrets"`.
 */
export const SECRET_NAME_PARTS = ['TOKEN', 'KEY', 'SECRET', 'PASSWORD', 'PASSWD', 'PASSPHRASE', 'AUTH', 'CREDENTIAL', 'COOKIE', 'SESSION', 'PRIVATE', 'JWT', 'BEARER'] as const;

/** True when a variable (or a stdio server's `env` key) names a secret by itself or is listed in `"secrets"`. */
export function secretVariable(name: string, named: ReadonlySet<string>): boolean {
  if (named.has(name)) return true;
  const upper = name.toUpperCase();
  // `PAT` (a personal access token) only as a whole word: `GITHUB_PAT`, not `PATH`.
  return SECRET_NAME_PARTS.some((part) => upper.includes(part)) || upper.split(/[^A-Z0-9]+/).includes('PAT');
}

/** Paths inside a server's entry whose values are secret material whatever variable fills them. */
const SECRET_PLACES = [/^\/mcpServers\/[^/]+\/headers\/[^/]+$/, /^\/mcpServers\/[^/]+\/oauth\/(clientSecret|privateKey)$/];

/** The values of `used` that are secrets (see the file comment). */
export function secretValues(used: readonly VariableUse[], named: ReadonlySet<string>): string[] {
  const out = new Set<string>();
  for (const u of used) {
    if (secretVariable(u.name, named) || SECRET_PLACES.some((re) => re.test(u.path)) || tokenLike(u.value)) out.add(u.value);
  }
  return [...out];
}
