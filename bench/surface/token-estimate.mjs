#!/usr/bin/env node
// How close estimateTokens (src/surface/tokens.ts) stays to the exact o200k_base count on real
// tool catalogues, and what loading the tokenizer costs a process. Needs a build (npm run build).
//
//   node bench/surface/token-estimate.mjs          # table on stdout, progress on stderr
//   node bench/surface/token-estimate.mjs --json   # the same figures as JSON
//   node bench/surface/token-estimate.mjs --corpus FILE   # another catalogue.json than .cache's
//
// Catalogues, all listed live (nothing copied into the repository):
// - every MCP server package installed in node_modules that lists its tools without credentials,
//   and the test fixtures, through the real binary (`mcpmux tools --json`, as a host sees them);
// - .cache/surface-corpus/catalogue.json when present (the search bench's corpus of published
//   servers: {name, server, title?, description?, inputSchema} each, as an array or under `tools`);
//   skipped when absent.
//
// The tokenizer's load cost is measured in fresh processes (median of 3): RSS and heap before
// and after importing gpt-tokenizer's o200k_base and counting one string, and the time taken.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const NODE = process.execPath;
const TOKENS = join(ROOT, 'dist/surface/tokens.js');
const argv = process.argv.slice(2);
const json = argv.includes('--json');
const CORPUS = argv.includes('--corpus') ? resolve(argv[argv.indexOf('--corpus') + 1] ?? '') : join(ROOT, '.cache/surface-corpus/catalogue.json');
const say = (s) => process.stderr.write(`token-estimate: ${s}\n`);

if (!existsSync(TOKENS)) {
  say('dist/surface/tokens.js is missing: run `npm run build` first');
  process.exit(1);
}

// ---- the tokenizer's load cost, in fresh processes -----------------------------------------------

const PROBE = `
const mb = (n) => Math.round((n / 1048576) * 10) / 10;
const m0 = process.memoryUsage();
const t0 = performance.now();
const { countTokens } = await import(${JSON.stringify(pathToFileURL(TOKENS).href)});
await countTokens('{"name":"read_file","description":"Read a file"}');
const t1 = performance.now();
const m1 = process.memoryUsage();
process.stdout.write(JSON.stringify({ ms: t1 - t0, rssBeforeMB: mb(m0.rss), rssAfterMB: mb(m1.rss), heapBeforeMB: mb(m0.heapUsed), heapAfterMB: mb(m1.heapUsed) }));
`;

function loadCost() {
  const runs = [];
  for (let i = 0; i < 3; i++) runs.push(JSON.parse(execFileSync(NODE, ['--input-type=module', '-e', PROBE], { encoding: 'utf8' })));
  const med = (k) => runs.map((r) => r[k]).sort((a, b) => a - b)[1];
  const rssBeforeMB = med('rssBeforeMB');
  const rssAfterMB = med('rssAfterMB');
  return {
    ms: Math.round(med('ms')),
    rssBeforeMB,
    rssAfterMB,
    rssAddedMB: Math.round((rssAfterMB - rssBeforeMB) * 10) / 10,
    heapAddedMB: Math.round((med('heapAfterMB') - med('heapBeforeMB')) * 10) / 10,
  };
}

// ---- catalogues -----------------------------------------------------------------------------------

const pkg = (name, ...args) => ({ command: NODE, args: [join(ROOT, 'node_modules/@modelcontextprotocol', name, 'dist/index.js'), ...args] });

/** Tools by server, listed by the real binary. Servers whose package is absent are left out. */
function listLive(dir) {
  const candidates = {
    everything: pkg('server-everything', 'stdio'),
    filesystem: pkg('server-filesystem', dir),
    'basic-vanillajs': pkg('server-basic-vanillajs', '--stdio'),
    'system-monitor': pkg('server-system-monitor', '--stdio'),
    'fixture-upstream': { command: NODE, args: [join(ROOT, 'test/fixtures/upstream.mjs'), JSON.stringify({ name: 'upstream', tools: 40 })] },
    'fixture-bridge': { command: NODE, args: [join(ROOT, 'test/fixtures/bridge-upstream.mjs'), '{}'] },
    'fixture-modern': { command: NODE, args: [join(ROOT, 'test/fixtures/modern-upstream.mjs'), 'stdio', '{}'] },
  };
  const servers = Object.fromEntries(Object.entries(candidates).filter(([, e]) => existsSync(e.args[0])));
  const config = join(dir, 'mcpmux.json');
  writeFileSync(config, JSON.stringify({ mcpServers: servers }));
  const tools = JSON.parse(execFileSync(NODE, [join(ROOT, 'bin/mcpmux.js'), 'tools', '--json', '--config', config], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }));
  return Object.keys(servers).map((server) => ({ server, source: 'live', tools: tools.filter((t) => t.name.startsWith(`${server}__`)) }));
}

function listCorpus() {
  if (!existsSync(CORPUS)) return [];
  // An array of tools, or {tools: [...]} beside the corpus's other facts.
  const parsed = JSON.parse(readFileSync(CORPUS, 'utf8'));
  const rows = Array.isArray(parsed) ? parsed : parsed.tools;
  const by = new Map();
  for (const r of rows) {
    const tool = { name: r.name, ...(r.title !== undefined && { title: r.title }), ...(r.description !== undefined && { description: r.description }), inputSchema: r.inputSchema };
    if (!by.has(r.server)) by.set(r.server, []);
    by.get(r.server).push(tool);
  }
  return [...by].map(([server, tools]) => ({ server, source: 'corpus', tools }));
}

