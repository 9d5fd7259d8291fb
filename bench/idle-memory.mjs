#!/usr/bin/env node
// The 20 x 100 idle-memory case of bench/run.mjs on its own, for taking memory apart: start
// `mcpmux stdio` in front of 20 echo upstreams of 100 tools each, wait until all 2 020 tools are
// listed, list 12 more times (bench/run.mjs --quick), idle 2 s, then read VmHWM and VmRSS as
// the bench does. Also prints where the resident set is (smaps_rollup: anonymous vs file-backed)
// and, with --snapshot DIR, writes a V8 heap snapshot of the idle daemon there.
//
//   node bench/idle-memory.mjs [--runs N] [--mux path/to/bin/mcpmux.js] [--snapshot DIR]
//                              [--servers N] [--tools N] [--node-flag F ...] [--json]
//                              [--timeline FILE]
//
// --mux measures another build (a worktree at an older commit) with this same script and the
// same echo server, so steps between commits compare like with like. --timeline writes the
// daemon's memory every 5 ms and each list's time to FILE-<run>.jsonl (bench/lib/mem-timeline.mjs)
// and says what the V8 heap and the memory outside it held at the highest RSS sampled.

import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StdioLight, countTools } from './lib/light-client.mjs';
import { installCleanup, memory, spawnTracked, stopTracked } from './lib/procs.mjs';
import { echoServersConfig } from './lib/upstreams.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
let ECHO = join(ROOT, 'bench', 'echo-server.mjs');
const NODE = process.execPath;

const o = { timeline: undefined, runs: 1, mux: join(ROOT, 'bin', 'mcpmux.js'), snapshot: undefined, servers: 20, tools: 100, nodeFlags: [], json: false, repeats: 12 };
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  const v = () => process.argv[++i];
  if (a === '--runs') o.runs = Number(v());
  else if (a === '--mux') o.mux = resolve(v());
  else if (a === '--snapshot') o.snapshot = resolve(v());
  else if (a === '--servers') o.servers = Number(v());
  else if (a === '--tools') o.tools = Number(v());
  else if (a === '--node-flag') o.nodeFlags.push(v());
  else if (a === '--json') o.json = true;
  else if (a === '--timeline') o.timeline = resolve(v());
  else {
    process.stderr.write(`idle-memory: unknown option ${a}\n`);
    process.exit(2);
  }
}

// The echo server of the build measured: older ones may not speak to today's.
ECHO = join(dirname(o.mux), '..', 'bench', 'echo-server.mjs');
installCleanup();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Resident set by kind, kB: anonymous (heaps, malloc) vs file-backed (the binary, libraries). */
function rollup(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s)?.[1]);
    return { anonKb: kb('Anonymous'), fileKb: kb('Rss') - kb('Anonymous') };
  } catch {
    return undefined;
  }
}

async function once(config, run) {
  const args = [...o.nodeFlags];
  if (o.snapshot) args.push('--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${o.snapshot}`);
  const timeline = o.timeline && `${o.timeline}-${run}.jsonl`;
  if (timeline) args.push('--import', new URL('./lib/mem-timeline.mjs', import.meta.url).href);
  const env = timeline ? { ...process.env, MEM_TIMELINE_OUT: timeline } : undefined;
  const child = spawnTracked(NODE, [...args, o.mux, 'stdio', '--config', config], { label: 'mcpmux', env });
  const lists = [];
  const counted = async () => {
    const t = Date.now();
    const n = await countTools(c);
    lists.push({ t, end: Date.now(), list: n });
    return n;
  };
  const c = new StdioLight(child, { label: 'mcpmux' });
  try {
    await c.initialize(120_000).catch((e) => {
      throw new Error(`${e.message}\n--- its stderr:\n${child.stderrTail()}`);
    });
    const expected = o.servers * (o.tools + 1);
    const deadline = Date.now() + 180_000;
    let n;
    while ((n = await counted()) < expected) {
      if (Date.now() > deadline) throw new Error(`only ${n} of ${expected} tools after 180 s`);
      await sleep(250);
    }
    for (let i = 0; i < o.repeats; i++) await counted();
    await sleep(2000);
    const m = memory(child.pid);
    const r = { run, hwmMb: m.hwmKb / 1024, rssMb: m.rssKb / 1024, ...rollup(child.pid) };
    if (timeline) {
      await sleep(200); // the probe's last lines
      r.peak = peakOf(timeline, lists);
    }
    if (o.snapshot) {
      const before = new Set(readdirSync(o.snapshot));
      process.kill(child.pid, 'SIGUSR2');
      for (let t = 0; t < 600; t++) {
        await sleep(100);
        const made = readdirSync(o.snapshot).filter((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
        // Written in one go at the end: a name that stopped growing is done.
        if (made.length) {
          const f = join(o.snapshot, made[0]);
          const s1 = readFileSync(f).length;
          await sleep(500);
          if (readFileSync(f).length === s1 && s1 > 0) {
            r.snapshot = f;
            break;
          }
        }
      }
    }
    return r;
  } finally {
    await c.close();
    await stopTracked(child);
  }
}

/**
 * The highest-RSS sample of a timeline, and the list (if any) under way or last answered then;
 * the lists' times are added to the file, so it reads as one story.
 */
function peakOf(file, lists) {
  const rows = readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  writeFileSync(file, [...rows, ...lists].sort((a, b) => a.t - b.t).map((r) => JSON.stringify(r)).join('\n') + '\n');
  let top;
  for (const r of rows) if (r.max && (!top || r.rss > top.rss)) top = r;
  if (!top) return undefined;
  const during = lists.filter((l) => l.t <= top.t).at(-1);
  const gcs = rows.filter((r) => r.gc && r.t <= top.t);
  return {
    ...top,
    list: during && { n: during.list, startedMsBefore: top.t - during.t, endedMsBefore: top.t - during.end },
    gcBefore: { minor: gcs.filter((g) => g.gc === 'minor').length, major: gcs.filter((g) => g.gc === 'major').length },
  };
}

const tmp = mkdtempSync(join(tmpdir(), 'mcpmux-idle-'));
try {
  const servers = echoServersConfig(ECHO, o.servers, o.tools, NODE);
  const config = join(tmp, 'twenty.json');
  // As bench/run.mjs: every upstream waited for, the whole catalogue listed (surface "all";
  // builds older than the surface key list everything anyway and refuse the key).
  const schema = readFileSync(join(dirname(o.mux), '..', 'schema', 'config.schema.json'), 'utf8');
  const surface = schema.includes('"surface"') ? { surface: { mode: 'all' } } : {};
  writeFileSync(config, JSON.stringify({ mcpServers: servers, timeouts: { startupMs: 60_000 }, ...surface }));
  const out = [];
  for (let run = 1; run <= o.runs; run++) {
    const r = await once(config, run);
    out.push(r);
    if (!o.json) {
      const f = (x) => (x === undefined ? '?' : x.toFixed(1));
      process.stdout.write(`run ${run}: VmHWM ${f(r.hwmMb)} MB, VmRSS ${f(r.rssMb)} MB (anon ${f(r.anonKb / 1024)}, file ${f(r.fileKb / 1024)})${r.snapshot ? `, snapshot ${r.snapshot}` : ''}\n`);
      if (r.peak) process.stdout.write(`  highest RSS sampled: ${JSON.stringify(r.peak)}\n`);
    }
  }
  if (o.json) process.stdout.write(`${JSON.stringify(out)}\n`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
