// The tool search engine (src/surface/search-index.ts) on a fixed sample of tools modelled on
// common MCP servers and requests phrased as users phrase them (test/fixtures/search-sample.json),
// plus the bad input a host can send. Speed is measured in bench/surface/, not here.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ToolIndex, type SearchableTool } from '../src/surface/search-index.js';
import { queryTerms, terms, words } from '../src/surface/terms.js';

interface Sample {
  tools: SearchableTool[];
  queries: { query: string; expect: string[]; kind: 'direct' | 'paraphrase' | 'ambiguous' }[];
}
const sample = JSON.parse(
  readFileSync(new URL('./fixtures/search-sample.json', import.meta.url), 'utf8'),
) as Sample;
const index = ToolIndex.build(sample.tools);

/** 1-based rank of the first expected tool in the top 10, 0 when absent. */
function rank(q: Sample['queries'][number]): number {
  const names = index.search(q.query, { limit: 10 }).map((h) => h.tool.name);
  return names.findIndex((n) => q.expect.includes(n)) + 1;
}

describe('ranking on the sample', () => {
  it('has the size the brief asks for, and every expected tool exists', () => {
    expect(sample.tools.length).toBeGreaterThanOrEqual(55);
    expect(sample.queries.length).toBeGreaterThanOrEqual(40);
    const names = new Set(sample.tools.map((t) => t.name));
    for (const q of sample.queries) for (const e of q.expect) expect(names, q.query).toContain(e);
    expect(index.size).toBe(sample.tools.length);
  });

  it('recall@5 >= 0.9 and recall@1 >= 0.65 over all requests, and for each kind recall@5 >= 0.85', () => {
    const ranks = sample.queries.map((q) => ({ kind: q.kind, r: rank(q) }));
    const recall = (rs: typeof ranks, k: number): number => rs.filter((x) => x.r >= 1 && x.r <= k).length / rs.length;
    expect(recall(ranks, 5)).toBeGreaterThanOrEqual(0.9);
    expect(recall(ranks, 1)).toBeGreaterThanOrEqual(0.65);
    for (const kind of ['direct', 'paraphrase', 'ambiguous'] as const) {
      const of = ranks.filter((x) => x.kind === kind);
      expect(of.length, kind).toBeGreaterThan(0);
      expect(recall(of, 5), kind).toBeGreaterThanOrEqual(0.85);
    }
  });

  it('finds a tool by its exact public name and by the name with the server part dropped', () => {
    expect(index.search('github__merge_pull_request')[0]?.tool.name).toBe('github__merge_pull_request');
    expect(index.search('browser_take_screenshot')[0]?.tool.name).toBe('browser__browser_take_screenshot');
    expect(index.search('getCurrentTime')[0]?.tool.name).toBe('time__get_current_time');
  });

  it('a typo of one letter and a word cut short still find the tool', () => {
    expect(index.search('screnshot')[0]?.tool.name).toBe('browser__browser_take_screenshot');
    expect(index.search('navig')[0]?.tool.name).toBe('browser__browser_navigate');
  });

  it('a request naming a service ranks that service first when two servers have the same tool', () => {
    expect(index.search('create an issue in linear')[0]?.tool.name).toBe('linear__create_issue');
    expect(index.search('create an issue on github')[0]?.tool.name).toBe('github__create_issue');
  });

  it("a match in the description's first sentence outranks one in a shorter description's notes", () => {
    // What a tool does is said first; later sentences are usage notes that mention other things.
    const idx = ToolIndex.build([
      {
        name: 'a__capture',
        server: 'a',
        description:
          'Capture a screenshot of the current page.\nThe image is returned as PNG unless a format is given, ' +
          'and it covers the visible viewport unless the whole document is asked for. Large pages are cut at ' +
          'the maximum height the browser supports.',
      },
      { name: 'b__navigate', server: 'b', description: 'Navigate to a URL. Waits for load; no screenshot is taken.' },
    ]);
    expect(idx.search('screenshot').map((h) => h.tool.name)).toEqual(['a__capture', 'b__navigate']);
  });

  it('scores are positive and ordered best first', () => {
    const hits = index.search('create issue', { limit: 50 });
    expect(hits.length).toBeGreaterThan(2);
    for (const h of hits) expect(h.score).toBeGreaterThan(0);
    for (let i = 1; i < hits.length; i++) expect(hits[i - 1]!.score).toBeGreaterThanOrEqual(hits[i]!.score);
  });
});

