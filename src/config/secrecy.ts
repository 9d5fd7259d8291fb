// Which `${VAR}` values are secrets (issue 19): redact secrets, not words. A value read from the
// environment is a secret when its variable's NAME says so, when it is used where secrets go
// (a header value, OAuth client secret or private key), when it looks like a token by itself,
// or when the config's top-level `"secrets"` names the variable. Everything else (a folder, a
// mode such as "stdio", a port) is an ordinary word and stays readable in logs and errors.

import type { VariableUse } from './expand.js';

/**
 * Parts of a name that make its value a secret, matched case-insensitively anywhere in the
 * name (`GITHUB_TOKEN`, `OPENAI_API_KEY`, `DB_PASSWORD`, `SLACK_AUTH`, `SESSION_COOKIE`).
 * Deliberately broad (`MONKEY` and `AUTHOR` match too): a hidden word costs less than a leaked
 * key.
 */
export const SECRET_NAME_PARTS = ['TOKEN', 'KEY', 'SECRET', 'PASSWORD', 'PASSWD', 'PASSPHRASE', 'AUTH', 'CREDENTIAL', 'COOKIE', 'SESSION', 'PRIVATE', 'JWT', 'BEARER'] as const;
/**
 * Short words that name a secret only as a whole word: `GITHUB_PAT` (not `PATH`), `MYSQL_PWD`,
 * `DB_PASS` (not `PASSTHROUGH`), `--pw`.
 */
const SECRET_WORDS = new Set(['PAT', 'PWD', 'PASS', 'PW']);
/** The shell's own folder variables: `PWD` is where it stands, not a password. */
const NOT_SECRET = new Set(['PWD', 'OLDPWD']);

/**
 * True when a name says its value is a secret: a `${VAR}`, a stdio server's `env` key, a flag
 * in `args` (`--api-key`), a header given as an argument, or a URL's query parameter. One rule
 * for all of them, so a value is not hidden in one place and printed in another.
 */
export function secretName(name: string): boolean {
  const upper = name.replace(/^-+/, '').toUpperCase();
  if (NOT_SECRET.has(upper)) return false;
  return SECRET_NAME_PARTS.some((part) => upper.includes(part)) || upper.split(/[^A-Z0-9]+/).some((w) => SECRET_WORDS.has(w));
}

/** True when a variable (or a stdio server's `env` key) names a secret by itself or is listed in `"secrets"`. */
export function secretVariable(name: string, named: ReadonlySet<string>): boolean {
  return named.has(name) || secretName(name);
}

/** Prefixes of well-known token formats (OpenAI, Anthropic, GitHub, GitLab, Slack, AWS, Stripe, npm). */
const TOKEN_PREFIX = /^(sk-|sk_|rk_|pk_live_|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|xox[abprs]-|AKIA|ASIA|npm_|hf_)[A-Za-z0-9_-]{8,}/;
/**
 * A value that looks like a token on its own: a known prefix, or a long run of token
 * characters with letters and digits mixed (paths, package names and URLs have `/`, `@`, `:`).
 */
export function tokenLike(v: string): boolean {
  if (TOKEN_PREFIX.test(v)) return true;
  if (v.length < 20 || !/^[A-Za-z0-9_\-+=.]+$/.test(v) || !/\d/.test(v) || !/[A-Za-z]/.test(v)) return false;
  return v.length >= 32 || (/[a-z]/.test(v) && /[A-Z]/.test(v));
}

/** Paths inside a server's entry whose values are secret material whatever variable fills them. */
const SECRET_PLACES = [/^\/mcpServers\/[^/]+\/headers\/[^/]+$/, /^\/mcpServers\/[^/]+\/oauth\/(clientSecret|privateKey)$/, /^\/mcpServers\/[^/]+\/oauth\/idp\/(clientSecret|idToken)$/];

/** The values of `used` that are secrets (see the file comment). */
export function secretValues(used: readonly VariableUse[], named: ReadonlySet<string>): string[] {
  const out = new Set<string>();
  for (const u of used) {
    if (secretVariable(u.name, named) || SECRET_PLACES.some((re) => re.test(u.path)) || tokenLike(u.value)) out.add(u.value);
  }
  return [...out];
}
