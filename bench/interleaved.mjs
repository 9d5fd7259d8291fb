#!/usr/bin/env node
// Sequential tools/call p50 with the compared processes open at once and the calls alternating
// between them in blocks (issue 23, the p50 clauses of targets 1 and 2).
//
//   node bench/interleaved.mjs [--compare relay,governance,floor] [--clients light,sdk] [--rounds 3]
//                              [--blocks 30] [--block 100] [--warmup 2000] [--out DIR]
//
// `bench/run.mjs` measures one target after another in each round; on a small VM the sequential
// p50 moves by 50-100 µs between windows of a few seconds, more than the 30 µs a target allows.
// Here every target of a comparison is spawned and warmed up first, then the blocks go round
// (the order rotating from block to block), so a change in the machine touches all of them
// alike; each target's p50 is taken over all its calls of the round. Each comparison is run
// once per client, one call at a time: the bench's light client (bench/lib/light-client.mjs)
// and the official SDK's Client (bench/lib/sdk-client.mjs), each with processes of its own.
//
// - relay: the echo server direct, behind the no-op relay (bench/relay.mjs) and behind
//   `mcpmux stdio`; target 1: mcpmux's p50 within the relay's + 30 µs.
// - governance: `mcpmux stdio` with governance off and on (bench/lib/governed.mjs, as in
//   bench/run.mjs: 50 policy rules, 3 rate limits, the redacted audit log; /metrics scraped
//   every second); target 2: on within 1.1x of off.
// - floor (not run unless asked, nor by bench/run.mjs): the no-op relay, the id-rewriting relay
//   and the parsing relay (bench/rewrite-relay.mjs, without and with --parse) and mcpmux, each
//   over the no-op relay: how much of mcpmux's p50 is parsing and how much its own layers.
//
// Prints a Markdown table (median over rounds, min-max in brackets) and writes it with the raw
// figures to DIR/interleaved-latest.{md,json} (default bench/results). `npm run bench` runs the
// same measurement as its own section (measureInterleaved, renderInterleaved): its p50 verdicts
// for targets 1 and 2 are these.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { echoCall, errText, listedEchoTool, sdkCall } from './lib/calls.mjs';
import { governedConfig, startScraper } from './lib/governed.mjs';
import { readArgs } from './lib/options.mjs';
import { installCleanup } from './lib/procs.mjs';
import { saveLatest, shortCommit } from './lib/results.mjs';
import { openStdioLight, openStdioSdk, sessionError } from './lib/stdio-session.mjs';
import { fmt, latencySummary, median, medianRange } from './lib/stats.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const NODE = process.execPath;
const ECHO = join(ROOT, 'bench', 'echo-server.mjs');
const RELAY = join(ROOT, 'bench', 'relay.mjs');
const MCPMUX = join(ROOT, 'bin', 'mcpmux.js');

const USAGE = 'usage: node bench/interleaved.mjs [--compare relay,governance,floor] [--clients light,sdk] [--rounds N] [--blocks N] [--block N] [--warmup N] [--out DIR]';
const REWRITE = join(ROOT, 'bench', 'rewrite-relay.mjs');
/** What --compare takes (floor only when asked). */
const COMPARISONS = ['relay', 'governance', 'floor'];
/** The floor comparison's middle processes, in the order of its columns. */
const FLOOR = { relay: 'no-op relay', rewrite: 'id-rewriting relay', parse: 'parsing relay', mcpmux: 'mcpmux' };
/** The clients, in the order their rows are printed. */
const CLIENTS = { light: 'light client', sdk: 'SDK client' };
/** The section's title (bench/run.mjs prints it over a failure too). */
export const INTERLEAVED_TITLE = 'Interleaved sequential p50 (issue 23, targets 1 and 2)';

function options(argv) {
  const o = { compare: ['relay', 'governance'], clients: ['light', 'sdk'], rounds: 3, blocks: 30, block: 100, warmup: 2000, out: join(ROOT, 'bench', 'results') };
  readArgs(argv, USAGE, (a, value, count) => {
    if (a === '--compare') {
      o.compare = value().split(',');
      for (const c of o.compare) if (!COMPARISONS.includes(c)) throw new Error(`--compare takes ${COMPARISONS.join(', ')}, got ${c}\n${USAGE}`);
    } else if (a === '--clients') {
      o.clients = value().split(',');
      for (const c of o.clients) if (!Object.hasOwn(CLIENTS, c)) throw new Error(`--clients takes light and/or sdk, got ${c}\n${USAGE}`);
    } else if (a === '--rounds') o.rounds = count();
    else if (a === '--blocks') o.blocks = count();
    else if (a === '--block') o.block = count();
    else if (a === '--warmup') o.warmup = count();
    else if (a === '--out') o.out = value();
    else return false;
    return true;
  });
  return o;
}

