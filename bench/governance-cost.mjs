#!/usr/bin/env node
// What governance costs per call, in measures the machine's load does not change: instructions
// (callgrind) and garbage collections per call of the mcpmux process, governance off, each part
// alone, and all on (the bench's governed config: 50 policy rules, 3 rate limits, a redacted
// audit log, metrics on an admin port).
//
//   node bench/governance-cost.mjs [--modes off,policy,limits,audit,metrics,all] [--calls 200,2200]
//                                  [--inflight 16] [--gc] [--scrape-every 2000] [--keep]
//
// Each (mode, N) runs `mcpmux stdio` once, under valgrind's callgrind (or, with --gc, plainly,
// counting scavenges), drives N light-client tools/call with `inflight` in flight, then closes
// its stdin. The difference between the largest and the smallest N, divided by the difference in
// calls, is the cost per call with start-up and shutdown cancelled out. `metrics` and `all`
// fetch /metrics once every `scrape-every` calls (at ~30 000 calls/s a scrape per second is one
// per 30 000 calls; the cost of one scrape is the `scrapes` mode's figure per scrape).

import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { echoTool } from './lib/calls.mjs';
import { StdioLight } from './lib/light-client.mjs';
import { LIMITS, POLICY } from './lib/governed.mjs';

const ROOT0 = fileURLToPath(new URL('..', import.meta.url));
const NODE = process.execPath;

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? dflt : args[i + 1];
};
// --root DIR: measure another build (a copy of bin/ and dist/ at another commit).
const ROOT = opt('root', ROOT0);
const ECHO = join(ROOT0, 'bench', 'echo-server.mjs');
const MCPMUX = join(ROOT, 'bin', 'mcpmux.js');
// --window W: one process per mode; W calls, then callgrind's counters zeroed, then the
// largest --calls N, then a dump: instructions of exactly those N calls, one start-up per mode.
// Warm up with W >= 20000: after 500 calls V8 is still optimising, and its compiler threads
// (counted too: every thread of the process is) were ~70% of a 2 000-call window, more with
// governance on (more code to optimise). `--window 20000 --calls 20000` is the steady state.
const windowWarm = opt('window', undefined) === undefined ? undefined : Number(opt('window'));
const modes = opt('modes', 'off,policy,limits,audit,metrics,all').split(',');
const counts = opt('calls', '200,2200').split(',').map(Number);
const inflight = Number(opt('inflight', '16'));
const scrapeEvery = Number(opt('scrape-every', '2000'));
const gcOnly = args.includes('--gc');
// --keep: leave the callgrind files (for callgrind_annotate) and say where.
const keep = args.includes('--keep');
const tmp = mkdtempSync(join(tmpdir(), 'mcpmux-govcost-'));

function config(mode, auditPath) {
  const c = { mcpServers: { echo: { command: NODE, args: [ECHO] } } };
  if (mode === 'policy' || mode === 'all') c.policy = POLICY;
  if (mode === 'limits' || mode === 'all') c.rateLimits = LIMITS;
  if (mode === 'audit' || mode === 'all') c.audit = { path: auditPath, arguments: 'redacted' };
  return c;
}

const withMetrics = (mode) => mode === 'metrics' || mode === 'all' || mode === 'scrapes';

// Counts the process's garbage collections, reported on stderr at exit (--gc only).
const GC_PRELOAD = join(tmp, 'gc-count.mjs');
writeFileSync(
  GC_PRELOAD,
  `import { PerformanceObserver } from 'node:perf_hooks';
let minor = 0, major = 0;
new PerformanceObserver((l) => { for (const e of l.getEntries()) (e.detail?.kind === 1 || e.kind === 1) ? minor++ : major++; }).observe({ entryTypes: ['gc'] });
process.on('exit', () => process.stderr.write('\\nGCCOUNT ' + JSON.stringify({ minor, major }) + '\\n'));
`,
);

