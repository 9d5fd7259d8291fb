// The tool-search benchmark's inputs and harness, without the network: the hand-written requests
// (bench/surface/queries.json) must be well-formed against the pinned servers
// (bench/surface/servers.json), and the recall harness must score a small catalogue correctly
// with the baseline engine. The real corpus is fetched only by `npm run bench`.

import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { countTokens } from '../src/surface/tokens.js';
import { SEARCH_RESULT_MAX_TOKENS } from '../src/surface/meta-tools.js';
import { exitWithin, ROOT, tempDir } from './helpers/harness.js';

/** Runs a bench/surface script with --json and `args`; its output parsed (exit 0 required). */
async function benchJson(script: string, args: string[]): Promise<any> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bench/surface', script), '--json', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (err += c.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  expect(await exitWithin(child, exited, 60_000), err).toBe(0);
  return JSON.parse(out);
}

interface Server {
  name: string;
  package: string;
  version: string;
  args?: string[];
  bin?: string;
  env?: Record<string, string>;
  comment?: string;
}
interface Query {
  query: string;
  kind: string;
  expect: string[];
}

const servers: Server[] = JSON.parse(readFileSync(path.join(ROOT, 'bench/surface/servers.json'), 'utf8')).servers;
const dropped: Server[] = JSON.parse(readFileSync(path.join(ROOT, 'bench/surface/servers.json'), 'utf8')).dropped ?? [];
const queries: Query[] = JSON.parse(readFileSync(path.join(ROOT, 'bench/surface/queries.json'), 'utf8')).queries;

describe('bench/surface/servers.json', () => {
  it('pins a few dozen servers to exact npm versions under short unique prefixes', () => {
    expect(servers.length).toBeGreaterThanOrEqual(25);
    const names = servers.map((s) => s.name);
    expect(new Set(names).size).toBe(names.length);
    for (const s of servers) {
      expect(s.name, s.package).toMatch(/^[a-z][a-z0-9]*$/); // no `__`: it separates server and tool
      expect(s.version, s.package).toMatch(/^\d+\.\d+\.\d+(-[\w.]+)?$/); // exact, no ranges
      expect(s.package).toMatch(/^(@[a-z0-9._-]+\/)?[a-z0-9._-]+$/);
      for (const v of Object.values(s.env ?? {})) expect(v, `${s.name} env`).not.toMatch(/token|secret|key/i);
    }
    for (const d of dropped) expect(d.comment, `${d.package} is dropped without a reason`).toBeTruthy();
  });
});

describe('bench/surface/queries.json', () => {
  it('holds at least 150 distinct requests, each of a known kind', () => {
    expect(queries.length).toBeGreaterThanOrEqual(150);
    const seen = new Set<string>();
    for (const q of queries) {
      expect(typeof q.query).toBe('string');
      const key = q.query.trim().toLowerCase().replace(/\s+/g, ' ');
      expect(seen.has(key), `duplicate request: ${q.query}`).toBe(false);
      seen.add(key);
      expect(['direct', 'paraphrase', 'ambiguous'], q.query).toContain(q.kind);
    }
    for (const kind of ['direct', 'paraphrase', 'ambiguous']) expect(queries.filter((q) => q.kind === kind).length, kind).toBeGreaterThanOrEqual(25);
  });

  it('expects only `server__tool` names of pinned servers, and ambiguous requests span servers', () => {
    const pinned = new Set(servers.map((s) => s.name));
    for (const q of queries) {
      expect(q.expect.length, q.query).toBeGreaterThan(0);
      expect(new Set(q.expect).size, `${q.query}: an expected tool twice`).toBe(q.expect.length);
      for (const name of q.expect) {
        expect(name, q.query).toMatch(/^[a-z][a-z0-9]*__[A-Za-z0-9_.-]+$/);
        expect(pinned.has(name.split('__')[0]), `${q.query}: ${name} is of no pinned server`).toBe(true);
      }
      if (q.kind === 'ambiguous') expect(new Set(q.expect.map((n) => n.split('__')[0])).size, `${q.query}: ambiguous within one server`).toBeGreaterThan(1);
    }
  });

  it('is spread across the servers: most pinned servers are asked about', () => {
    const asked = new Set(queries.flatMap((q) => q.expect.map((n) => n.split('__')[0])));
    expect(asked.size).toBeGreaterThanOrEqual(Math.ceil(servers.length * 0.8));
  });

  it('does not copy tool names: no request contains the tool name it expects', () => {
    for (const q of queries)
      for (const name of q.expect) {
        const tool = name.split('__')[1];
        if (/[_-]/.test(tool) || /[a-z][A-Z]/.test(tool)) expect(q.query.toLowerCase(), q.query).not.toContain(tool.toLowerCase());
      }
  });
});