/**
 * Opens `node args` with the `client` (light or sdk); finds the echo tool (mcpmux lists it once
 * its upstream is up). Returns the target: its call, its close and its latencies.
 */
async function open(label, args, client) {
  const s = client === 'sdk' ? await openStdioSdk(args, { label, timeoutMs: 60_000 }) : await openStdioLight(args, { label, timeoutMs: 60_000 });
  try {
    const list = async () => (s.sdk ? (await s.sdk.client.listTools(undefined, { timeout: 60_000 })).tools : (await s.c.request('tools/list', {}, 60_000)).result?.tools) ?? [];
    const tool = await listedEchoTool(list);
    return { label, child: s.child, close: s.close, call: s.sdk ? sdkCall(s.sdk.client, tool) : echoCall(s.c, tool), lat: [] };
  } catch (e) {
    await s.close();
    throw sessionError(label, s.child, e);
  }
}

/** One round: every target warmed up, then `blocks` blocks of `block` calls each, the order rotating. */
async function round(targets, o) {
  for (const t of targets) for (let i = 0; i < o.warmup; i++) if (!(await t.call())) throw new Error(`${t.label}: a warm-up call did not echo`);
  for (let b = 0; b < o.blocks; b++) {
    for (let k = 0; k < targets.length; k++) {
      const t = targets[(b + k) % targets.length];
      for (let i = 0; i < o.block; i++) {
        const t0 = performance.now();
        const ok = await t.call();
        t.lat.push(performance.now() - t0);
        if (!ok) throw new Error(`${t.label}: a call did not echo`);
      }
    }
  }
  return Object.fromEntries(targets.map((t) => [t.label, latencySummary(t.lat).p50]));
}

/** A comparison's processes, [label, node args] in the order they open (configs written to `tmp`; `tag` names the audit log). */
function lineUp(kind, tmp, tag) {
  const one = join(tmp, 'one.json');
  writeFileSync(one, JSON.stringify({ mcpServers: { echo: { command: NODE, args: [ECHO] } } }));
  const mcpmux = ['mcpmux', [MCPMUX, 'stdio', '--config', one]];
  switch (kind) {
    case 'relay':
      return [['direct', [ECHO]], ['relay', [RELAY, NODE, ECHO]], mcpmux];
    case 'floor':
      return [['relay', [RELAY, NODE, ECHO]], ['rewrite', [REWRITE, NODE, ECHO]], ['parse', [REWRITE, '--parse', NODE, ECHO]], mcpmux];
    case 'governance': {
      const governed = join(tmp, 'governed.json');
      writeFileSync(governed, JSON.stringify(governedConfig({ command: NODE, args: [ECHO] }, join(tmp, `audit-${tag}.jsonl`))));
      return [['off', mcpmux[1]], ['on', [MCPMUX, 'stdio', '--config', governed, '--admin-port', '0']]];
    }
  }
}

async function compare(kind, client, o, tmp, say) {
  const rounds = [];
  for (let r = 1; r <= o.rounds; r++) {
    say(`interleaved: ${kind}, ${CLIENTS[client]}, round ${r}/${o.rounds}`);
    const targets = [];
    const scrapes = { scrapes: 0 };
    let scraper;
    try {
      // Each process is in `targets` as soon as it is open, so a later one failing closes it too.
      for (const [label, args] of lineUp(kind, tmp, `${client}-${r}`)) targets.push(await open(label, args, client));
      if (kind === 'governance') scraper = startScraper(targets[1].child, scrapes);
      const p50s = await round(targets, o);
      if (scraper) {
        await scraper.stop();
        scraper = undefined;
        p50s.scrapes = scrapes.scrapes;
      }
      rounds.push(p50s);
    } finally {
      await scraper?.stop();
      await Promise.all(targets.map((t) => t.close()));
    }
  }
  return rounds;
}