async function runOnce(mode, n) {
  const auditPath = join(tmp, `audit-${mode}-${n}.jsonl`);
  const cfgPath = join(tmp, `config-${mode}.json`);
  writeFileSync(cfgPath, JSON.stringify(config(mode === 'scrapes' ? 'off' : mode, auditPath)));
  const out = join(tmp, `callgrind-${mode}-${n}.out`);
  const mux = [MCPMUX, 'stdio', '--config', cfgPath, ...(withMetrics(mode) ? ['--admin-port', '0'] : [])];
  const [cmd, argv] = gcOnly
    ? [NODE, ['--import', GC_PRELOAD, ...mux]]
    : ['valgrind', ['--tool=callgrind', `--callgrind-out-file=${out}`, '--trace-children=no', NODE, ...mux]];
  const child = spawn(cmd, argv, { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((r) => child.once('exit', r));
  const c = new StdioLight(child, { timeoutMs: 600_000, label: mode });
  await c.initialize(600_000);
  let port;
  if (withMetrics(mode)) {
    for (let i = 0; i < 600 && !port; i++) {
      port = /"port":(\d+)[^\n]*"msg":"admin listening"/.exec(stderr)?.[1];
      if (!port) await new Promise((r) => setTimeout(r, 100));
    }
  }
  const scrape = () => fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text());
  let name;
  const drive = async (n) => {
  if (mode === 'scrapes') {
    for (let i = 0; i < n / 100; i++) await scrape();
  } else {
    let next = 0;
    let done = 0;
    // The upstream may still be starting (under valgrind, for long): list until it is there.
    for (let i = 0; i < 600 && !name; i++) {
      const listed = await c.request('tools/list', {}, 600_000);
      name = echoTool(listed.result?.tools?.map((t) => t.name) ?? []);
      if (!name) await new Promise((r) => setTimeout(r, 200));
    }
    const params = { name, arguments: { text: 'hello from the benchmark' } };
    const worker = async () => {
      while (next < n) {
        next++;
        const r = await c.request('tools/call', params, 600_000);
        if (r.error || r.result?.content?.[0]?.text !== params.arguments.text) throw new Error(`${mode}: bad answer ${JSON.stringify(r)}`);
        done++;
        if (port && done % scrapeEvery === 0) await scrape();
      }
    };
    await Promise.all(Array.from({ length: inflight }, worker));
  }
  };
  if (windowWarm !== undefined && !gcOnly) {
    await drive(windowWarm);
    execFileSync('callgrind_control', ['--zero', String(child.pid)], { stdio: 'ignore' });
    await drive(n);
    execFileSync('callgrind_control', ['--dump', String(child.pid)], { stdio: 'ignore' });
  } else {
    await drive(n);
  }
  await c.close();
  child.stdin.end();
  await exited;
  if (gcOnly) {
    const m = /GCCOUNT (\{.*\})/.exec(stderr);
    return m ? JSON.parse(m[1]) : { error: stderr.slice(-500) };
  }
  const total = (file) => Number(/^(?:summary|totals): (\d+)/m.exec(readFileSync(file, 'utf8'))?.[1]);
  if (windowWarm !== undefined) {
    // The dump asked for is out.1 (the final one at exit is `out`): the window alone.
    const dump = readdirSync(tmp).find((f) => f.startsWith(`callgrind-${mode}-${n}.out.`));
    const per = mode === 'scrapes' ? n / 100 : n;
    return { instructions: total(join(tmp, dump)), perCall: total(join(tmp, dump)) / per, mainPerCall: mainThread(join(tmp, dump)) / per };
  }
  return { instructions: total(out) };
}

/**
 * Instructions of the main thread alone (the event loop, and the scavenges it runs): what
 * `main` includes. The rest is V8's worker threads, mostly its optimising compiler, whose work
 * in a window is a one-off that varies from run to run (a function compiled late).
 */
function mainThread(file) {
  try {
    const text = execFileSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    return Number(/^\s*([\d,]+) \([^)]*\)\s+\?\?\?:main \[/m.exec(text)?.[1]?.replace(/,/g, '') ?? NaN);
  } catch {
    return NaN;
  }
}

const results = {};
for (const mode of modes) {
  results[mode] = {};
  for (const n of windowWarm !== undefined ? [Math.max(...counts)] : counts) {
    results[mode][n] = await runOnce(mode, n);
    process.stderr.write(`${mode} N=${n}: ${JSON.stringify(results[mode][n])}\n`);
  }
}
if (windowWarm !== undefined) {
  const n = Math.max(...counts);
  console.log(`| mode | instructions per call (${windowWarm} calls, then ${n} counted, ${inflight} in flight) | vs off | main thread only | vs off |`);
  console.log('|---|---:|---:|---:|---:|');
  const diff = (v, off) => (off === undefined || !Number.isFinite(off) ? '' : (v >= off ? '+' : '') + Math.round(v - off));
  for (const mode of modes) {
    const { perCall, mainPerCall } = results[mode][n];
    const off = mode === 'scrapes' ? undefined : results.off?.[n];
    console.log(`| ${mode} | ${Math.round(perCall)} | ${diff(perCall, off?.perCall)} | ${Number.isFinite(mainPerCall) ? Math.round(mainPerCall) : ''} | ${Number.isFinite(mainPerCall) ? diff(mainPerCall, off?.mainPerCall) : ''} |`);
  }
  if (keep) console.error(`callgrind files kept in ${tmp}`);
  else rmSync(tmp, { recursive: true, force: true });
  process.exit(0);
}
const lo = Math.min(...counts);
const hi = Math.max(...counts);
const per = (mode, key) => (results[mode][hi][key] - results[mode][lo][key]) / (mode === 'scrapes' ? (hi - lo) / 100 : hi - lo);
console.log(gcOnly ? `| mode | scavenges per 1000 calls | major GCs per 1000 calls |` : `| mode | instructions per call (${mode0()}) | vs off |`);
console.log('|---|---:|---:|');
for (const mode of modes) {
  if (gcOnly) console.log(`| ${mode} | ${(per(mode, 'minor') * 1000).toFixed(1)} | ${(per(mode, 'major') * 1000).toFixed(2)} |`);
  else {
    const v = per(mode, 'instructions');
    const off = results.off ? per('off', 'instructions') : NaN;
    console.log(`| ${mode}${mode === 'scrapes' ? ' (per scrape)' : ''} | ${Math.round(v)} | ${mode === 'scrapes' || !Number.isFinite(off) ? '' : (v >= off ? '+' : '') + Math.round(v - off)} |`);
  }
}
function mode0() {
  return `N=${hi} minus N=${lo}, ${inflight} in flight`;
}
if (keep) console.error(`callgrind files kept in ${tmp}`);
else rmSync(tmp, { recursive: true, force: true });