describe('ties and ordering', () => {
  it('equal scores are ordered by public name then server, whatever the input order', () => {
    const twin = (name: string, server: string): SearchableTool => ({ name, server, description: 'Send a message.' });
    const tools = [twin('b__send', 'b'), twin('a__send', 'a'), twin('c__send', 'c'), twin('a__send', 'z')];
    const forward = ToolIndex.build(tools).search('send message').map((h) => `${h.tool.name}@${h.tool.server}`);
    const backward = ToolIndex.build([...tools].reverse()).search('send message').map((h) => `${h.tool.name}@${h.tool.server}`);
    expect(forward).toEqual(['a__send@a', 'a__send@z', 'b__send@b', 'c__send@c']);
    expect(backward).toEqual(forward);
  });

  it('the same index and request always give the same hits', () => {
    const once = index.search('search for something', { limit: 50 });
    for (let i = 0; i < 5; i++) expect(index.search('search for something', { limit: 50 })).toEqual(once);
  });
});

describe('bad input is safe', () => {
  it('an empty, blank or stop-word-only request gives []', () => {
    expect(index.search('')).toEqual([]);
    expect(index.search('   \n\t')).toEqual([]);
    expect(index.search('can you please help me with this')).toEqual([]);
    expect(index.search('!!! ??? ...')).toEqual([]);
  });

  it('a request that is not a string gives [] rather than throwing', () => {
    expect(index.search(undefined as unknown as string)).toEqual([]);
    expect(index.search(42 as unknown as string)).toEqual([]);
  });

  it('a 10 KB request is bounded to 64 distinct terms and still answers', () => {
    // Padding of distinct letter-only words that match no tool (qz + i in letters a-j).
    const pad = (i: number): string => `qz${String(i).replace(/[0-9]/g, (d) => 'abcdefghij'[Number(d)]!)}`;
    const big = Array.from({ length: 2000 }, (_, i) => pad(i)).join(' ');
    expect(big.length).toBeGreaterThan(10_240);
    expect(queryTerms(big).length).toBeLessThanOrEqual(64);
    // The request's meaningful words come first, then padding: the first 64 terms decide.
    const hits = index.search(`take a screenshot of the page ${big}`);
    expect(hits[0]?.tool.name).toBe('browser__browser_take_screenshot');
    // Words past the first 64 terms are ignored: a tool named only there is not found.
    expect(index.search(`${big} screenshot`)).toEqual([]);
  });

  it('limit is clamped into [1, 50]; no limit means 8; non-numbers mean 8', () => {
    expect(index.search('file', { limit: 0 })).toHaveLength(1);
    expect(index.search('file', { limit: -5 })).toHaveLength(1);
    expect(index.search('file', { limit: 2.9 })).toHaveLength(2);
    expect(index.search('file')).toHaveLength(8);
    expect(index.search('file', { limit: Number.NaN })).toHaveLength(8);
    expect(index.search('file', { limit: '3' as unknown as number })).toHaveLength(8);
    const many = ToolIndex.build(
      Array.from({ length: 120 }, (_, i) => ({ name: `s__tool_${i}`, server: 's', description: 'Reads a file.' })),
    );
    expect(many.search('read file', { limit: 10_000 })).toHaveLength(50);
    expect(many.search('read file', { limit: Number.POSITIVE_INFINITY })).toHaveLength(50);
  });

  it('the server filter keeps only that server; an unknown server gives []', () => {
    const hits = index.search('create issue', { server: 'linear', limit: 50 });
    expect(hits.length).toBeGreaterThan(0);
    for (const h of hits) expect(h.tool.server).toBe('linear');
    expect(hits[0]?.tool.name).toBe('linear__create_issue');
    expect(index.search('create issue', { server: 'nope' })).toEqual([]);
    expect(index.search('create issue', { server: '' })).toEqual([]);
  });

  it('tools with missing or odd fields are indexed without throwing and found by what they have', () => {
    const odd = [
      { name: 'x__bare', server: 'x' },
      { name: 'x__schema_string', server: 'x', inputSchema: 'not an object' },
      { name: 'x__schema_null', server: 'x', inputSchema: null },
      { name: 'x__props_array', server: 'x', inputSchema: { properties: ['a', 'b'] } },
      { name: 'x__props_string', server: 'x', inputSchema: { properties: 'nope' } },
      { name: 'x__prop_values_odd', server: 'x', inputSchema: { properties: { zebra: null, yak: 7, gnu: { description: 9 } } } },
      { name: 'x__wrong_types', server: 'x', title: 5, description: { text: 'no' } },
      { name: 'x__huge', server: 'x', description: 'giraffe '.repeat(100_000) },
      { name: 7, server: null },
    ] as unknown as SearchableTool[];
    const oddIndex = ToolIndex.build(odd);
    expect(oddIndex.size).toBe(odd.length);
    expect(oddIndex.search('bare')[0]?.tool.name).toBe('x__bare');
    expect(oddIndex.search('zebra')[0]?.tool.name).toBe('x__prop_values_odd');
    expect(oddIndex.search('giraffe')[0]?.tool.name).toBe('x__huge');
    expect(ToolIndex.build([]).search('anything')).toEqual([]);
    expect(ToolIndex.build([]).size).toBe(0);
  });

  it('a schema with thousands of parameters is read only up to its first 64', () => {
    const properties: Record<string, unknown> = Object.fromEntries(
      Array.from({ length: 5000 }, (_, i) => [`param${i}`, { type: 'string' }]),
    );
    properties['zebra'] = { type: 'string' };
    const idx = ToolIndex.build([{ name: 'x__wide', server: 'x', inputSchema: { properties } }]);
    expect(idx.search('param3')[0]?.tool.name).toBe('x__wide');
    expect(idx.search('zebra')).toEqual([]);
  });
});

