#!/usr/bin/env node
// What one sequential tools/call costs the middle process, in measures a loaded machine does
// not disturb: instructions (valgrind callgrind), system calls (strace), garbage collections.
// The middle process (mcpmux stdio, or the no-op relay) runs under the measuring tool; its
// upstream (the echo server) and the client (this process) do not. Each figure is the
// difference between a run of N1 and a run of N2 calls divided by N2 - N1, so start-up,
// initialize and the first compilations cancel out.
//
//   node bench/per-call.mjs [--target mcpmux|relay] [--client light|sdk] [--measure callgrind|strace|gc|alloc]
//                           [--calls 200,2200] [--window] [--mcpmux PATH/bin/mcpmux.js] [--node-flag F]... [--keep DIR]
//
// --window (callgrind only): one run instead of two. After N1 calls the counters are zeroed,
// after N2 they are dumped (callgrind's monitor commands through vgdb, while the middle process
// waits for the next call), so start-up never enters the figure: on a loaded machine how long
// the upstream takes to start changes start-up's instructions by more than 2 000 calls cost.
//
// callgrind: instructions per call (all threads of the middle process: JIT, GC helpers included).
// strace:    system calls per call of the main thread (the event loop: reads, writes, epoll), by name.
// gc:        scavenges and mark-compacts per 1 000 calls (a preloaded PerformanceObserver; stdout
//            carries MCP, so --trace-gc cannot be used).
// alloc:     bytes allocated per call (a preloaded sampling heap profiler, every 256 bytes, objects
//            collected by either GC included: what a call puts through the young generation).

import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { echoTool } from './lib/calls.mjs';
import { StdioLight } from './lib/light-client.mjs';
import { connectSdk, closeSdk } from './lib/sdk-client.mjs';
import { installCleanup, spawnTracked, stopTracked } from './lib/procs.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const NODE = process.execPath;
const ECHO = join(ROOT, 'bench', 'echo-server.mjs');
const RELAY = join(ROOT, 'bench', 'relay.mjs');

function options(argv) {
  const o = { target: 'mcpmux', client: 'light', measure: 'callgrind', calls: [200, 2200], window: false, mcpmux: join(ROOT, 'bin', 'mcpmux.js'), nodeFlags: [], keep: undefined };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => argv[++i] ?? usage(`${a} needs a value`);
    if (a === '--target') o.target = next();
    else if (a === '--client') o.client = next();
    else if (a === '--measure') o.measure = next();
    else if (a === '--calls') o.calls = next().split(',').map(Number);
    else if (a === '--window') o.window = true;
    else if (a === '--mcpmux') o.mcpmux = resolve(next());
    else if (a === '--node-flag') o.nodeFlags.push(next());
    else if (a === '--keep') o.keep = resolve(next());
    else usage(`unknown option ${a}`);
  }
  if (!['mcpmux', 'relay'].includes(o.target)) usage('--target takes mcpmux or relay');
  if (!['light', 'sdk'].includes(o.client)) usage('--client takes light or sdk');
  if (!['callgrind', 'strace', 'gc', 'alloc'].includes(o.measure)) usage('--measure takes callgrind, strace, gc or alloc');
  if (o.calls.length !== 2 || !(o.calls[1] > o.calls[0])) usage('--calls takes N1,N2 with N2 > N1');
  if (o.window && o.measure !== 'callgrind') usage('--window goes with --measure callgrind');
  return o;
}

function usage(why) {
  process.stderr.write(`per-call: ${why}\nsee the comment at the top of bench/per-call.mjs\n`);
  process.exit(2);
}

