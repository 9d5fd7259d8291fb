#!/usr/bin/env node
// What each surface mode sends a host, in exact tokens, on the real-server corpus: the all-mode
// tools/list (every tool listed) against the search-mode one (search_tools and call_tool, whose
// descriptions name every server with its tool count and about-line), and what search_tools
// answers for the corpus' requests at the default limit. Needs a build (npm run build) and the
// corpus (node bench/surface/fetch-corpus.mjs).
//
//   node bench/surface/token-surface.mjs [--json] [--catalogue FILE] [--queries FILE]
//
// The lists and answers are made by the daemon's own functions (dist/surface/view.js), with the
// default surface config, so they are what mcpmux would send a host fronting these servers.
// Counted exactly with gpt-tokenizer's o200k_base (dist/surface/tokens.js), each tool's
// definition as JSON, as `mcpmux tools --tokens` counts them (the `{"tools":[...]}` envelope left
// out). The target: the search-mode list <= 5 % of the all-mode one for 300+ tools.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CATALOGUE } from './fetch-corpus.mjs';
import { QUERIES_FILE } from './recall.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DIST = join(ROOT, 'dist');
/** The target for the search-mode list, as a share of the all-mode one. */
export const TARGET_RATIO = 0.05;

const dist = (rel) => {
  const file = join(DIST, rel);
  if (!existsSync(file)) throw new Error(`${file} is missing (run \`npx tsc -p tsconfig.json\` first)`);
  return import(pathToFileURL(file).href);
};

const pct = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN);

export async function runTokenSurface({ catalogueFile = CATALOGUE, queriesFile = QUERIES_FILE } = {}) {
  if (!existsSync(catalogueFile)) throw new Error(`${catalogueFile} is missing: run node bench/surface/fetch-corpus.mjs`);
  const catalogue = JSON.parse(readFileSync(catalogueFile, 'utf8'));
  const queries = JSON.parse(readFileSync(queriesFile, 'utf8')).queries;
  const [{ buildToolView, searchSurfaceTools, searchableTools, searchToolResult }, { countTokens, estimateTokens, toolDefinitionText }, { aboutServer, SEARCH_RESULT_MAX_TOKENS }, { ToolIndex }, { compileGlobs }, { parseConfig }] =
    await Promise.all(['surface/view.js', 'surface/tokens.js', 'surface/meta-tools.js', 'surface/search-index.js', 'governance/glob.js', 'config/load.js'].map(dist));
  const { surface } = parseConfig(JSON.stringify({ mcpServers: {} }), 'token-surface', {});

  // Whole definitions when the catalogue has them (fetch-corpus.mjs since issue 20); an older
  // cache has only the searchable fields, which undercounts the all-mode list a little.
  const whole = Array.isArray(catalogue.definitions) && catalogue.definitions.length === catalogue.tools.length;
  const defs = whole ? catalogue.definitions : catalogue.tools.map(({ server: _s, ...t }) => t);
  const serverOf = new Map(catalogue.tools.map((t) => [t.name, t.server]));
  const rows = catalogue.servers.filter((s) => !s.error);
  const lists = rows.map((s) => ({ server: s.name, items: defs.filter((d) => serverOf.get(d.name) === s.name) }));
  const about = new Map(rows.map((s) => [s.name, aboutServer(s.serverInfo, s.instructions)]));
  const view = buildToolView(lists, () => true, (server) => about.get(server));

  const sum = async (tools) => {
    let n = 0;
    for (const t of tools) n += await countTokens(toolDefinitionText(t));
    return n;
  };
  const allTools = [...view.byName.values()].map((t) => t.tool);
  const all = { tools: allTools.length, tokens: await sum(allTools), estimate: view.tokens };
  const searchList = searchSurfaceTools(surface, view, compileGlobs(surface.alwaysVisible));
  // The two meta-tools, and the tools listed beside them (MCP Apps view tools, alwaysVisible).
  const metaTokens = await sum(searchList.slice(0, 2));
  const search = { tools: searchList.length, tokens: await sum(searchList), metaTokens, names: searchList.map((t) => t.name) };
  const ratio = search.tokens / all.tokens;

  // search_tools' answers at the default limit, for every request of the recall bench.
  const index = ToolIndex.build(searchableTools(view, surface));
  const answers = [];
  for (const q of queries) {
    const r = searchToolResult(surface, view, index, { query: q.query });
    const text = r.content[0].text;
    const structured = JSON.stringify(r.structuredContent);
    const t = await countTokens(text);
    const s = await countTokens(structured);
    answers.push({ query: q.query, tools: r.structuredContent.tools.length, cut: /more left out/.test(text.split('\n')[0]), text: t, structured: s, total: t + s, estimate: estimateTokens(text) + estimateTokens(structured) });
  }
  const byTotal = [...answers].sort((a, b) => a.total - b.total);
  const dist1 = (k) => {
    const xs = answers.map((a) => a[k]).sort((a, b) => a - b);
    return { p50: pct(xs, 50), p95: pct(xs, 95), max: xs[xs.length - 1] };
  };
  return {
    encoding: 'o200k_base',
    corpus: { servers: rows.length, tools: all.tools, wholeDefinitions: whole },
    surface: { searchLimit: surface.searchLimit, maxDirectTools: surface.maxDirectTools, maxDirectTokens: surface.maxDirectTokens },
    all,
    search,
    ratio,
    target: { ratio: TARGET_RATIO, met: ratio <= TARGET_RATIO },
    answers: {
      requests: answers.length,
      limit: surface.searchLimit,
      budget: SEARCH_RESULT_MAX_TOKENS,
      text: dist1('text'),
      structured: dist1('structured'),
      total: dist1('total'),
      /** Answers over the budget counted exactly (the daemon cuts on its estimate). */
      overBudget: answers.filter((a) => a.total > SEARCH_RESULT_MAX_TOKENS).length,
      /** Answers the budget cut short (fewer than `limit` tools although more matched). */
      cut: answers.filter((a) => a.cut).length,
      /** The median answer, as an example. */
      typical: byTotal[Math.floor(byTotal.length / 2)],
    },
  };
}

