#!/usr/bin/env node
// Governance with Redis vs in-memory (issue 21): the same `mcpmux serve` in front of the echo
// server, with 3 rate-limit rules that apply to every call but never refuse, measured back to
// back in each round with the buckets in memory and in Redis (`store`, a local redis-server the
// bench starts on a free loopback port). Figures: tools/call p50 (sequential) and calls/s (64 in
// flight) over Streamable HTTP, their ratios Redis ÷ memory (target within 15 %), and the Redis
// round trips per limited call (INFO commandstats before and after).
//
// `npm run bench` runs it as a section of bench/run.mjs (skip with --no-shared-limits); alone:
//   node bench/shared-limits.mjs [--quick] [--rounds N] [--duration S] [--calls N] [--warmup N] [--inflight N]
// Without redis-server on PATH (Debian: apt-get install redis-server) the section is skipped
// with a line saying so, never failed.

import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { echoCall, echoTool, sequential, throughput } from './lib/calls.mjs';
import { HttpLight } from './lib/light-client.mjs';
import { freePort, installCleanup, spawnTracked, stopTracked } from './lib/procs.mjs';
import { fmtSpread, spread } from './lib/stats.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ECHO = join(ROOT, 'bench', 'echo-server.mjs');
const MCPMUX = join(ROOT, 'bin', 'mcpmux.js');
const NODE = process.execPath;

/** The 3 rules of the governance section (bench/run.mjs): every call matches each, none refuses. */
const RULES = [
  { server: 'echo', perMinute: 60_000_000, burst: 1_000_000 },
  { tool: 'echo', perMinute: 60_000_000, burst: 1_000_000 },
  { client: '*', perMinute: 60_000_000, burst: 1_000_000, per: ['client'] },
];

function which(bin) {
  for (const dir of (process.env.PATH ?? '').split(delimiter).concat(['/usr/bin', '/usr/sbin', '/usr/local/bin'])) {
    if (dir && existsSync(join(dir, bin))) return join(dir, bin);
  }
  return undefined;
}

