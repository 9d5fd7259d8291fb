// Turning tool text and search requests into index terms. The same pipeline runs on both sides,
// so whatever a tool says and whatever a user types meet as the same term: split identifiers,
// lower-case, drop stop words, Porter-stem, then fold a few synonyms onto one term.
import { stemmer } from 'stemmer';

/** Bounds on a request: a 10 KB query costs no more than a short one. */
export const MAX_QUERY_CHARS = 2048;
export const MAX_QUERY_TERMS = 64;

// Identifier boundaries: snake_case, kebab-case, dotted.names and slashes fall to the non-alnum
// split; camelCase, HTMLParser and letter/digit runs (base64, s3) to these two.
const CASE_BOUNDARY = /([a-z0-9])([A-Z])|([A-Z]+)([A-Z][a-z])/g;
const DIGIT_BOUNDARY = /([a-zA-Z])(?=[0-9])|([0-9])(?=[a-zA-Z])/g;
const NON_WORD = /[^\p{L}\p{N}]+/u;
// A capitalised word with a capital inside (GitHub, MongoDB, JavaScript, CircleCI) is a proper
// name in prose, not an identifier: split, "GitHub" became "git hub" and pulled the git server's
// tools over GitHub's. Identifiers are camelCase (getCurrentTime) or start with an acronym
// (HTMLParser), and those are still split; tool and parameter names of real servers use no
// PascalCase, so nothing an identifier says is lost.
const PROPER_NAME = /^[A-Z][a-z]+[A-Z]/;
/** Most words of prose are plain lower-case: they skip the splitting below (index build cost). */
const PLAIN = /^[a-z]+$/;

// Tool text repeats the same identifiers and capitalised words: each token's split is
// remembered, bounded like the term memo below; a token longer than any real identifier (a
// hostile server's 4 KB run of letters) is split each time, not kept.
const TOKEN_MEMO_MAX = 20_000;
/** Longest token or word either memo keeps: no real identifier or word is longer. */
const MEMO_KEY_CHARS = 64;
const tokenMemo = new Map<string, readonly string[]>();

/** The words of one token (a run of letters and digits that is not plain lower-case). */
function tokenWords(token: string): readonly string[] {
  const known = tokenMemo.get(token);
  if (known !== undefined) return known;
  const out: string[] = [];
  const parts = PROPER_NAME.test(token)
    ? [token]
    : token.replace(CASE_BOUNDARY, (_m, a, b, c, d) => (a !== undefined ? `${a} ${b}` : `${c} ${d}`)).split(' ');
  for (const raw of parts) {
    const w = raw.toLowerCase();
    out.push(w);
    if (/[0-9]/.test(w) && /[a-z]/.test(w)) {
      for (const part of w.replace(DIGIT_BOUNDARY, '$1$2 ').split(' ')) if (part !== '') out.push(part);
    }
  }
  if (token.length > MEMO_KEY_CHARS) return out;
  if (tokenMemo.size >= TOKEN_MEMO_MAX) tokenMemo.clear();
  tokenMemo.set(token, out);
  return out;
}

/**
 * Words of a text, lower-cased. A word made of letters and digits is kept whole (s3, base64, h1)
 * and also split at the digits, so "base64" is found by "base64" and by "base 64".
 * "pull request(s)" and "merge request(s)" become the one word "pr", the name most tools give it.
 */
export function words(text: string): string[] {
  const out: string[] = [];
  for (const token of text.split(NON_WORD)) {
    if (token === '') continue;
    if (PLAIN.test(token)) out.push(token);
    else for (const w of tokenWords(token)) out.push(w);
  }
  for (let i = 0; i + 1 < out.length; i++) {
    if ((out[i] === 'pull' || out[i] === 'merge') && (out[i + 1] === 'request' || out[i + 1] === 'requests')) {
      out.splice(i, 2, 'pr');
    }
  }
  return out;
}

// Words that say nothing about which tool is meant: English function words and the filler of
// requests ("can you please help me ..."). Verbs are NOT here: get/list/set tell tools apart.
// The second half is the rest of the usual English stop list (pronouns, quantifiers such as
// many/much/each/every, the halves of contractions: don't -> don, t); left out of it on
// purpose: other/another (a different one: "the other branch"), only (read-only), and the
// direction words up/down/out/off/before/after (scroll down, sign out, logs after a date).
// Quantifiers matter because real tools are named after them (insert-many, delete-many):
// "how many documents" matched those by "many" over the tool that counts.
const STOP_WORDS = new Set(
  (
    'a an the and or but if then else of to in on at by for from with without into onto over under ' +
    'about as is are was were be been being am do does did done doing have has had having will would ' +
    'shall should can could may might must i me my mine we us our you your it its this that these ' +
    'those there here what which who whom whose how why when where please help want wanted need ' +
    'needs like would let lets just some any via using use tool tools mcp thing things so also ' +
    'very really currently now s t ' +
    'myself ours ourselves yours yourself yourselves he him his himself she her hers herself itself ' +
    'they them their theirs themselves ought because until while through during against between ' +
    'again further once each every both few such nor own same than too many much ll ve re don ' +
    'doesn didn isn aren wasn weren hasn haven hadn won wouldn shouldn couldn mustn shan'
  ).split(' '),
);