const n = (x) => x.toLocaleString('en-US');

export function renderTokenSurface(r) {
  const L = [];
  L.push(`Tokens a host is sent (exact, ${r.encoding}), ${r.corpus.servers} real servers, ${r.corpus.tools} tools${r.corpus.wholeDefinitions ? '' : ' (old cache: searchable fields only, run fetch-corpus.mjs --refresh)'}:`);
  L.push('');
  L.push('| surface | tools listed | tokens | share of all |');
  L.push('|---|---:|---:|---:|');
  L.push(`| all (every tool listed; the daemon's estimate: ${n(r.all.estimate)}) | ${r.all.tools} | ${n(r.all.tokens)} | 100 % |`);
  L.push(`| search (${r.search.names.join(', ')}) | ${r.search.tools} | ${n(r.search.tokens)} | ${(r.ratio * 100).toFixed(1)} % |`);
  L.push('');
  L.push(`search-mode list: the meta-tools ${n(r.search.metaTokens)} tokens, the ${r.search.tools - 2} tools listed beside them (MCP Apps views, alwaysVisible) ${n(r.search.tokens - r.search.metaTokens)}`);
  L.push(`search-mode list / all-mode list: ${(r.ratio * 100).toFixed(1)} % (target <= ${r.target.ratio * 100} %: ${r.target.met ? 'ok' : '**MISSED**'})`);
  const a = r.answers;
  L.push(
    `search_tools answers (${a.requests} requests, limit ${a.limit}): text p50 ${n(a.text.p50)} / p95 ${n(a.text.p95)}, structuredContent p50 ${n(a.structured.p50)} / p95 ${n(a.structured.p95)}, ` +
      `both p50 ${n(a.total.p50)} / p95 ${n(a.total.p95)} / max ${n(a.total.max)} tokens (budget SEARCH_RESULT_MAX_TOKENS ${n(a.budget)}, on the estimate: ${a.cut} answers cut short by it, ${a.overBudget} over it counted exactly)`,
  );
  L.push(`typical answer: "${a.typical.query}": ${a.typical.tools} tools, ${n(a.typical.text)} + ${n(a.typical.structured)} = ${n(a.typical.total)} tokens`);
  return L.join('\n') + '\n';
}

async function main() {
  const argv = process.argv.slice(2);
  const o = { json: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--json') o.json = true;
    else if (argv[i] === '--catalogue' && argv[i + 1]) o.catalogueFile = argv[++i];
    else if (argv[i] === '--queries' && argv[i + 1]) o.queriesFile = argv[++i];
    else {
      process.stderr.write('usage: node bench/surface/token-surface.mjs [--json] [--catalogue FILE] [--queries FILE]\n');
      process.exit(2);
    }
  }
  let r;
  try {
    r = await runTokenSurface(o);
  } catch (e) {
    process.stderr.write(`token-surface: ${e.message}\n`);
    process.exit(1);
  }
  process.stdout.write(o.json ? JSON.stringify(r, null, 2) + '\n' : renderTokenSurface(r));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