async function startRedis(bin) {
  const port = await freePort();
  const child = spawnTracked(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning'], { label: 'redis-server' });
  const { Redis } = await import('ioredis');
  const url = `redis://127.0.0.1:${port}/0`;
  const admin = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: (n) => (n > 50 ? null : 100) });
  admin.on('error', () => {});
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      if (admin.status !== 'ready') await admin.connect();
      await admin.ping();
      break;
    } catch (e) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`redis-server did not answer on port ${port}: ${e.message}${child.stderrTail() ? ` — ${child.stderrTail(300)}` : ''}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    url,
    pid: child.pid,
    /** Script calls (each one round trip) and the commands the scripts ran inside Redis. */
    async stats() {
      const text = await admin.info('commandstats');
      const calls = (name) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(text)?.[1] ?? 0);
      return { scripts: calls('evalsha') + calls('eval'), inside: calls('time') + calls('mget') + calls('set') };
    },
    async stop() {
      admin.disconnect();
      return stopTracked(child, { first: 'SIGTERM', graceMs: 5000 });
    },
  };
}

/** Waits for the JSON stderr line {"msg":"listening",...}. */
function listening(child, ms) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => done(new Error(`mcpmux serve: no "listening" line within ${ms} ms`)), ms);
    child.exited.then(({ code, signal }) => done(new Error(`mcpmux serve exited (${signal ?? `code ${code}`}) before listening`)));
    function done(err, m) {
      clearTimeout(t);
      child.onStderrLine = undefined;
      if (err) reject(new Error(`${err.message}${child.stderrTail() ? `\n--- its stderr:\n${child.stderrTail(1500)}` : ''}`));
      else resolve(m);
    }
    child.onStderrLine = (line) => {
      if (!line.includes('"listening"')) return;
      try {
        const m = JSON.parse(line);
        if (m.msg === 'listening') done(null, m);
      } catch {
        /* not JSON */
      }
    };
  });
}

async function serve(config, label) {
  const child = spawnTracked(NODE, [MCPMUX, 'serve', '--config', config, '--port', '0', '--log-format', 'json'], { label });
  const m = await listening(child, 30_000);
  return { child, base: new URL(m.url).origin, stop: () => stopTracked(child, { first: 'SIGTERM', graceMs: 8000 }) };
}

/** Until /readyz answers 200 (the upstream started) and, with a store, says it is up (it connects in the background). */
async function ready(base, store) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { status, body } = await fetch(`${base}/readyz`).then(
      async (r) => ({ status: r.status, body: await r.json() }),
      () => ({ status: 0, body: {} }),
    );
    if (status === 200 && (!store || body.detail?.store === 'up')) return;
    if (Date.now() > deadline) throw new Error(`the daemon is not ready after 30 s (/readyz: ${status} ${JSON.stringify(body)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** One target (in memory, or in Redis): sequential p50 and throughput over one HTTP session. */
async function measureOne(config, label, o, { phase, redis }) {
  phase(`shared limits, ${label}: start mcpmux serve`);
  const d = await serve(config, `mcpmux serve (${label})`);
  const c = new HttpLight(`${d.base}/mcp`, { label });
  try {
    await ready(d.base, redis !== undefined);
    await c.initialize();
    const tools = (await c.request('tools/list', {})).result?.tools ?? [];
    const tool = echoTool(tools.map((t) => t.name));
    if (!tool) throw new Error(`${label}: no echo tool listed`);
    phase(`shared limits, ${label}: sequential tools/call, ${o.warmup} + ${o.calls}`);
    const seq = await sequential(echoCall(c, tool), o.warmup, o.calls, ' (a limit refused? the store down?)');
    // Round trips are counted over the throughput phase alone: one call at a time is always
    // exactly one script call, which would blur what group commit does with calls in flight.
    const before = redis && (await redis.stats());
    phase(`shared limits, ${label}: throughput, ${o.inflight} in flight, ${o.duration} s`);
    // CPU of the daemon (and of redis-server) over the throughput phase: steadier than calls/s on a loaded machine.
    const pids = [d.child.pid, redis?.pid];
    const r = await throughput(echoCall(c, tool), { inflight: o.inflight, durationMs: o.duration * 1000, pids });
    const tput = { calls: r.calls, errors: r.errors, callsPerSec: r.callsPerSec, cpuMsPerCall: r.cpuMsPerCall[0] };
    if (redis) tput.redisCpuMsPerCall = r.cpuMsPerCall[1];
    const rec = { seq, tput };
    if (redis) {
      const after = await redis.stats();
      const limited = tput.calls + tput.errors;
      rec.roundTripsPerCall = (after.scripts - before.scripts) / limited;
      rec.commandsInsidePerCall = (after.inside - before.inside) / limited;
    }
    return rec;
  } finally {
    await c.close().catch(() => {});
    await d.stop();
  }
}

/** Every round: in memory and in Redis, back to back. Returns {skipped} without redis-server. */
export async function measureSharedLimits(o, { phase = (s) => process.stderr.write(`bench: ${s}\n`) } = {}) {
  const bin = which('redis-server');
  if (!bin) return { skipped: 'redis-server is not installed (Debian: apt-get install redis-server); governance with Redis was not measured' };
  const tmp = mkdtempSync(join(tmpdir(), 'mcpmux-bench-limits-'));
  phase('shared limits: starting redis-server on a free loopback port');
  const redis = await startRedis(bin);
  const out = { rounds: [], rules: RULES.length };
  try {
    const base = { mcpServers: { echo: { command: NODE, args: [ECHO] } }, listen: { host: '127.0.0.1', port: 0 }, rateLimits: RULES };
    const memory = join(tmp, 'memory.json');
    const shared = join(tmp, 'redis.json');
    writeFileSync(memory, JSON.stringify(base, null, 2));
    writeFileSync(shared, JSON.stringify({ ...base, store: { redis: { url: redis.url, keyPrefix: 'bench:' } } }, null, 2));
    for (let round = 1; round <= o.rounds; round++) {
      const r = {};
      out.rounds.push(r);
      try {
        // Which goes first alternates, so that a machine getting busier or quieter does not favour one side.
        const sides = [
          ['memory', () => measureOne(memory, `limits in memory, round ${round}`, o, { phase })],
          ['redis', () => measureOne(shared, `limits in Redis, round ${round}`, o, { phase, redis })],
        ];
        if (round % 2 === 0) sides.reverse();
        for (const [side, measure] of sides) r[side] = await measure();
      } catch (e) {
        r.error = e.message;
        out.error ??= r.error;
        process.stderr.write(`bench: shared limits failed: ${r.error}\n`);
      }
    }
  } finally {
    await redis.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
  return out;
}

const get = (obj, path) => path.split('.').reduce((v, k) => (v == null ? undefined : v[k]), obj);

/** The section's markdown lines. */
export function renderSharedLimits(L, s, o) {
  L.push('## Governance with Redis vs in memory (HTTP host → stdio upstream)');
  L.push('');
  if (s.skipped) {
    L.push(`skipped: ${s.skipped}`, '');
    return;
  }
  L.push(`The same \`mcpmux serve\` in front of the echo server with ${s.rules} rate-limit rules that apply to every call but never refuse, measured back to back in each round (which goes first alternates): the buckets in memory, and in Redis (\`store\`, a local redis-server on loopback). Light client over Streamable HTTP, ${o.inflight} in flight for calls/s.`);
  L.push('');
  if (s.error) L.push(`**failed:** ${s.error.split('\n')[0]}\n`);
  L.push('| figure | in memory | in Redis | ratio Redis ÷ memory | target |');
  L.push('|---|---:|---:|---:|---|');
  const rows = [
    ['tools/call p50 (ms)', 'seq.p50', '<='],
    ['tools/call p99 (ms)', 'seq.p99', ''],
    ['throughput (calls/s)', 'tput.callsPerSec', '>='],
  ];
  for (const [label, path, op] of rows) {
    const mem = spread(s.rounds.map((r) => get(r.memory, path)));
    const red = spread(s.rounds.map((r) => get(r.redis, path)));
    const ratios = spread(s.rounds.map((r) => get(r.redis, path) / get(r.memory, path)));
    const ratio = red.med / mem.med;
    const range = ratios.n > 1 && ratios.min !== ratios.max ? ` (${ratios.min.toFixed(2)}–${ratios.max.toFixed(2)})` : '';
    const ok = op === '<=' ? ratio <= 1.15 : ratio >= 1 / 1.15;
    const target = !op || !Number.isFinite(ratio) ? '' : `${ok ? 'ok' : '**MISSED**'} (${op === '<=' ? '≤ 1.15x' : '≥ 0.87x'})`;
    L.push(`| ${label} | ${fmtSpread(mem)} | ${fmtSpread(red)} | ${Number.isFinite(ratio) ? `${ratio.toFixed(2)}x${range}` : ''} | ${target} |`);
  }
  L.push(`| CPU/call of the mcpmux process, throughput phase (ms) | ${fmtSpread(spread(s.rounds.map((r) => r.memory?.tput.cpuMsPerCall)))} | ${fmtSpread(spread(s.rounds.map((r) => r.redis?.tput.cpuMsPerCall)))} | ${fmtRatio(s.rounds.map((r) => r.redis?.tput.cpuMsPerCall / r.memory?.tput.cpuMsPerCall))} | |`);
  L.push(`| CPU/call of redis-server (ms) | | ${fmtSpread(spread(s.rounds.map((r) => r.redis?.tput.redisCpuMsPerCall)))} | | |`);
  L.push(`| Redis round trips per limited call (script calls ÷ calls; calls that come while one is under way share the next) | | ${fmtSpread(spread(s.rounds.map((r) => r.redis?.roundTripsPerCall)))} | | ≤ 1 |`);
  L.push(`| commands the scripts run inside Redis per call (TIME, MGET, SET) | | ${fmtSpread(spread(s.rounds.map((r) => r.redis?.commandsInsidePerCall)))} | | |`);
  L.push('');
}

function fmtRatio(values) {
  const r = spread(values);
  return r.n ? `${r.med.toFixed(2)}x${r.n > 1 && r.min !== r.max ? ` (${r.min.toFixed(2)}–${r.max.toFixed(2)})` : ''}` : '';
}

// ---- alone ------------------------------------------------------------------------------------

function options(argv) {
  const o = { quick: false, inflight: 64 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const n = () => {
      const v = Number(argv[++i]);
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${a} needs a positive number`);
      return v;
    };
    if (a === '--quick') o.quick = true;
    else if (a === '--rounds') o.rounds = Math.round(n());
    else if (a === '--duration') o.duration = n();
    else if (a === '--calls') o.calls = Math.round(n());
    else if (a === '--warmup') o.warmup = Math.round(n());
    else if (a === '--inflight') o.inflight = Math.round(n());
    else throw new Error(`unknown option ${a}\nusage: node bench/shared-limits.mjs [--quick] [--rounds N] [--duration S] [--calls N] [--warmup N] [--inflight N]`);
  }
  o.rounds ??= o.quick ? 1 : 3;
  o.duration ??= o.quick ? 2 : 10;
  o.calls ??= o.quick ? 200 : 2000;
  o.warmup ??= o.quick ? 50 : 200;
  return o;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  installCleanup();
  const o = options(process.argv.slice(2));
  if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) {
    process.stderr.write('bench: dist/ is missing: run `npm run build` first\n');
    process.exit(1);
  }
  measureSharedLimits(o).then(
    (s) => {
      const L = [];
      renderSharedLimits(L, s, o);
      process.stdout.write(L.join('\n') + '\n');
      process.exit(s.error ? 1 : 0);
    },
    (e) => {
      process.stderr.write(`bench: ${e.stack ?? e}\n`);
      process.exit(1);
    },
  );
}