// ---- measure --------------------------------------------------------------------------------------

const { countTokens, estimateTokens, toolDefinitionText } = await import(pathToFileURL(TOKENS).href);

say('measuring the tokenizer load cost (3 fresh processes)');
const load = loadCost();
const dir = mkdtempSync(join(tmpdir(), 'mcpmux-token-estimate-'));
let catalogues;
try {
  say('listing the installed servers and the fixtures through mcpmux');
  catalogues = [...listLive(dir), ...listCorpus()];
} finally {
  rmSync(dir, { recursive: true, force: true });
}
if (!existsSync(CORPUS)) say(`no ${CORPUS}: corpus skipped`);

const rows = [];
let worstTool = { error: 0 };
for (const c of catalogues) {
  let exact = 0;
  let estimate = 0;
  let chars = 0;
  for (const t of c.tools) {
    const text = toolDefinitionText(t);
    chars += text.length;
    const e = await countTokens(text);
    const x = estimateTokens(text);
    exact += e;
    estimate += x;
    const error = (x - e) / e;
    if (Math.abs(error) > Math.abs(worstTool.error)) worstTool = { server: c.server, tool: t.name, exact: e, estimate: x, error };
  }
  rows.push({ server: c.server, source: c.source, tools: c.tools.length, chars, exact, estimate, error: exact ? (estimate - exact) / exact : 0 });
}

// Speed, once both are warm (the pass above loaded the tokenizer and ran the JIT): the whole
// catalogue, five times, each way.
const texts = catalogues.flatMap((c) => c.tools.map(toolDefinitionText));
let t0 = performance.now();
for (let k = 0; k < 5; k++) for (const s of texts) await countTokens(s);
const exactMs = (performance.now() - t0) / 5;
t0 = performance.now();
for (let k = 0; k < 5; k++) for (const s of texts) estimateTokens(s);
const estimateMs = (performance.now() - t0) / 5;

const sum = (rs, k) => rs.reduce((n, r) => n + r[k], 0);
const totalOf = (rs) => {
  const exact = sum(rs, 'exact');
  const estimate = sum(rs, 'estimate');
  return { servers: rs.length, tools: sum(rs, 'tools'), chars: sum(rs, 'chars'), exact, estimate, error: exact ? (estimate - exact) / exact : 0 };
};
const measured = rows.filter((r) => r.tools > 0);
const maxServer = measured.reduce((m, r) => (Math.abs(r.error) > Math.abs(m.error) ? r : m), { error: 0 });
const tools = sum(rows, 'tools');
const result = {
  encoding: 'o200k_base',
  tokenizer: 'gpt-tokenizer',
  load,
  servers: rows,
  total: totalOf(measured),
  totalLive: totalOf(measured.filter((r) => r.source === 'live')),
  totalCorpus: totalOf(measured.filter((r) => r.source === 'corpus')),
  maxServerError: { server: maxServer.server, error: maxServer.error },
  maxToolError: worstTool,
  speed: { exactUsPerTool: (exactMs * 1000) / tools, estimateUsPerTool: (estimateMs * 1000) / tools, estimateMsCatalogue: estimateMs },
};

if (json) {
  process.stdout.write(JSON.stringify(result, null, 2) + '\n');
} else {
  const pct = (x) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)} %`;
  const w = Math.max(6, ...rows.map((r) => r.server.length));
  const line = (a, b, c, d, e, f) => `${String(a).padEnd(w)}  ${String(b).padStart(6)}  ${String(c).padStart(5)}  ${String(d).padStart(8)}  ${String(e).padStart(8)}  ${String(f).padStart(8)}\n`;
  let out = `## Token estimate vs exact (${result.tokenizer}, ${result.encoding})\n\n`;
  out += line('SERVER', 'SOURCE', 'TOOLS', 'EXACT', 'ESTIMATE', 'ERROR');
  for (const r of rows) out += line(r.server, r.source, r.tools, r.exact, r.estimate, r.tools ? pct(r.error) : '-');
  for (const [name, t] of [['total (live)', result.totalLive], ['total (corpus)', result.totalCorpus], ['total', result.total]]) {
    if (t.tools > 0) out += line(name, '', t.tools, t.exact, t.estimate, pct(t.error));
  }
  out += `\nlargest error of a server: ${pct(maxServer.error)} (${maxServer.server})\n`;
  out += `largest error of one tool:  ${pct(worstTool.error)} (${worstTool.server}/${worstTool.tool}: ${worstTool.estimate} vs ${worstTool.exact})\n`;
  out += `per tool, warm: exact ${result.speed.exactUsPerTool.toFixed(1)} µs, estimate ${result.speed.estimateUsPerTool.toFixed(1)} µs (the whole catalogue: ${estimateMs.toFixed(2)} ms)\n`;
  out += `loading the tokenizer (fresh process, median of 3): ${load.ms} ms, RSS ${load.rssBeforeMB} -> ${load.rssAfterMB} MB (+${load.rssAddedMB} MB), heap +${load.heapAddedMB} MB\n`;
  process.stdout.write(out);
}
