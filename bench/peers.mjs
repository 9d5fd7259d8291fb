#!/usr/bin/env node
// mcpmux beside its peers (supergateway, mcp-proxy, mcp-hub) on the same upstreams, with the
// same client, in one run, in one table. See bench/README.md ("Compared with peers").
//
//   node bench/peers.mjs [--quick] [--rounds N] [--only KEYS] [--no-install] [--no-lists] ...
//   npm run bench -- --peers [same options]       (builds mcpmux first)
//
// The peers are installed on demand at pinned versions into .cache/peers (bench/peers/install.mjs);
// one that cannot be installed or started shows "not available" and the run goes on.

import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readOptions, sizeDefaults } from './lib/options.mjs';
import { installCleanup } from './lib/procs.mjs';
import { fmtSpread, spread } from './lib/stats.mjs';
import { echoUpstreams } from './lib/upstreams.mjs';
import { PINNED, ensurePeers, peersDir } from './peers/install.mjs';
import { errText, measureCalls, measureLists } from './peers/measure.mjs';
import { makeTargets } from './peers/targets.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ECHO = join(ROOT, 'bench', 'echo-server.mjs');
const NODE = process.execPath;

const ALL = ['direct-stdio', 'mcpmux-stdio', 'direct-http', 'mcpmux-http', 'supergateway', 'mcp-proxy', 'mcp-hub'];
const ALIASES = { direct: ['direct-stdio', 'direct-http'], mcpmux: ['mcpmux-stdio', 'mcpmux-http'], peers: ['supergateway', 'mcp-proxy', 'mcp-hub'] };

function parseOptions(argv) {
  const o = { quick: false, inflight: 64, only: ALL, install: true, lists: true, servers: 10, tools: 100, out: join(ROOT, 'bench', 'results') };
  readOptions(argv, o, usage, (a, next, num) => {
    switch (a) {
      case '--list-repeats': o.listRepeats = Math.round(num(next())); break;
      case '--idle': o.idleMs = num(next()) * 1000; break;
      case '--servers': o.servers = Math.round(num(next())); break;
      case '--tools': o.tools = Math.round(num(next())); break;
      case '--only': {
        const keys = next().split(',').map((s) => s.trim()).filter(Boolean).flatMap((k) => ALIASES[k] ?? [k]);
        for (const k of keys) if (!ALL.includes(k)) usage(`--only takes ${ALL.join(', ')} (or direct, mcpmux, peers), got ${k}`);
        o.only = ALL.filter((k) => keys.includes(k));
        break;
      }
      case '--no-install': o.install = false; break;
      case '--no-lists': o.lists = false; break;
      case '--out': o.out = next(); break;
      case '--max-minutes': o.maxMinutes = num(next()); break;
      case '--render': o.render = next(); break;
      case '-h':
      case '--help':
        process.stdout.write(USAGE);
        process.exit(0);
        break;
      default: usage(`unknown option ${a}`);
    }
  });
  sizeDefaults(o);
  const q = o.quick;
  o.listRepeats ??= q ? 10 : 30;
  o.idleMs ??= 2000; // before reading the idle RSS
  o.startTimeoutMs = 180_000;
  // Per target and round: start-up (up to 3 min on a loaded machine), calls, then the lists case.
  o.maxMinutes ??= Math.ceil((o.rounds * o.only.length * (2 * 60 + o.duration + 30 + (o.lists ? 120 : 0))) / 60) + 10;
  return o;
}

const USAGE = `usage: node bench/peers.mjs [--quick] [--rounds N] [--calls N] [--warmup N] [--duration S] [--inflight N]
                          [--list-repeats N] [--idle S] [--servers N] [--tools N] [--only KEYS] [--no-install] [--no-lists]
                          [--out DIR] [--max-minutes M]
       node bench/peers.mjs --render bench/results/peers-latest.json
       npm run bench -- --peers [the same options]
KEYS: ${ALL.join(', ')}; or direct, mcpmux, peers
`;

