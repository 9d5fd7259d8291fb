// Start-up as a host feels it (issue 23, target 5). Run by bench/run.mjs (`--only startup`).
//
// 1. Fast upstream: spawn -> initialize answered, from the host's side, for the echo server run
//    directly, behind the no-op relay (bench/relay.mjs: what any Node process in the middle
//    costs, its own start included) and behind `mcpmux stdio`; N alternating spawns, median.
// 2. 20 upstreams x 100 tools starting at once, with the default startupWaitMs (3 s):
//    - floor: the same 20 servers spawned directly, each given initialize + tools/list at once;
//      the time until the last one listed its tools.
//    - mcpmux: initialize answered (ms), the tools in the first tools/list after it, and the
//      time until all of them are listed (polling on list_changed).
//    Floor and mcpmux alternate in the same run, so both see the same machine.

import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { StdioLight, countTools } from './lib/light-client.mjs';
import { spawnTracked, stopTracked } from './lib/procs.mjs';
import { fmt, median } from './lib/stats.mjs';
import { echoUpstreams } from './lib/upstreams.mjs';

const NODE = process.execPath;
const now = () => performance.now();

/**
 * Spawns `args` under node, sends initialize; resolves with the ms to its answer and the open
 * client. `onStderrLine` sees each line the child writes to stderr from its start.
 */
async function initialized(args, label, timeoutMs, onStderrLine) {
  const t0 = now();
  const child = spawnTracked(NODE, args, { label });
  child.onStderrLine = onStderrLine;
  const c = new StdioLight(child, { timeoutMs, label });
  try {
    await c.initialize(timeoutMs);
  } catch (e) {
    await stopTracked(child, { graceMs: 2000 });
    throw new Error(`${e.message}\n--- its stderr:\n${child.stderrTail()}`);
  }
  return { ms: now() - t0, c, child };
}

async function close({ c, child }) {
  await c.close();
  await stopTracked(child, { graceMs: 3000 });
}

/** Calls `fn` on each notifications/tools/list_changed the client receives. */
function onListChanged(c, fn) {
  const dispatch = c.dispatch.bind(c);
  c.dispatch = (msg) => {
    if (msg && msg.method === 'notifications/tools/list_changed') fn();
    dispatch(msg);
  };
}

async function fastUpstream({ mcpmux, echo, relay, config, repeats, phase }) {
  const direct = [];
  const relayed = [];
  const mux = [];
  for (let i = 0; i < repeats; i++) {
    phase(`start-up: fast upstream, spawn ${i + 1}/${repeats}`);
    // Alternating, so a change in the machine's load touches all three alike.
    const d = await initialized([echo], 'direct', 60_000);
    direct.push(d.ms);
    await close(d);
    const r = await initialized([relay, NODE, echo], 'relay', 60_000);
    relayed.push(r.ms);
    await close(r);
    const m = await initialized([mcpmux, 'stdio', '--config', config], 'mcpmux', 60_000);
    mux.push(m.ms);
    await close(m);
  }
  const directMs = median(direct);
  return { repeats, direct, relayed, mux, directMs, relayMs: median(relayed), muxMs: median(mux), addedMs: median(mux) - directMs, overRelayMs: median(mux) - median(relayed) };
}

/** The 20 servers spawned directly and listed at once: when did the last one answer tools/list? */
async function twentyFloor(servers) {
  const t0 = now();
  const started = await Promise.all(servers.map((s) => initialized(s.args, s.name, 120_000)));
  try {
    const counts = await Promise.all(started.map((s) => countTools(s.c, 120_000)));
    return { allListedMs: now() - t0, tools: counts.reduce((a, b) => a + b, 0) };
  } finally {
    await Promise.all(started.map(close));
  }
}

/** The wall-clock time of each "upstream ready" line mcpmux logs (pino's `time`, ms since the epoch). */
function readyTimes(into) {
  return (line) => {
    if (!line.includes('"upstream ready"')) return;
    try {
      const { time } = JSON.parse(line);
      into.push(typeof time === 'number' ? time : Date.parse(time));
    } catch {
      // Not a log line of ours.
    }
  };
}

async function twentyMux({ mcpmux, config, expected }) {
  const t0 = now();
  const ready = [];
  const m = await initialized([mcpmux, 'stdio', '--config', config], 'mcpmux 20x100', 120_000, readyTimes(ready));
  const answeredAt = Date.now();
  try {
    let changed = 0;
    let wake;
    onListChanged(m.c, () => {
      changed++;
      wake?.();
    });
    let seen = changed;
    const first = await countTools(m.c);
    let n = first;
    const deadline = Date.now() + 120_000;
    while (n < expected) {
      if (Date.now() > deadline) throw new Error(`only ${n} of ${expected} tools listed after 120 s`);
      // Wait for the next list_changed, unless one came while listing (500 ms at most: a bound, not a guess).
      if (changed === seen) await new Promise((r) => ((wake = r), setTimeout(r, 500)));
      seen = changed;
      n = await countTools(m.c);
    }
    // Upstreams whose handshake was done when the host had its answer (counted now: log lines come
    // late, their times do not): the first list must hold them all.
    const readyAtInit = ready.filter((t) => t <= answeredAt).length;
    return { initMs: m.ms, readyAtInit, toolsAtFirstList: first, allListedMs: now() - t0, expected, listChanged: changed };
  } finally {
    await close(m);
  }
}

