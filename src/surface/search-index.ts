// The tool search engine: an offline, in-memory ranking of a session's tools against a request
// phrased as a user would ("open a ticket about the login bug"). Pure: no daemon state, no I/O.
// Built once per tool list (off the request path) and replaced, never mutated, when lists change.
//
// Ranking is BM25+ over separately weighted fields (MiniSearch does the scoring, prefix and
// fuzzy matching); tokenising, stop words, stemming and synonyms live in ./terms.ts, so the same
// pipeline runs on the tools and on the request. docs/search.md describes the weights.
import { createRequire } from 'node:module';
import type MiniSearch from 'minisearch';
import { queryTerms, terms } from './terms.js';
import { isObject } from '../objects.js';

export interface SearchableTool {
  name: string;
  server: string;
  title?: string;
  description?: string;
  inputSchema?: unknown;
}

export interface SearchHit {
  tool: SearchableTool;
  score: number;
}

/** Results per search when the caller names no limit; the surface's searchLimit default. */
const DEFAULT_LIMIT = 8;
/** A caller's limit is clamped into this range (0 -> 1, 10 000 -> 50). */
const MIN_LIMIT = 1;
const MAX_LIMIT = 50;
/** Parameters read from one tool's inputSchema: bounds what a hostile schema costs the index. */
const MAX_PARAMS = 64;
/** Characters kept of any one text field: descriptions past this add noise, not signal. */
const MAX_FIELD_CHARS = 4096;
/** Characters kept of a description's first sentence: an opening with no full stop is cut here. */
const MAX_SUMMARY_CHARS = 300;
// The first sentence: up to . ! or ? before a space or the end, or up to a blank line. A single
// line break does not end it: many descriptions wrap their lines mid-sentence.
const FIRST_SENTENCE = /^[\s\S]*?(?:[.!?](?=\s|$)|(?=\n\s*\n))/;

// Field weights. The tool's own name says most about what it does; the title is its human
// form; the server name matters when a request names the service ("in github ..."); parameter
// names say what the tool works on; free text (descriptions) is long and diluted, so it weighs
// least but still catches paraphrases.
// Tuned on test/fixtures/search-sample.json (bench/surface/search-sample.mjs): recall is flat
// for name 1.5-3 and description 1-1.5; the middle of that plateau is kept, not its edge.
// The description's first sentence (summary) is indexed once more on its own: real servers
// open with what the tool does ("Create a new branch in a GitHub repository.") and follow with
// usage notes, examples and caveats that mention many other things; in the whole description
// those notes dilute the opening, alone the opening is short and BM25 rewards a match in it.
// Measured on the real-server corpus (docs/search.md): recall@1 +0.015 on both halves.
const BOOST = {
  name: 2,
  title: 2,
  server: 1.5,
  params: 1,
  description: 1.5,
  summary: 1,
  paramText: 0.4,
} as const;
type Field = keyof typeof BOOST;
const FIELDS = Object.keys(BOOST) as Field[];

type Doc = { id: number } & Record<Field, string>;

let miniSearch: typeof MiniSearch | undefined;

export class ToolIndex {
  readonly size: number;

  private constructor(
    private readonly tools: readonly SearchableTool[],
    private readonly servers: ReadonlySet<string>,
    private readonly mini: MiniSearch<Doc>,
  ) {
    this.size = tools.length;
  }

  static build(tools: readonly SearchableTool[]): ToolIndex {
    const kept = [...tools];
    // MiniSearch (its CommonJS build) loads with the first index: a session that never gets the
    // search surface, as most desktop sessions do not, never needs it.
    miniSearch ??= createRequire(import.meta.url)('minisearch') as typeof MiniSearch;
    const mini = new miniSearch<Doc>({
      fields: FIELDS,
      idField: 'id',
      // Fields hold pre-computed terms joined by spaces (see toDoc): the pipeline runs once, here.
      tokenize: (text) => (text === '' ? [] : text.split(' ')),
      processTerm: (t) => t,
      searchOptions: {
        boost: { ...BOOST },
        combineWith: 'OR',
        tokenize: (text) => (text === '' ? [] : text.split(' ')),
        processTerm: (t) => t,
        // Prefix: "navig" finds "navigate"; fuzzy: one typo in a longer word. Both score below
        // an exact match (MiniSearch's default weights 0.375 and 0.45).
        prefix: (t) => t.length >= 4,
        fuzzy: (t) => (t.length >= 6 ? 0.2 : false),
        maxFuzzy: 2,
      },
    });
    mini.addAll(kept.map((tool, id) => toDoc(tool, id)));
    return new ToolIndex(kept, new Set(kept.map((t) => t.server)), mini);
  }

  /**
   * Tools matching a request, best first. An empty request, one with no meaningful word, or an
   * unknown server filter gives []. Equal scores are ordered by public name, then server, so a
   * given index and request always give the same list.
   */
  search(query: string, opts: { limit?: number; server?: string } = {}): SearchHit[] {
    if (typeof query !== 'string') return [];
    const limit = clampLimit(opts.limit);
    const server = opts.server;
    if (server !== undefined && !this.servers.has(server)) return [];
    const qs = queryTerms(query);
    if (qs.length === 0) return [];
    const results = this.mini.search(qs.join(' '), {
      ...(server !== undefined ? { filter: (r) => this.tools[r.id as number]?.server === server } : {}),
    });
    const hits: SearchHit[] = [];
    for (const r of results) {
      const tool = this.tools[r.id as number];
      if (tool !== undefined) hits.push({ tool, score: r.score });
    }
    hits.sort(
      (a, b) => b.score - a.score || cmp(a.tool.name, b.tool.name) || cmp(a.tool.server, b.tool.server),
    );
    return hits.slice(0, limit);
  }
}

function clampLimit(limit: number | undefined): number {
  if (typeof limit !== 'number' || Number.isNaN(limit)) return DEFAULT_LIMIT;
  return Math.min(MAX_LIMIT, Math.max(MIN_LIMIT, Math.floor(limit)));
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** One tool as index fields, each already reduced to its terms. Never throws on odd shapes. */
function toDoc(tool: SearchableTool, id: number): Doc {
  const name = str(tool.name);
  const server = str(tool.server);
  // The public name carries the server as a prefix (github__create_issue); the name field gets
  // the tool's own part, so the server's words weigh as the server field says, not three times.
  const own = server !== '' && name.startsWith(`${server}__`) ? name.slice(server.length + 2) : name;
  const params: string[] = [];
  const paramText: string[] = [];
  const schema = tool.inputSchema;
  const props = isObject(schema) ? schema['properties'] : undefined;
  if (isObject(props)) {
    let n = 0;
    for (const [key, value] of Object.entries(props)) {
      if (n++ >= MAX_PARAMS) break;
      params.push(key);
      if (isObject(value)) {
        paramText.push(str(value['title']), str(value['description']));
      }
    }
  }
  const field = (text: string): string => terms(text.slice(0, MAX_FIELD_CHARS)).join(' ');
  const description = str(tool.description);
  return {
    id,
    name: field(own),
    title: field(str(tool.title)),
    server: field(server),
    params: field(params.join(' ')),
    description: field(description),
    summary: field(firstSentence(description)),
    paramText: field(paramText.join(' ')),
  };
}

/** What a description says first: its first sentence, at most MAX_SUMMARY_CHARS. */
function firstSentence(description: string): string {
  const text = description.slice(0, MAX_FIELD_CHARS).trim();
  return (FIRST_SENTENCE.exec(text)?.[0] ?? text).slice(0, MAX_SUMMARY_CHARS);
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}