describe('bench/surface/recall.mjs', () => {
  it('scores a small catalogue with the baseline engine: ranks, recall by kind, MRR and skipped requests', async () => {
    const dir = tempDir();
    const catalogue = path.join(dir, 'catalogue.json');
    const qfile = path.join(dir, 'queries.json');
    const tool = (server: string, name: string, description: string, params: Record<string, string> = {}) => ({
      name: `${server}__${name}`,
      server,
      description,
      inputSchema: { type: 'object', properties: Object.fromEntries(Object.entries(params).map(([k, d]) => [k, { type: 'string', description: d }])) },
    });
    writeFileSync(
      catalogue,
      JSON.stringify({
        fetchedAt: 'test',
        servers: [{ name: 'fs', tools: 2 }, { name: 'gh', tools: 2 }, { name: 'gone', error: 'list: no answer' }],
        tools: [
          tool('fs', 'read_file', 'Read the complete contents of a file from disk', { path: 'file path' }),
          tool('fs', 'list_directory', 'List entries of a directory', { path: 'directory path' }),
          tool('gh', 'create_issue', 'Open a new issue in a repository', { title: 'issue title' }),
          tool('gh', 'search_code', 'Search source code across repositories', { q: 'query' }),
        ],
      }),
    );
    writeFileSync(
      qfile,
      JSON.stringify({
        queries: [
          { query: 'read a file', kind: 'direct', expect: ['fs__read_file'] }, // rank 1
          { query: 'open an issue', kind: 'paraphrase', expect: ['gh__create_issue'] }, // rank 1
          { query: 'zebra', kind: 'paraphrase', expect: ['fs__read_file'] }, // no hit
          { query: 'search repositories code', kind: 'ambiguous', expect: ['gh__search_code', 'fs__list_directory'] },
          { query: 'anything', kind: 'direct', expect: ['gone__tool'] }, // server absent: skipped
        ],
      }),
    );
    const r = await benchJson('recall.mjs', ['--engine', 'baseline', '--catalogue', catalogue, '--queries', qfile]);
    expect(r.engine).toBe('baseline');
    expect(r.corpus).toMatchObject({ servers: 2, tools: 4, serversFailed: ['gone'] });
    expect(r.queries).toEqual({ total: 5, scored: 4, skipped: 1 });
    expect(r.overall).toEqual({ n: 4, r1: 0.75, r5: 0.75, r10: 0.75, mrr: 0.75 });
    expect(r.byKind.direct).toEqual({ n: 1, r1: 1, r5: 1, r10: 1, mrr: 1 });
    expect(r.byKind.paraphrase).toEqual({ n: 2, r1: 0.5, r5: 0.5, r10: 0.5, mrr: 0.5 });
    expect(r.byKind.ambiguous.r1).toBe(1);
    expect(r.misses.map((m: { query: string }) => m.query)).toEqual(['zebra']);
    for (const k of ['p50Ms', 'p95Ms', 'p50Ms1000', 'p95Ms1000']) expect(Number.isFinite(r.latency[k]), k).toBe(true);
    expect(r.build.ms1000).toBeGreaterThan(0);
  }, 90_000);
});

describe('bench/surface/token-surface.mjs', () => {
  it('counts the all-mode and search-mode lists of a small catalogue exactly, and sizes search answers', async () => {
    const dir = tempDir();
    const catalogue = path.join(dir, 'catalogue.json');
    const qfile = path.join(dir, 'queries.json');
    const def = (server: string, name: string, description: string, extra: object = {}) => ({
      name: `${server}__${name}`,
      description,
      inputSchema: { type: 'object', properties: { path: { type: 'string', description: 'a path' } } },
      annotations: { readOnlyHint: true },
      ...extra,
    });
    const definitions = [
      def('fs', 'read_file', 'Read the complete contents of a file from disk'),
      def('fs', 'preview', 'Show a file in a preview pane', { _meta: { ui: { resourceUri: 'ui://fs/preview' } } }),
      def('gh', 'create_issue', 'Open a new issue in a repository'),
    ];
    const server = (name: string) => (d: { name: string }) => d.name.startsWith(`${name}__`);
    const searchable = (s: string) => definitions.filter(server(s)).map((d) => ({ name: d.name, server: s, description: d.description, inputSchema: d.inputSchema }));
    writeFileSync(
      catalogue,
      JSON.stringify({
        servers: [
          { name: 'fs', tools: 2, serverInfo: { name: 'fs', version: '1', description: 'Files on disk' } },
          { name: 'gh', tools: 1, serverInfo: { name: 'gh', version: '1' }, instructions: 'GitHub issues. Needs a token.' },
          { name: 'gone', error: 'list: no answer' },
        ],
        tools: [...searchable('fs'), ...searchable('gh')],
        definitions,
      }),
    );
    writeFileSync(qfile, JSON.stringify({ queries: [{ query: 'read a file', kind: 'direct', expect: ['fs__read_file'] }, { query: 'open an issue', kind: 'paraphrase', expect: ['gh__create_issue'] }] }));
    const r = await benchJson('token-surface.mjs', ['--catalogue', catalogue, '--queries', qfile]);
    expect(r.corpus).toEqual({ servers: 2, tools: 3, wholeDefinitions: true });
    let exact = 0;
    for (const d of definitions) exact += await countTokens(JSON.stringify(d));
    expect(r.all.tokens).toBe(exact);
    // The tool that opens an MCP Apps view stays listed beside the meta-tools.
    expect(r.search.names).toEqual(['search_tools', 'call_tool', 'fs__preview']);
    expect(r.ratio).toBeCloseTo(r.search.tokens / r.all.tokens, 10);
    expect(r.answers).toMatchObject({ requests: 2, limit: 8, budget: SEARCH_RESULT_MAX_TOKENS, cut: 0, overBudget: 0 });
    expect(r.answers.total.max).toBeGreaterThan(0);
  });
});
