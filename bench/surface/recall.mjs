#!/usr/bin/env node
// Recall benchmark of tool search on the real-server corpus: builds the index over the fetched
// catalogue, runs every request of bench/surface/queries.json and prints recall@1/@5/@10 and
// MRR (overall and by kind), search latency p50/p95 and index build time.
//
//   node bench/surface/recall.mjs [--json] [--engine auto|dist|baseline|FILE] [--misses] [--no-fetch]
//                                 [--catalogue FILE] [--queries FILE] [--half even|odd] [--split]
//
// --half even|odd scores only the requests at even (0, 2, ...) or odd positions of queries.json;
// --split prints the whole set and both halves. Ranking changes are tuned looking at the misses
// of one half only (even) and reported on both, so a change that helps only the requests it was
// tuned on shows as a gap between the halves (docs/search.md).
//
// --engine auto (default): dist/surface/search-index.js when built, else the plain baseline
// (bench/surface/baseline-search.mjs, same API); FILE: any module exporting ToolIndex. A request counts as found at rank r when any of
// its `expect` tools is the r-th result; requests whose expected tools are all missing from the
// catalogue (their server failed to list) are skipped and counted as such, never as misses.

import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CATALOGUE, fetchCorpus } from './fetch-corpus.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const QUERIES_FILE = join(ROOT, 'bench', 'surface', 'queries.json');
const DIST_ENGINE = join(ROOT, 'dist', 'surface', 'search-index.js');
const BASELINE_ENGINE = join(ROOT, 'bench', 'surface', 'baseline-search.mjs');
const KINDS = ['direct', 'paraphrase', 'ambiguous'];
const DEPTH = 10;

export async function loadEngine(which = 'auto') {
  let file = which === 'baseline' || (which === 'auto' && !existsSync(DIST_ENGINE)) ? BASELINE_ENGINE : DIST_ENGINE;
  if (!['auto', 'dist', 'baseline'].includes(which)) file = resolve(which); // a module path: compare another engine
  if (!existsSync(file)) throw new Error(`${file} is missing (run \`npx tsc -p tsconfig.json\` first)`);
  const mod = await import(pathToFileURL(file).href);
  if (typeof mod.ToolIndex?.build !== 'function') throw new Error(`${file} exports no ToolIndex.build`);
  return { ToolIndex: mod.ToolIndex, engine: file === BASELINE_ENGINE ? 'baseline' : file === DIST_ENGINE ? 'dist/surface/search-index.js' : file };
}

const pct = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN);
const median = (xs) => pct([...xs].sort((a, b) => a - b), 50);

/** The same catalogue grown (or cut) to n tools by repeating it under renamed servers. */
function scaled(tools, n) {
  const out = [];
  for (let i = 0; out.length < n; i++) {
    const t = tools[i % tools.length];
    const round = Math.floor(i / tools.length);
    out.push(round === 0 ? t : { ...t, server: `${t.server}${round}`, name: `${t.server}${round}__${t.name.slice(t.server.length + 2)}` });
  }
  return out;
}

