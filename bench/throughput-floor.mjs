#!/usr/bin/env node
// Calls/s with many calls in flight, and what each process spends on a call, for the middle
// processes a stdio host may talk through (issue 23, target 1's throughput clause):
//
//   node bench/throughput-floor.mjs [--targets relay,rewrite,parse,mcpmux,governed] [--rounds 3]
//                                   [--seconds 10] [--warmup 2] [--inflight 64] [--out DIR]
//
// - relay: bench/relay.mjs, bytes piped both ways (the floor `npm run bench` divides by);
// - rewrite: bench/rewrite-relay.mjs, the relay plus the id rewriting any multiplexer needs,
//   without parsing JSON;
// - parse: the same relay reading each message (JSON.parse, the id swapped, JSON.stringify);
// - mcpmux: `mcpmux stdio` with one upstream;
// - governed: the same with governance on (bench/lib/governed.mjs; /metrics scraped every second).
//
// Every target has the echo server (bench/echo-server.mjs) behind it and the bench's light
// client in front, one after the other in each round (the order rotating). For each: calls/s
// over `seconds` after `warmup` seconds of the same load, the ratio to the relay of the same
// round, and the CPU each process spent per call (/proc ticks of the middle process and of the
// echo server; the client's own from process.cpuUsage). On a machine with fewer cores than
// processes the three share them, so a call's throughput follows the sum of the three; the
// table shows that sum. Prints Markdown (median over rounds, min-max in brackets) and writes it
// with the raw figures to DIR/throughput-floor-latest.{md,json} (default bench/results).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { echoCall, errText, listedEchoTool, throughput } from './lib/calls.mjs';
import { governedConfig, startScraper } from './lib/governed.mjs';
import { readArgs } from './lib/options.mjs';
import { echoServerOf, installCleanup } from './lib/procs.mjs';
import { saveLatest, shortCommit } from './lib/results.mjs';
import { openStdioLight, sessionError } from './lib/stdio-session.mjs';
import { medianRange } from './lib/stats.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const NODE = process.execPath;
const ECHO = join(ROOT, 'bench', 'echo-server.mjs');
const MCPMUX = join(ROOT, 'bin', 'mcpmux.js');

const USAGE = 'usage: node bench/throughput-floor.mjs [--targets relay,rewrite,parse,mcpmux,governed] [--rounds N] [--seconds N] [--warmup N] [--inflight N] [--out DIR]';
const TARGETS = {
  relay: 'no-op relay',
  rewrite: 'id-rewriting relay',
  parse: 'parsing relay',
  mcpmux: 'mcpmux stdio',
  governed: 'mcpmux stdio, governance on',
};

function options(argv) {
  const o = { targets: ['relay', 'rewrite', 'parse', 'mcpmux'], rounds: 3, seconds: 10, warmup: 2, inflight: 64, out: join(ROOT, 'bench', 'results') };
  readArgs(argv, USAGE, (a, value, count) => {
    if (a === '--targets') {
      o.targets = [...new Set(value().split(','))];
      for (const t of o.targets) if (!Object.hasOwn(TARGETS, t)) throw new Error(`--targets takes ${Object.keys(TARGETS).join(', ')}, got ${t}\n${USAGE}`);
      // The ratios are to the relay of the same round.
      if (!o.targets.includes('relay')) o.targets.unshift('relay');
    } else if (a === '--rounds') o.rounds = count();
    else if (a === '--seconds') o.seconds = count();
    else if (a === '--warmup') o.warmup = count();
    else if (a === '--inflight') o.inflight = count();
    else if (a === '--out') o.out = value();
    else return false;
    return true;
  });
  return o;
}

/** The command line of a target (configs written to `tmp`). */
function argsOf(target, tmp, round) {
  const echo = { command: NODE, args: [ECHO] };
  switch (target) {
    case 'relay':
      return [join(ROOT, 'bench', 'relay.mjs'), NODE, ECHO];
    case 'rewrite':
      return [join(ROOT, 'bench', 'rewrite-relay.mjs'), NODE, ECHO];
    case 'parse':
      return [join(ROOT, 'bench', 'rewrite-relay.mjs'), '--parse', NODE, ECHO];
    case 'mcpmux': {
      const file = join(tmp, 'one.json');
      writeFileSync(file, JSON.stringify({ mcpServers: { echo } }));
      return [MCPMUX, 'stdio', '--config', file];
    }
    case 'governed': {
      const file = join(tmp, 'governed.json');
      writeFileSync(file, JSON.stringify(governedConfig(echo, join(tmp, `audit-${round}.jsonl`))));
      return [MCPMUX, 'stdio', '--config', file, '--admin-port', '0'];
    }
  }
}