/** The command that runs the middle process under the measuring tool, writing to `out`. */
function command(o, config, out) {
  const middle = o.target === 'mcpmux' ? [...o.nodeFlags, o.mcpmux, 'stdio', '--config', config] : [...o.nodeFlags, RELAY, NODE, ECHO];
  if (o.measure === 'callgrind') return ['valgrind', ['--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${out}`, NODE, ...middle]];
  if (o.measure === 'strace') return ['strace', ['-c', '-o', out, NODE, ...middle]];
  if (o.measure === 'alloc') {
    const preload = join(dirname(out), 'alloc-count.mjs');
    writeFileSync(
      preload,
      `import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
const s = new Session();
s.connect();
s.post('HeapProfiler.startSampling', { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
process.on('exit', () => {
  // On the main thread the inspector answers at once: the profile is there before exit.
  s.post('HeapProfiler.stopSampling', (err, r) => {
    let bytes = 0;
    const walk = (n) => { bytes += n.selfSize; for (const c of n.children) walk(c); };
    if (!err) walk(r.profile.head);
    writeFileSync(${JSON.stringify(out)}, JSON.stringify({ bytes }));
  });
});
`,
    );
    return [NODE, ['--import', preload, ...middle]];
  }
  const preload = join(dirname(out), 'gc-count.mjs');
  writeFileSync(
    preload,
    `import { PerformanceObserver, constants } from 'node:perf_hooks';
import { writeFileSync } from 'node:fs';
const n = { scavenge: 0, markCompact: 0, other: 0 };
new PerformanceObserver((l) => { for (const e of l.getEntries()) { const k = e.detail?.kind ?? e.kind; if (k === constants.NODE_PERFORMANCE_GC_MINOR) n.scavenge++; else if (k === constants.NODE_PERFORMANCE_GC_MAJOR) n.markCompact++; else n.other++; } }).observe({ entryTypes: ['gc'] });
process.on('exit', () => writeFileSync(${JSON.stringify(out)}, JSON.stringify(n)));
`,
  );
  return [NODE, ['--import', preload, ...middle]];
}

/** A callgrind monitor command (zero, dump) to the valgrind that writes `out`, through vgdb. */
function monitor(out, command) {
  // vgdb -l lists, but exits with status 1.
  const listed = spawnSync('vgdb', ['-l'], { encoding: 'utf8' }).stdout ?? '';
  const pid = listed.split('\n').find((l) => l.includes(`--callgrind-out-file=${out} `))?.match(/--pid=(\d+)/)?.[1];
  if (!pid) throw new Error(`no valgrind writing ${out} in vgdb -l:\n${listed}`);
  execFileSync('vgdb', [`--pid=${pid}`, command], { stdio: 'ignore' });
}

/**
 * Runs `n` sequential calls through one middle process under the tool; returns its raw output.
 * `window`: [N1, N2] zeroes callgrind's counters before call N1 and dumps them after call N2.
 */
async function run(o, config, n, dir, window) {
  const out = join(dir, `out-${n}`);
  const [cmd, args] = command(o, config, out);
  const child = spawnTracked(cmd, args, { label: `${o.target} x${n}` });
  const text = 'hello from the benchmark';
  const params = { name: 'echo', arguments: { text } };
  // The echo tool as the middle process names it (mcpmux may prefix it), as run.mjs finds it.
  // Listed again until it is there: initialize waits for upstreams only up to startupWaitMs.
  const named = async (list) => {
    for (let i = 0; i < 600; i++) {
      const found = echoTool((await list()).map((t) => t.name));
      if (found) return (params.name = found);
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('no echo tool listed within a minute');
  };
  const timeoutMs = 600_000; // valgrind runs node ~50x slower
  try {
    if (o.client === 'light') {
      const c = new StdioLight(child, { label: o.target, timeoutMs });
      await c.initialize(timeoutMs);
      await named(async () => (await c.request('tools/list', {}, timeoutMs)).result.tools);
      for (let i = 0; i < n; i++) {
        if (window && i === window[0]) monitor(out, 'zero');
        const r = await c.request('tools/call', params, timeoutMs);
        if (r.result?.content?.[0]?.text !== text) throw new Error(`call ${i}: ${JSON.stringify(r).slice(0, 200)}`);
      }
      if (window) monitor(out, 'dump');
      await c.close();
    } else {
      const sdk = await connectSdk('stdio', child, timeoutMs);
      await named(async () => (await sdk.client.listTools(undefined, { timeout: timeoutMs })).tools);
      for (let i = 0; i < n; i++) {
        if (window && i === window[0]) monitor(out, 'zero');
        const r = await sdk.client.callTool(params, undefined, { timeout: timeoutMs });
        if (r.content?.[0]?.text !== text) throw new Error(`call ${i}: ${JSON.stringify(r).slice(0, 200)}`);
      }
      if (window) monitor(out, 'dump');
      await closeSdk(sdk, 'stdio');
    }
  } catch (e) {
    throw new Error(`${e.message}\n--- stderr:\n${child.stderrTail()}`);
  } finally {
    // End of input: mcpmux and the relay exit, and the tool writes its output.
    await stopTracked(child, { graceMs: 120_000 });
  }
  // The monitor's dump is the first numbered part.
  return readFileSync(window ? `${out}.1` : out, 'utf8');
}

function parse(o, raw) {
  if (o.measure === 'callgrind') {
    const m = /^(?:summary|totals):\s+(\d+)/m.exec(raw);
    if (!m) throw new Error('no totals in the callgrind output');
    return { instructions: Number(m[1]) };
  }
  if (o.measure === 'gc' || o.measure === 'alloc') return JSON.parse(raw);
  // strace -c: "% time seconds usecs/call calls errors syscall"
  const calls = {};
  for (const line of raw.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 5 && /^\d/.test(f[0]) && f[f.length - 1] !== 'total') calls[f[f.length - 1]] = Number(f[3]);
  }
  return calls;
}

async function main() {
  const o = options(process.argv.slice(2));
  installCleanup();
  const dir = o.keep ?? mkdtempSync(join(tmpdir(), 'mcpmux-per-call-'));
  // Not beside the tools' output files: mcpmux watches its config's directory.
  mkdirSync(join(dir, 'config'));
  const config = join(dir, 'config', 'one.json');
  writeFileSync(config, JSON.stringify({ mcpServers: { echo: { command: NODE, args: [ECHO] } } }));
  try {
    const [n1, n2] = o.calls;
    const a = o.window ? {} : parse(o, await run(o, config, n1, dir));
    const b = parse(o, await run(o, config, n2, dir, o.window ? o.calls : undefined));
    const per = {};
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) per[k] = ((b[k] ?? 0) - (a[k] ?? 0)) / (n2 - n1);
    const scale = o.measure === 'gc' ? 1000 : 1;
    const label = o.measure === 'gc' ? 'per 1 000 calls' : 'per call';
    const git = (() => {
      try {
        return execFileSync('git', ['describe', '--always', '--dirty'], { cwd: dirname(dirname(o.mcpmux)), encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
      } catch {
        return '?';
      }
    })();
    const how = o.window ? `calls ${n1 + 1} to ${n2} of one run` : `${n1} vs ${n2} calls`;
    process.stdout.write(`${o.target} (${o.target === 'mcpmux' ? `${git}, ` : ''}${o.client} client${o.nodeFlags.length ? `, ${o.nodeFlags.join(' ')}` : ''}), ${o.measure}, ${how}, ${label}:\n`);
    for (const [k, v] of Object.entries(per).sort((x, y) => y[1] - x[1])) if (v !== 0) process.stdout.write(`  ${k.padEnd(16)} ${(v * scale).toFixed(o.measure === 'callgrind' || o.measure === 'alloc' ? 0 : 2)}\n`);
  } finally {
    if (!o.keep) rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  process.stderr.write(`per-call: ${e.stack ?? e}\n`);
  process.exit(1);
});
