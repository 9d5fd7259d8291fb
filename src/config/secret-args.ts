// Secrets written into a stdio server's `args` as they are (no ${VAR}): `--api-key sk-…`,
// `--token=…`, `TOKEN=…`, `--header "Authorization: Bearer …"`, a URL with a password or a
// `?key=` in it, or a value that looks like a token by itself. The loader adds what it finds to the secrets every log line and audit line
// is scrubbed of, and the spawn log line shows them masked. A guess by shape: it errs towards
// masking (a long id may be hidden too); a `${VAR}` named in the config's `"secrets"` is the way to
// be sure (secrecy.ts).

import { secretName, tokenLike } from './secrecy.js';

const MASK = '[REDACTED]';

/**
 * The secret parts of one `a://user:pass@host/p/ath?key=v` URL: the password, secret-named query
 * values, and path segments that look like tokens (hosted servers put the key in the path:
 * `https://mcp.example.com/s/3fA9kQ2mZ7xL0pW4vB8n/sse`).
 */
export function urlSecrets(v: string): string[] {
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
  for (const segment of url.pathname.split('/')) {
    const plain = decoded(segment);
    if (tokenLike(plain)) out.push(segment, plain);
  }
  return out;
}

/** A percent-encoded piece of a URL as text, or as it is when it does not decode. */
function decoded(v: string): string {
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
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