function timeBuild(ToolIndex, tools, reps) {
  const ms = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    ToolIndex.build(tools);
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

export function score(ranks) {
  const n = ranks.length;
  const at = (k) => (n ? ranks.filter((r) => r > 0 && r <= k).length / n : NaN);
  return { n, r1: at(1), r5: at(5), r10: at(10), mrr: n ? ranks.reduce((s, r) => s + (r > 0 ? 1 / r : 0), 0) / n : NaN };
}

export async function runRecall({ engine = 'auto', fetch = true, catalogueFile, queriesFile = QUERIES_FILE, latencyReps = 5, half } = {}) {
  let catalogue;
  if (catalogueFile) catalogue = JSON.parse(readFileSync(catalogueFile, 'utf8'));
  else if (existsSync(CATALOGUE) || !fetch) {
    if (!existsSync(CATALOGUE)) throw new Error(`${CATALOGUE} is missing: run node bench/surface/fetch-corpus.mjs`);
    catalogue = JSON.parse(readFileSync(CATALOGUE, 'utf8'));
  } else catalogue = (await fetchCorpus({ quiet: false })).catalogue;
  const all = JSON.parse(readFileSync(queriesFile, 'utf8')).queries;
  const queries = half === undefined ? all : all.filter((_q, i) => i % 2 === (half === 'even' ? 0 : 1));
  const { ToolIndex, engine: engineName } = await loadEngine(engine);
  const tools = catalogue.tools;
  const known = new Set(tools.map((t) => t.name));

  const buildMs = timeBuild(ToolIndex, tools, 5);
  const build1000Ms = timeBuild(ToolIndex, scaled(tools, 1000), 5);
  const index = ToolIndex.build(tools);

  const rows = [];
  let skipped = 0;
  for (const q of queries) {
    const expect = q.expect.filter((n) => known.has(n));
    if (expect.length === 0) {
      skipped++;
      continue;
    }
    const hits = index.search(q.query, { limit: DEPTH });
    const rank = hits.findIndex((h) => expect.includes(h.tool.name)) + 1; // 0: not in the top DEPTH
    rows.push({ query: q.query, kind: q.kind, expect, rank, top: hits.slice(0, 3).map((h) => h.tool.name) });
  }

  // Latency: every request, latencyReps times, after one warm-up pass (the index is warm in the
  // daemon too: it is built off the request path).
  for (const q of queries) index.search(q.query, { limit: DEPTH });
  const lat = [];
  for (let r = 0; r < latencyReps; r++)
    for (const q of queries) {
      const t0 = performance.now();
      index.search(q.query, { limit: 8 });
      lat.push(performance.now() - t0);
    }
  lat.sort((a, b) => a - b);
  const big = ToolIndex.build(scaled(tools, 1000));
  const lat1000 = [];
  for (const q of queries) {
    const t0 = performance.now();
    big.search(q.query, { limit: 8 });
    lat1000.push(performance.now() - t0);
  }
  lat1000.sort((a, b) => a - b);

  const byKind = {};
  for (const k of KINDS) byKind[k] = score(rows.filter((r) => r.kind === k).map((r) => r.rank));
  return {
    half: half ?? 'all',
    engine: engineName,
    corpus: {
      servers: catalogue.servers.filter((s) => !s.error).length,
      serversFailed: catalogue.servers.filter((s) => s.error).map((s) => s.name),
      tools: tools.length,
      fetchedAt: catalogue.fetchedAt,
    },
    queries: { total: queries.length, scored: rows.length, skipped },
    overall: score(rows.map((r) => r.rank)),
    byKind,
    latency: { p50Ms: pct(lat, 50), p95Ms: pct(lat, 95), p50Ms1000: pct(lat1000, 50), p95Ms1000: pct(lat1000, 95) },
    build: { ms: buildMs, ms1000: build1000Ms },
    misses: rows.filter((r) => r.rank === 0 || r.rank > 5),
  };
}

const f2 = (x) => (Number.isFinite(x) ? x.toFixed(2) : 'n/a');
const f3 = (x) => (Number.isFinite(x) ? x.toFixed(3) : 'n/a');

export function renderRecall(r, { misses = false } = {}) {
  const lines = [];
  lines.push(`Tool search recall (${r.engine}) on ${r.corpus.servers} real servers, ${r.corpus.tools} tools${r.half === 'all' ? '' : `, ${r.half} half of the requests`}`);
  if (r.corpus.serversFailed.length) lines.push(`  servers that did not list this time: ${r.corpus.serversFailed.join(', ')}`);
  lines.push(`  ${r.queries.scored} requests scored${r.queries.skipped ? `, ${r.queries.skipped} skipped (their tools are not in this catalogue)` : ''}`);
  lines.push('');
  lines.push('| requests | n | recall@1 | recall@5 | recall@10 | MRR |');
  lines.push('|---|---:|---:|---:|---:|---:|');
  const row = (label, s) => lines.push(`| ${label} | ${s.n} | ${f2(s.r1)} | ${f2(s.r5)} | ${f2(s.r10)} | ${f2(s.mrr)} |`);
  row('all', r.overall);
  for (const k of KINDS) row(k, r.byKind[k]);
  lines.push('');
  lines.push(`search latency: p50 ${f3(r.latency.p50Ms)} ms, p95 ${f3(r.latency.p95Ms)} ms (${r.corpus.tools} tools); p50 ${f3(r.latency.p50Ms1000)} ms, p95 ${f3(r.latency.p95Ms1000)} ms (1 000 tools)`);
  lines.push(`index build: ${f2(r.build.ms)} ms (${r.corpus.tools} tools), ${f2(r.build.ms1000)} ms (1 000 tools: the corpus repeated under renamed servers)`);
  if (misses && r.misses.length) {
    lines.push('');
    lines.push('requests not in the top 5:');
    for (const m of r.misses) lines.push(`  [${m.kind}] ${m.query}\n      want ${m.expect.join(' | ')}  rank ${m.rank || '>10'}  got ${m.top.join(', ')}`);
  }
  return lines.join('\n') + '\n';
}

async function main() {
  const argv = process.argv.slice(2);
  const o = { json: false, engine: 'auto', misses: false, fetch: true, split: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--json') o.json = true;
    else if (a === '--misses') o.misses = true;
    else if (a === '--no-fetch') o.fetch = false;
    else if (a === '--engine' && argv[i + 1]) o.engine = argv[++i];
    else if (a === '--catalogue') o.catalogueFile = argv[++i];
    else if (a === '--queries') o.queriesFile = argv[++i];
    else if (a === '--half' && (argv[i + 1] === 'even' || argv[i + 1] === 'odd')) o.half = argv[++i];
    else if (a === '--split') o.split = true;
    else {
      process.stderr.write('usage: node bench/surface/recall.mjs [--json] [--engine auto|dist|baseline|FILE] [--misses] [--no-fetch] [--catalogue FILE] [--queries FILE] [--half even|odd] [--split]\n');
      process.exit(2);
    }
  }
  const halves = o.split ? [undefined, 'even', 'odd'] : [o.half];
  const out = [];
  for (const half of halves) {
    try {
      out.push(await runRecall({ ...o, half }));
    } catch (e) {
      process.stderr.write(`recall: ${e.message}\n`);
      process.exit(1);
    }
  }
  if (o.json) process.stdout.write(JSON.stringify(o.split ? out : out[0], null, 2) + '\n');
  else process.stdout.write(out.map((r) => renderRecall(r, o)).join('\n'));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
