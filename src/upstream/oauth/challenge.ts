// Reading a WWW-Authenticate header (RFC 9110 section 11.6.1): a list of challenges, each an
// auth scheme followed by a token68 or by name=value parameters (values quoted or bare).
// Imports nothing: the HTTP transport reads every 401 and 403 with it, and must not pull in
// the OAuth code (discovery, the login, the store), which loads only when a login is needed.

/** Characters of a token (tchar), and `/` so a token68 (`Basic dXNlcjpwYXNz==`) reads as one. */
const WORD = /[!#$%&'*+.^_`|~0-9A-Za-z/-]+/y;
const SPACE = /[\s,]*/y;
/** After a word: `=` and a value (a quoted string or a bare token), making it a parameter. */
const VALUE = /\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"=][^\s,"]*))/y;
/** After a word: only `=` padding up to a comma or the end, making it a token68. */
const PADDING = /=*\s*(?=,|$)/y;

interface Challenge {
  scheme: string;
  params: Record<string, string>;
  /** Nothing but its scheme read yet: a token68 may follow. */
  bare: boolean;
}

/** Every challenge of a WWW-Authenticate header, in order; schemes and parameter names lower-cased. */
export function challenges(header: string): Challenge[] {
  const out: Challenge[] = [];
  let at = 0;
  const sticky = (re: RegExp): RegExpExecArray | null => {
    re.lastIndex = at;
    const m = re.exec(header);
    if (m) at = re.lastIndex;
    return m;
  };
  while (at < header.length) {
    const gap = sticky(SPACE)?.[0] ?? '';
    const word = sticky(WORD);
    // The end, or not a word (a stray quote, say): nothing more can be read reliably.
    if (!word) break;
    const current = out.at(-1);
    const param = current ? sticky(VALUE) : null;
    if (current && param) {
      const name = word[0].toLowerCase();
      current.bare = false;
      // The first of a repeated parameter counts.
      if (!Object.hasOwn(current.params, name)) current.params[name] = param[1] !== undefined ? param[1].replace(/\\(.)/g, '$1') : (param[2] ?? '');
      continue;
    }
    // A token68 right after its scheme (a space, no comma, between them): not a scheme of its own.
    if (current?.bare && !gap.includes(',') && sticky(PADDING)) {
      current.bare = false;
      continue;
    }
    out.push({ scheme: word[0].toLowerCase(), params: {}, bare: true });
  }
  return out;
}

/**
 * The parameters of the header's Bearer challenge (`realm`, `scope`, `error`,
 * `resource_metadata`...), wherever it stands among other schemes; undefined without one.
 */
export function bearerChallenge(header: string | null | undefined): Record<string, string> | undefined {
  if (!header) return undefined;
  return challenges(header).find((c) => c.scheme === 'bearer')?.params;
}