/**
 * One target, opened, warmed up and measured: { callsPerSec, calls, seconds, cpuUsPerCall:
 * { client, middle, upstream } } (the client: this process, /metrics scrapes included), and the
 * governed target's scrapes.
 */
async function measure(target, o, tmp, round) {
  const s = await openStdioLight(argsOf(target, tmp, round), { label: target, timeoutMs: 60_000 });
  const scrapes = { scrapes: 0 };
  let scraper;
  try {
    const tool = await listedEchoTool(async () => (await s.c.request('tools/list', {}, 60_000)).result?.tools ?? []);
    const upstream = echoServerOf(s.pid);
    if (!upstream) throw new Error('its echo server was not found among its children');
    if (target === 'governed') scraper = startScraper(s.child, scrapes);
    const call = echoCall(s.c, tool);
    await throughput(call, { inflight: o.inflight, durationMs: o.warmup * 1000 });
    const t = await throughput(call, { inflight: o.inflight, durationMs: o.seconds * 1000, pids: [s.pid, upstream] });
    if (t.errors > 0) throw new Error(`${t.errors} calls did not echo`);
    const us = (ms) => ms * 1000;
    return {
      callsPerSec: t.callsPerSec,
      calls: t.calls,
      seconds: t.seconds,
      cpuUsPerCall: { client: us(t.clientCpuMsPerCall), middle: us(t.cpuMsPerCall[0]), upstream: us(t.cpuMsPerCall[1]) },
      ...(scraper && { scrapes: scrapes.scrapes, ...(scrapes.scrapeError && { scrapeError: scrapes.scrapeError }) }),
    };
  } catch (e) {
    throw sessionError(TARGETS[target], s.child, e);
  } finally {
    await scraper?.stop();
    await s.close();
  }
}

/** Every round: each target in turn (the order rotating). [{ relay: {...}, rewrite: {...}, ... }] */
async function measureFloor(o, say = (line) => process.stderr.write(line + '\n')) {
  const tmp = mkdtempSync(join(tmpdir(), 'mcpmux-floor-'));
  try {
    const rounds = [];
    for (let r = 0; r < o.rounds; r++) {
      const figures = {};
      for (let k = 0; k < o.targets.length; k++) {
        const target = o.targets[(r + k) % o.targets.length];
        say(`throughput-floor: ${TARGETS[target]}, round ${r + 1}/${o.rounds}`);
        figures[target] = await measure(target, o, tmp, r);
      }
      rounds.push(figures);
    }
    return rounds;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

function renderFloor(rounds, o, commit) {
  const c = cpus();
  const L = ['# Throughput and CPU per call of the middle process (issue 23, target 1)', ''];
  L.push(`Node ${process.version}; ${c.length} × ${c[0]?.model ?? '?'}; mcpmux ${commit}; ${o.rounds} round(s); light client, ${o.inflight} in flight, ${o.warmup} s of warm-up then ${o.seconds} s measured per target, the order rotating. Cells: median over rounds (min-max).`, '');
  L.push('| target | calls/s | ÷ relay | CPU µs/call: client | middle | echo server | all three |', '|---|---:|---:|---:|---:|---:|---:|');
  const x = (v) => `${v.toFixed(2)}x`;
  // Rows in TARGETS' order, whatever the order asked.
  for (const target of Object.keys(TARGETS).filter((t) => o.targets.includes(t))) {
    const f = rounds.map((r) => r[target]);
    const ratio = rounds.map((r) => r[target].callsPerSec / r.relay.callsPerSec);
    const cpu = (k) => medianRange(f.map((v) => v.cpuUsPerCall[k]));
    L.push(`| ${TARGETS[target]} | ${medianRange(f.map((v) => v.callsPerSec))} | ${medianRange(ratio, x)} | ${cpu('client')} | ${cpu('middle')} | ${cpu('upstream')} | ${medianRange(f.map(({ cpuUsPerCall: c }) => c.client + c.middle + c.upstream))} |`);
  }
  L.push('', 'Issue 23 asks mcpmux for at least 0.95x the relay\'s calls/s. CPU per call comes from /proc clock ticks (10 ms): short runs read coarsely.', '');
  return L.join('\n');
}

async function main() {
  const o = options(process.argv.slice(2));
  installCleanup();
  const rounds = await measureFloor(o);
  const commit = shortCommit(ROOT);
  saveLatest(o.out, 'throughput-floor', renderFloor(rounds, o, commit), { commit, options: o, rounds });
}

main().catch((e) => {
  process.stderr.write(`throughput-floor: ${errText(e)}\n`);
  process.exitCode = 1;
});