/**
 * The comparisons of `o.compare`, each once per client of `o.clients`, one after the other:
 * { relay?: { light?: [{ direct, relay, mcpmux }], sdk?: [...] }, governance?: { light?: [{ off,
 * on, scrapes }], sdk?: [...] }, floor?: { light?: [{ relay, rewrite, parse, mcpmux }], ... } } in
 * ms, a record per round. `say` hears each round's start.
 */
export async function measureInterleaved(o, say = (line) => process.stderr.write(line + '\n')) {
  const tmp = mkdtempSync(join(tmpdir(), 'mcpmux-interleaved-'));
  try {
    const results = {};
    for (const kind of o.compare) {
      results[kind] = {};
      for (const client of o.clients) results[kind][client] = await compare(kind, client, o, tmp, say);
    }
    return results;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** The Markdown of measureInterleaved's results; `heading`: its title's level ('#' standalone, '##' in bench/run.mjs). */
export function renderInterleaved(results, o, commit, heading = '#') {
  const us = (ms) => fmt(ms * 1000);
  const clients = Object.keys(CLIENTS).filter((c) => o.clients.includes(c));
  const L = [`${heading} ${INTERLEAVED_TITLE}`, ''];
  L.push(`Node ${process.version}; mcpmux ${commit}; ${o.rounds} round(s), ${o.warmup} warm-up calls each, then ${o.blocks} blocks of ${o.block} calls per target, the order rotating; one call at a time, each client with processes of its own. Cells: median over rounds (min-max).`, '');
  if (results.relay) {
    L.push('| p50 (µs) | direct | relay | mcpmux | mcpmux − relay | target |', '|---|---:|---:|---:|---:|---|');
    for (const client of clients) {
      const r = results.relay[client];
      const over = r.map((x) => (x.mcpmux - x.relay) * 1000);
      const ok = median(over) <= 30;
      const each = (k) => medianRange(r.map((x) => x[k]), us);
      L.push(`| tools/call, ${CLIENTS[client]} | ${each('direct')} | ${each('relay')} | ${each('mcpmux')} | ${medianRange(over)} | relay + 30 µs ${ok ? 'ok' : '**missed**'} |`);
    }
    L.push('');
  }
  if (results.governance) {
    L.push('| p50 (µs) | governance off | governance on | on − off | on ÷ off | target |', '|---|---:|---:|---:|---:|---|');
    for (const client of clients) {
      const g = results.governance[client];
      const ratio = g.map((x) => x.on / x.off);
      const ok = median(ratio) <= 1.1;
      L.push(`| tools/call, ${CLIENTS[client]} | ${medianRange(g.map((x) => x.off), us)} | ${medianRange(g.map((x) => x.on), us)} | ${medianRange(g.map((x) => x.on - x.off), us)} | ${medianRange(ratio, (v) => `${v.toFixed(2)}x`)} | ≤ 1.1x ${ok ? 'ok' : '**missed**'} |`);
    }
    L.push('', `/metrics scrapes per round: ${clients.map((c) => `${CLIENTS[c]} ${results.governance[c].map((x) => x.scrapes).join(', ')}`).join('; ')}.`, '');
  }
  if (results.floor) {
    const over = Object.keys(FLOOR).filter((k) => k !== 'relay');
    L.push(`| p50 over the no-op relay (µs) | no-op relay p50 | ${over.map((k) => FLOOR[k]).join(' | ')} |`, `|---|---:|${over.map(() => '---:').join('|')}|`);
    for (const client of clients) {
      const f = results.floor[client];
      L.push(`| tools/call, ${CLIENTS[client]} | ${medianRange(f.map((x) => x.relay), us)} | ${over.map((k) => medianRange(f.map((x) => (x[k] - x.relay) * 1000))).join(' | ')} |`);
    }
    L.push('');
  }
  return L.join('\n');
}

async function main() {
  const o = options(process.argv.slice(2));
  installCleanup();
  const results = await measureInterleaved(o);
  const commit = shortCommit(ROOT);
  saveLatest(o.out, 'interleaved', renderInterleaved(results, o, commit), { commit, options: o, results });
}

// Run as a script; imported by bench/run.mjs, it only lends its measurement.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((e) => {
    process.stderr.write(`interleaved: ${errText(e)}\n`);
    process.exitCode = 1;
  });
}
