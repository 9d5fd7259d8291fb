// Secrets written into a stdio server's `args` as they are (no ${VAR}): `--api-key sk-…`,
// `--token=…`, `TOKEN=…`, `--header "Authorization: Bearer …"`, a URL with a password or a
// `?key=` in it, or a value that looks like a token by itself. The loader adds what it finds to the secrets every log line and audit line
// is scrubbed of, and the spawn log line shows them masked. A guess by shape: it errs towards
// masking (a long id may be hidden too); a `${VAR}` named in the config's `"secrets"` is the way to
// be sure (secrecy.ts).

/** Words that make a flag or a name a secret's: `--api-key`, `GITHUB_TOKEN`, `--client-secret`. */
const SECRET_WORDS = new Set(['token', 'tokens', 'secret', 'secrets', 'password', 'passwd', 'pwd', 'pass', 'passphrase', 'key', 'apikey', 'auth', 'authorization', 'credential', 'credentials', 'bearer', 'cookie', 'pat', 'jwt']);
/** Prefixes of well-known token formats (OpenAI, Anthropic, GitHub, GitLab, Slack, AWS, Stripe, npm). */
const TOKEN_PREFIX = /^(sk-|sk_|rk_|pk_live_|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|xox[abprs]-|AKIA|ASIA|npm_|hf_)[A-Za-z0-9_-]{8,}/;
const MASK = '[REDACTED]';

/** True for a flag or variable name that names a secret (`--api-key`, `-p`, no; `DB_PASSWORD`, yes). */
function secretName(name: string): boolean {
  const words = name.replace(/^-+/, '').toLowerCase().split(/[-_.]/);
  return words.some((w) => SECRET_WORDS.has(w)) || /token|secret|passw|apikey/.test(name.toLowerCase());
}

/**
 * A value that looks like a token on its own: a known prefix, or a long run of token
 * characters with letters and digits mixed (paths, package names and URLs have `/`, `@`, `:`).
 */
export function tokenLike(v: string): boolean {
  if (TOKEN_PREFIX.test(v)) return true;
  if (v.length < 20 || !/^[A-Za-z0-9_\-+=.]+$/.test(v) || !/\d/.test(v) || !/[A-Za-z]/.test(v)) return false;
  return v.length >= 32 || (/[a-z]/.test(v) && /[A-Z]/.test(v));
}

/** The secret parts of one `a://user:pass@host/?key=v` URL: the password and secret-named query values. */
function urlSecrets(v: string): string[] {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(v)) return [];
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    return [];
  }
  const out: string[] = [];
  if (url.password) out.push(decodeURIComponent(url.password), url.password);
  for (const [k, val] of url.searchParams) if (val && (secretName(k) || tokenLike(val))) out.push(val, encodeURIComponent(val));
  return out;
}

/** `Authorization: Bearer abc` (a header given as an argument): its value, and the token in it. */
function headerSecrets(v: string): string[] {
  const m = /^\s*([A-Za-z0-9_-]+)\s*:\s*(\S.*?)\s*$/.exec(v);
  if (!m || !secretName(m[1]!)) return [];
  const scheme = /^(?:bearer|basic|token)\s+(\S+)$/i.exec(m[2]!);
  return scheme ? [m[2]!, scheme[1]!] : [m[2]!];
}

/** Every secret-looking value in `args` (whole arguments, or the part after `=`). */
export function secretArgs(args: readonly string[]): string[] {
  const out = new Set<string>();
  args.forEach((a, i) => {
    const eq = a.indexOf('=');
    const name = eq > 0 ? a.slice(0, eq) : undefined;
    const value = eq > 0 ? a.slice(eq + 1) : a;
    const prev = args[i - 1];
    // `--token VALUE`: the flag before it names a secret (and it is not itself a flag).
    const afterFlag = prev !== undefined && prev.startsWith('-') && !prev.includes('=') && secretName(prev) && !a.startsWith('-');
    if (afterFlag || tokenLike(a)) out.add(a);
    else if (name !== undefined && value !== '' && (secretName(name) || tokenLike(value))) out.add(value);
    for (const s of urlSecrets(value)) out.add(s);
    for (const s of [...headerSecrets(a), ...headerSecrets(value)]) out.add(s);
  });
  out.delete('');
  return [...out];
}

/** `args` as the log may show them: every secret-looking value replaced. */
export function maskSecretArgs(args: readonly string[]): string[] {
  const secrets = secretArgs(args).sort((a, b) => b.length - a.length);
  if (secrets.length === 0) return [...args];
  return args.map((a) => {
    for (const s of secrets) if (a.includes(s)) a = a.split(s).join(MASK);
    return a;
  });
}