/**
 * @param o bench options (quick, startupRepeats?)
 * @param ctx { phase, tmp, root }
 */
export async function measureStartup(o, { phase, tmp, root }) {
  const mcpmux = join(root, 'bin', 'mcpmux.js');
  const echo = join(root, 'bench', 'echo-server.mjs');
  const relay = join(root, 'bench', 'relay.mjs');
  const one = join(tmp, 'startup-one.json');
  writeFileSync(one, JSON.stringify({ mcpServers: { echo: { command: NODE, args: [echo] } } }));
  const out = { fast: await fastUpstream({ mcpmux, echo, relay, config: one, repeats: o.quick ? 5 : 15, phase }) };

  // --no-20x100 leaves out every 20-upstream case, this one too (the suite's smoke run).
  if (o.noTwenty) return out;
  const servers = echoUpstreams(echo, 20, 100);
  const twenty = join(tmp, 'startup-twenty.json');
  // The default startupWaitMs (3 s); startupMs long enough that a loaded machine's slow
  // starters are waited for rather than failed; the whole list, not the search surface.
  const mcpServers = Object.fromEntries(servers.map((s) => [s.name, { command: NODE, args: s.args }]));
  writeFileSync(twenty, JSON.stringify({ mcpServers, timeouts: { startupMs: 60_000, startupWaitMs: 3000 }, surface: { mode: 'all' } }));
  const expected = servers.length * 101;
  out.twenty = { rounds: [], startupWaitMs: 3000, expected };
  const rounds = o.quick ? 1 : 3;
  for (let r = 1; r <= rounds; r++) {
    phase(`start-up: 20 x 100, round ${r}/${rounds}: floor (direct)`);
    const floor = await twentyFloor(servers);
    phase(`start-up: 20 x 100, round ${r}/${rounds}: mcpmux`);
    const mux = await twentyMux({ mcpmux, config: twenty, expected });
    out.twenty.rounds.push({ floor, mux });
  }
  const med = (f) => median(out.twenty.rounds.map(f));
  out.twenty.floorMs = med((x) => x.floor.allListedMs);
  out.twenty.initMs = med((x) => x.mux.initMs);
  out.twenty.toolsAtFirstList = med((x) => x.mux.toolsAtFirstList);
  // Every round's first list held every upstream ready at its initialize (101 tools each).
  out.twenty.firstListComplete = out.twenty.rounds.every((x) => x.mux.readyAtInit === undefined || x.mux.toolsAtFirstList >= x.mux.readyAtInit * 101);
  out.twenty.readyAtInit = med((x) => x.mux.readyAtInit ?? NaN);
  out.twenty.allListedMs = med((x) => x.mux.allListedMs);
  return out;
}

export function renderStartup(s) {
  const L = ['## Start-up (issue 23, target 5)', ''];
  if (s.error) return [...L, `failed: ${s.error}`, ''].join('\n');
  const f = s.fast;
  L.push('| figure | direct | relay | mcpmux | target |', '|---|---|---|---|---|');
  // Older results have no relay column.
  const relayCell = f.relayMs === undefined ? '' : `${fmt(f.relayMs)} (+${fmt(f.relayMs - f.directMs)})`;
  const overRelay = f.overRelayMs === undefined ? '' : `, +${fmt(f.overRelayMs)} over the relay`;
  L.push(`| initialize answered, fast upstream, median of ${f.repeats} (ms) | ${fmt(f.directMs)} | ${relayCell} | ${fmt(f.muxMs)} (+${fmt(f.addedMs)}${overRelay}) | +150 over direct ${f.addedMs <= 150 ? 'ok' : '**missed**'} |`);
  const t = s.twenty;
  if (t) {
    const ratio = t.allListedMs / t.floorMs;
    L.push(`| 20 x 100: initialize answered (ms) | | | ${fmt(t.initMs)} | ${t.startupWaitMs} + 150 ${t.initMs <= t.startupWaitMs + 150 ? 'ok' : '**missed**'} |`);
    // Older results have no readiness count.
    const held = t.readyAtInit === undefined || Number.isNaN(t.readyAtInit) ? '' : `every upstream ready at initialize (${t.readyAtInit}) ${t.firstListComplete ? 'ok' : '**missed**'}`;
    L.push(`| 20 x 100: tools in the first tools/list (of ${t.expected}) | | | ${t.toolsAtFirstList} | ${held} |`);
    L.push(`| 20 x 100: all tools listed (ms) | ${fmt(t.floorMs)} (floor) | | ${fmt(t.allListedMs)} (${ratio.toFixed(2)}x) | 1.10x ${ratio <= 1.1 ? 'ok' : '**missed**'} |`);
  }
  const relays = f.relayed ? `; relay ${f.relayed.map(fmt).join(', ')}` : '';
  L.push('', `Fast upstream spawns (ms): direct ${f.direct.map(fmt).join(', ')}${relays}; mcpmux ${f.mux.map(fmt).join(', ')}.`, '');
  return L.join('\n');
}