function usage(msg) {
  process.stderr.write(`bench peers: ${msg}\n${USAGE}`);
  process.exit(2);
}

let currentPhase = 'starting';
function phase(s) {
  currentPhase = s;
  process.stderr.write(`bench peers: ${s}\n`);
}

function meta(o, versions) {
  const git = (args) => {
    try {
      return execFileSync('git', args, { cwd: ROOT, timeout: 5000, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return 'unknown';
    }
  };
  const c = cpus();
  return {
    date: new Date().toISOString(),
    git: git(['describe', '--always', '--dirty']),
    mcpmux: JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version,
    sdk: (() => {
      try {
        return JSON.parse(readFileSync(join(ROOT, 'node_modules', '@modelcontextprotocol', 'sdk', 'package.json'), 'utf8')).version;
      } catch {
        return '?';
      }
    })(),
    versions,
    node: process.versions.node,
    cpus: c.length,
    cpuModel: c[0]?.model ?? '?',
    memGb: Math.round(totalmem() / 2 ** 30),
    loadBefore: loadavg().map((x) => x.toFixed(2)),
    quick: o.quick,
  };
}

export async function runPeers(argv) {
  const o = parseOptions(argv);
  if (o.render) {
    const saved = JSON.parse(readFileSync(o.render, 'utf8'));
    process.stdout.write(renderMarkdown(saved) + '\n');
    return;
  }
  installCleanup();
  const watchdog = setTimeout(() => {
    process.stderr.write(`bench peers: gave up after ${o.maxMinutes} minutes (during: ${currentPhase}); killing every child\n`);
    process.exit(1);
  }, o.maxMinutes * 60_000);
  watchdog.unref();

  const targets = makeTargets({ root: ROOT, node: NODE, peersDir: peersDir(ROOT) }).filter((t) => o.only.includes(t.key));
  const wanted = targets.map((t) => t.pkg).filter(Boolean);
  const available = {};
  if (wanted.length) {
    phase(`peers: ${wanted.map((p) => `${p}@${PINNED[p]}`).join(', ')}${o.install ? '' : ' (no install)'}`);
    Object.assign(available, await ensurePeers(ROOT, wanted, { install: o.install, log: (s) => process.stderr.write(`bench peers: ${s}\n`) }));
  }
  const versions = { mcpmux: undefined };
  for (const t of targets) if (t.pkg) versions[t.pkg] = available[t.pkg]?.version ?? null;

  mkdirSync(o.out, { recursive: true });
  const tmp = mkdtempSync(join(tmpdir(), 'mcpmux-bench-peers-'));
  const results = { meta: meta(o, versions), options: o, targets: targets.map((t) => ({ key: t.key, label: t.label, transport: t.transport, aggregates: t.aggregates, pkg: t.pkg, how: t.how })), rounds: [] };
  results.meta.versions.mcpmux = `${results.meta.mcpmux} (${results.meta.git})`;
  const expected = o.servers * (o.tools + 1);
  const many = echoUpstreams(ECHO, o.servers, o.tools);
  try {
    for (let round = 1; round <= o.rounds; round++) {
      const r = { round, loadavgAtStart: loadavg()[0], calls: {}, lists: {} };
      results.rounds.push(r);
      for (const t of targets) {
        if (t.pkg && available[t.pkg]?.error) {
          r.calls[t.key] = r.lists[t.key] = { unavailable: available[t.pkg].error };
          continue;
        }
        phase(`round ${round}/${o.rounds}: ${t.label}: start, ${o.warmup} + ${o.calls} calls, ${o.inflight} in flight for ${o.duration} s`);
        try {
          r.calls[t.key] = await measureCalls(t, o, { echoArgs: [ECHO], tmp });
        } catch (e) {
          r.calls[t.key] = { error: errText(e) };
          process.stderr.write(`bench peers: ${t.label} failed: ${errText(e)}\n`);
        }
        if (!o.lists) continue;
        if (!t.aggregates) {
          r.lists[t.key] = { na: 'one server' };
          continue;
        }
        phase(`round ${round}/${o.rounds}: ${t.label}: ${o.servers} upstreams x ${o.tools} tools, start until ${expected} tools listed, tools/list x${o.listRepeats}`);
        try {
          r.lists[t.key] = await measureLists(t, o, { servers: many, expectedTools: expected, tmp });
        } catch (e) {
          r.lists[t.key] = { error: errText(e) };
          process.stderr.write(`bench peers: ${t.label} (${o.servers} x ${o.tools}) failed: ${errText(e)}\n`);
        }
      }
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  results.meta.loadAfter = loadavg().map((x) => x.toFixed(2));
  const md = renderMarkdown(results);
  writeFileSync(join(o.out, 'peers-latest.json'), JSON.stringify(results, (k, v) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 2));
  writeFileSync(join(o.out, 'peers-latest.md'), md + '\n');
  process.stdout.write(md + '\n');
  process.stderr.write(`bench peers: wrote ${join(o.out, 'peers-latest.json')} and peers-latest.md\n`);
  clearTimeout(watchdog);
}

// ---- report -----------------------------------------------------------------------------------

const get = (obj, path) => path.split('.').reduce((v, k) => (v == null ? undefined : v[k]), obj);

/** The column headers, in order (the smoke test checks them); they name the run's sizes. */
export function columns(o) {
  const n = `${o.servers}×${o.tools}`;
  return [
    'transport',
    'version',
    'start-up: spawn → initialize answered / echo listed (ms)',
    'tools/call p50 (ms)',
    `calls/s, ${o.inflight} in flight`,
    'CPU/call of the middle process (ms)',
    'RSS idle / peak after the calls (MB)',
    `${n}: spawn → all tools listed (ms)`,
    `${n}: tools/list first (ms)`,
    `${n}: tools/list repeated, p50 (ms)`,
    `${n}: RSS idle after listing / peak (MB)`,
  ];
}

export function renderMarkdown(results) {
  const { meta: m, options: o } = results;
  const L = [];
  const rounds = results.rounds;
  L.push(`# mcpmux and its peers — ${m.date}`);
  L.push('');
  L.push(`mcpmux ${m.mcpmux} at ${m.git}; Node ${m.node}; ${m.cpus} × ${m.cpuModel}, ${m.memGb} GB; load average before ${m.loadBefore.join(' ')}, after ${m.loadAfter?.join(' ') ?? '?'}${rounds.some((r) => r.loadavgAtStart > 1.5) ? ' — **other load on the machine: the figures are disturbed**' : ''}.`);
  L.push(`Peers: ${Object.entries(m.versions).filter(([k]) => k !== 'mcpmux').map(([k, v]) => `${k} ${v ?? 'not available'}`).join(', ') || 'none'}. Client: the bench's light client (one JSON.parse per message) for every row; upstream: \`bench/echo-server.mjs\` (official SDK ${m.sdk}) for every row.`);
  L.push(`${o.rounds} round(s), every target once per round in turn; ${o.warmup} warm-up + ${o.calls} sequential calls; ${o.inflight} in flight for ${o.duration} s; ${o.servers} upstreams × ${o.tools} tools (${o.servers * (o.tools + 1)} tools), ${o.listRepeats} timed listings. Cells: median over rounds (min–max).`);
  L.push('');
  const COLUMNS = columns(o);
  L.push(`| | ${COLUMNS.join(' | ')} |`);
  L.push(`|---|${COLUMNS.map((_, i) => (i < 2 ? '---' : '---:')).join('|')}|`);
  const notes = [];
  for (const t of results.targets) {
    const cs = rounds.map((r) => r.calls?.[t.key]).filter(Boolean);
    const ls = rounds.map((r) => r.lists?.[t.key]).filter(Boolean);
    const ok = cs.filter((x) => !x.error && !x.unavailable);
    const lok = ls.filter((x) => !x.error && !x.unavailable && !x.na);
    const s = (arr, path, scale = 1) => fmtSpread(spread(arr.map((x) => get(x, path) * scale)));
    const pair = (arr, a, b) => (arr.length && arr.some((x) => Number.isFinite(get(x, a))) ? `${s(arr, a)} / ${s(arr, b)}` : '—');
    const version = t.pkg ? (m.versions[t.pkg] ?? '—') : t.key.startsWith('mcpmux') ? m.git : `SDK ${m.sdk}`;
    const transport = t.transport === 'stdio' ? 'stdio' : t.transport === 'sse' ? 'HTTP+SSE (2024-11-05)' : 'Streamable HTTP';
    let callCells;
    const unavailable = cs.find((x) => x.unavailable)?.unavailable;
    const failed = cs.find((x) => x.error)?.error;
    if (unavailable) {
      callCells = ['not available', '', '', '', ''];
      notes.push(`${t.label}: not available: ${unavailable}`);
    } else if (!ok.length) {
      callCells = ['failed', '', '', '', ''];
      notes.push(`${t.label}: ${failed?.split('\n')[0] ?? 'no result'}`);
    } else {
      if (failed) notes.push(`${t.label}: failed in ${cs.length - ok.length} round(s): ${failed.split('\n')[0]}`);
      callCells = [pair(ok, 'initMs', 'completeMs'), s(ok, 'seq.p50'), s(ok, 'tput.callsPerSec'), ok.some((x) => x.mem) ? s(ok, 'tput.proxyCpuMsPerCall') : '— (none)', ok.some((x) => x.mem) ? pair(ok, 'mem.rssMb', 'mem.hwmMb') : '— (none)'];
    }
    let listCells;
    const na = ls.find((x) => x.na)?.na;
    const lfailed = ls.find((x) => x.error)?.error;
    if (!o.lists) listCells = ['skipped', '', '', ''];
    else if (unavailable) listCells = ['not available', '', '', ''];
    else if (na) listCells = [`n/a: ${na}`, '', '', ''];
    else if (!lok.length) {
      listCells = ['failed', '', '', ''];
      notes.push(`${t.label}, ${o.servers} × ${o.tools}: ${lfailed?.split('\n')[0] ?? 'no result'}`);
    } else {
      if (lfailed) notes.push(`${t.label}, ${o.servers} × ${o.tools}: failed in ${ls.length - lok.length} round(s): ${lfailed.split('\n')[0]}`);
      listCells = [s(lok, 'completeMs'), s(lok, 'firstListMs'), s(lok, 'list.p50'), pair(lok, 'mem.rssMb', 'mem.hwmMb')];
    }
    L.push(`| ${t.label} | ${transport} | ${version} | ${[...callCells, ...listCells].join(' | ')} |`);
  }
  L.push('');
  if (notes.length) {
    for (const n of notes) L.push(`- ${n.replace(/\|/g, '/')}`);
    L.push('');
  }
  L.push('How each row ran:');
  L.push('');
  for (const t of results.targets) L.push(`- **${t.label}**: ${t.how}.`);
  L.push('');
  L.push('Start-up: from spawning the process to the answer of the first `initialize` that got through (HTTP rows poll every 25 ms until one does) / to the first `tools/list` holding the echo tool. ' +
    'Middle process: the target\'s own processes (its process tree minus the echo servers); direct rows have none. ' +
    `10×100 "first": the first full listing of a new session opened once all ${o.servers * (o.tools + 1)} tools were listed (HTTP), or, over stdio, the first listing that held them all.`);
  return L.join('\n');
}

// `node bench/peers.mjs` runs it; bench/run.mjs imports runPeers for `--peers`.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  runPeers(process.argv.slice(2)).then(
    () => process.exit(0),
    (e) => {
      process.stderr.write(`bench peers: ${e && e.stack ? e.stack : e}\n`);
      process.exit(1);
    },
  );
}