// A small, general synonym table: each group folds onto its first word's stem, on both sides.
// Only groups that mean the same action or object across common MCP servers; nothing that tells
// two tools of one server apart (get vs list, read vs write stay distinct). The first eight were
// kept because dropping them lowered recall on the in-repo sample (create/add/new/make and
// repo/repository as exact equivalents). The rest is general developer vocabulary written down
// without looking at the benchmark's requests, then measured on the real-server corpus
// (docs/search.md): get/fetch/retrieve, show/display/view and update/edit/modify/change each
// raised the tuning half's recall; the verbs run, start and copy and the abbreviations are exact
// equivalents that cost nothing. A group is folded by stem, so a word whose stem is another
// word's (settings -> "set") must not be in one: it would fold that other word too.
// Tried and dropped: list/show (no gain), url/link/page/site (no gain), stop/terminate/kill/
// halt/abort and login/signin/authenticate (no gain on the tuning half).
const SYNONYM_GROUPS: readonly (readonly string[])[] = [
  ['create', 'add', 'new', 'make'],
  ['delete', 'remove', 'erase', 'destroy', 'forget'],
  ['write', 'save'],
  ['chart', 'plot', 'diagram'],
  ['search', 'find', 'query', 'lookup', 'look'],
  ['issue', 'ticket', 'bug'],
  ['repo', 'repository', 'repositories'],
  ['directory', 'folder', 'dir'],
  ['get', 'fetch', 'retrieve'],
  ['show', 'display', 'view'],
  ['update', 'edit', 'modify', 'change'],
  ['run', 'execute', 'exec', 'invoke'],
  ['start', 'launch', 'begin'],
  ['copy', 'duplicate'],
  ['config', 'configuration', 'cfg'],
  // Abbreviations developers write for the same word.
  ['database', 'db'],
  ['environment', 'env'],
  ['variable', 'var', 'vars'],
  ['argument', 'arg', 'args'],
  ['parameter', 'param', 'params'],
  ['authentication', 'auth'],
  ['image', 'img'],
  ['message', 'msg'],
  ['information', 'info'],
  ['statistics', 'stats'],
  ['application', 'app'],
  ['package', 'pkg'],
  ['dependency', 'dep', 'deps', 'dependencies'],
  ['specification', 'spec'],
  ['function', 'func', 'fn'],
  ['number', 'num'],
];

const CANONICAL = new Map<string, string>();
for (const group of SYNONYM_GROUPS) {
  const head = stemmer(group[0]!);
  for (const w of group) CANONICAL.set(stemmer(w), head);
}

// Stemming is most of the cost of building an index, and tool text repeats the same few hundred
// words, so each word's term is remembered. Bounded: cleared when full, never grows past it, and
// a word longer than MEMO_KEY_CHARS (a hostile server's 4 KB run of letters) is not kept.
const MEMO_MAX = 20_000;
const memo = new Map<string, string | null>();

/** One word to its index term, or undefined when it carries no meaning. */
export function term(word: string): string | undefined {
  const known = memo.get(word);
  if (known !== undefined) return known ?? undefined;
  let out: string | null = null;
  if (!STOP_WORDS.has(word) && (word.length >= 2 || /[0-9]/.test(word))) {
    const stem = /^[a-z]+$/.test(word) ? stemmer(word) : word;
    out = CANONICAL.get(stem) ?? stem;
  }
  if (word.length > MEMO_KEY_CHARS) return out ?? undefined;
  if (memo.size >= MEMO_MAX) memo.clear();
  memo.set(word, out);
  return out ?? undefined;
}

/** Index terms of a text, in order, repeats kept (term frequency counts for ranking). */
export function terms(text: string): string[] {
  const out: string[] = [];
  for (const w of words(text)) {
    const t = term(w);
    if (t !== undefined) out.push(t);
  }
  return out;
}

/** The distinct terms of a search request, bounded in input length and in count. */
export function queryTerms(query: string): string[] {
  const seen = new Set<string>();
  for (const t of terms(query.slice(0, MAX_QUERY_CHARS))) {
    seen.add(t);
    if (seen.size >= MAX_QUERY_TERMS) break;
  }
  return [...seen];
}