describe('terms', () => {
  it('splits snake_case, camelCase, kebab-case, dotted names, acronyms and digits', () => {
    expect(words('create_pull_request')).toEqual(['create', 'pr']);
    expect(words('getHTMLPage')).toEqual(['get', 'html', 'page']);
    expect(words('list-open-issues')).toEqual(['list', 'open', 'issues']);
    expect(words('files.read_text')).toEqual(['files', 'read', 'text']);
    expect(words('base64 s3')).toEqual(['base64', 'base', '64', 's3', 's', '3']);
  });

  it('keeps a capitalised name with an inner capital whole (GitHub, MongoDB); identifiers still split', () => {
    expect(words('open it on GitHub')).toEqual(['open', 'it', 'on', 'github']);
    expect(words('MongoDB JavaScript CircleCI')).toEqual(['mongodb', 'javascript', 'circleci']);
    expect(words('getCurrentTime HTMLParser')).toEqual(['get', 'current', 'time', 'html', 'parser']);
    // "GitHub" in a request reaches the github server, not the git server by its first half
    const idx = ToolIndex.build([
      { name: 'git__git_branch', server: 'git', description: 'List, create or delete branches of a local git repository.' },
      { name: 'github__create_branch', server: 'github', description: 'Create a new branch in a GitHub repository.' },
    ]);
    expect(idx.search('start a new branch on GitHub')[0]?.tool.name).toBe('github__create_branch');
  });

  it('stems, drops stop words and folds the synonym table onto one term', () => {
    expect(terms('Please remove the folders')).toEqual(terms('delete directory'));
    expect(terms('add a new ticket')).toEqual(terms('create create issue'));
    expect(terms('find repositories')).toEqual(terms('search repo'));
    expect(terms('merge requests')).toEqual(terms('PR'));
    // get and list stay apart: they tell a server's own tools apart
    expect(terms('get')).not.toEqual(terms('list'));
  });

  it('drops pronouns, quantifiers and contraction halves, but keeps other, only and directions', () => {
    expect(terms("how many of them don't we have")).toEqual([]);
    expect(terms('the other branch')).toEqual(terms('other branch'));
    expect(terms('other read-only scroll down')).toHaveLength(5);
    // "many" no longer matches tools named after it (insert-many) over the one that counts
    const idx = ToolIndex.build([
      { name: 'db__count', server: 'db', description: 'Count documents.' },
      { name: 'db__insert-many', server: 'db', description: 'Insert many documents into a collection in one call.' },
    ]);
    expect(idx.search('how many documents are there')[0]?.tool.name).toBe('db__count');
  });

  it('folds general verbs and the abbreviations developers write onto one term', () => {
    expect(terms('execute the script')).toEqual(terms('run script'));
    expect(terms('retrieve the page')).toEqual(terms('fetch page'));
    expect(terms('modify settings')).toEqual(terms('edit settings'));
    expect(terms('display the db env vars')).toEqual(terms('show database environment variables'));
    expect(terms('launch the app')).toEqual(terms('start application'));
    // a group folds by stem: "set" must not become "config" through settings -> set
    expect(terms('set')).not.toEqual(terms('config'));
    expect(terms('read')).not.toEqual(terms('write'));
  });
});
