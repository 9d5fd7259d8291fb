#!/usr/bin/env node
// Throughput of 1, 2 and 3 mcpmux daemons behind HAProxy (contrib/haproxy/haproxy.cfg, only
// its addresses changed), beside one daemon reached directly. The host speaks 2026-07-28:
// every tools/call is a stateless POST that HAProxy may send to any daemon (round-robin). The
// daemons are clustered (`store` in one local redis-server, `cluster`), each with the bench's
// echo upstream (bench/echo-server.mjs) over stdio.
//
// On a 2-core machine this measures what the balancer COSTS, not how mcpmux scales: the
// client, HAProxy, Redis, every daemon and its upstream all share the same two cores, so a
// second daemon adds no CPU to serve with. Scaling needs the daemons on their own cores or
// machines (docs/scaling.md has the capacity model).
//
//   node bench/haproxy.mjs [--rounds N] [--duration S] [--inflight N] [--calls N] [--out DIR]
//
// Needs /usr/sbin/haproxy and /usr/bin/redis-server (Debian: apt-get install haproxy
// redis-server) and a built mcpmux (npx tsc -p tsconfig.json). Prints a markdown table; writes
// DIR/haproxy-latest.json (default bench/results).

import { execFile } from 'node:child_process';
import http from 'node:http';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { TICK_MS, cpuTicks, freePort, installCleanup, spawnTracked, stopTracked } from './lib/procs.mjs';
import { fmt, fmtSpread, latencySummary, spread } from './lib/stats.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ECHO = join(ROOT, 'bench', 'echo-server.mjs');
const MCPMUX = join(ROOT, 'bin', 'mcpmux.js');
const CFG = join(ROOT, 'contrib', 'haproxy', 'haproxy.cfg');
const HAPROXY = '/usr/sbin/haproxy';
const REDIS = '/usr/bin/redis-server';
const NODE = process.execPath;
const MODERN = '2026-07-28';
const TOOL = 'echo__echo';
const run = promisify(execFile);

function options(argv) {
  const o = { rounds: 3, duration: 10, inflight: 32, calls: 1000, out: join(ROOT, 'bench', 'results') };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[++i];
    if (a === '--out') o.out = v;
    else if (['--rounds', '--duration', '--inflight', '--calls'].includes(a) && Number(v) > 0) o[a.slice(2)] = Number(v);
    else {
      process.stderr.write('usage: node bench/haproxy.mjs [--rounds N] [--duration S] [--inflight N] [--calls N] [--out DIR]\n');
      process.exit(2);
    }
  }
  return o;
}

const say = (s) => process.stderr.write(`bench haproxy: ${s}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, fn, ms = 30_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(50);
  }
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

/** One HTTP request on the keep-alive agent; resolves {status, body}. */
function request(url, { method = 'GET', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers, agent }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode, body: text }));
    });
    req.on('error', reject);
    req.setTimeout(30_000, () => req.destroy(new Error('request timed out')));
    req.end(body);
  });
}

const META = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'bench-haproxy', version: '0' } };
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': TOOL };
let nextId = 1;

/** One stateless tools/call; resolves its latency in ms, rejects unless it answered the echo. */
async function call(url) {
  const id = nextId++;
  const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: TOOL, arguments: { text: `c${id}` }, _meta: META } });
  const t0 = performance.now();
  const res = await request(url, { method: 'POST', headers: HEADERS, body });
  const ms = performance.now() - t0;
  if (res.status !== 200 || !res.body.includes(`"c${id}"`)) throw new Error(`tools/call answered ${res.status}: ${res.body.slice(0, 300)}`);
  return ms;
}

/** `calls` sequential calls (one in flight): the latency a lone host sees. */
async function sequential(url, calls) {
  const lat = [];
  for (let i = 0; i < calls; i++) lat.push(await call(url));
  return latencySummary(lat);
}

/** `inflight` calls in flight for `seconds`: calls per second, and the latencies under that load. */
async function throughput(url, inflight, seconds) {
  const lat = [];
  const end = performance.now() + seconds * 1000;
  let failed = 0;
  await Promise.all(
    Array.from({ length: inflight }, async () => {
      while (performance.now() < end) {
        try {
          lat.push(await call(url));
        } catch {
          failed++;
        }
      }
    }),
  );
  return { perSecond: lat.length / seconds, failed, ...latencySummary(lat) };
}

async function startRedis() {
  const port = await freePort();
  const child = spawnTracked(REDIS, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning'], { label: 'redis' });
  await until('redis-server', async () => (await run('redis-cli', ['-p', String(port), 'PING'], { timeout: 2000 })).stdout.trim() === 'PONG');
  return { child, url: `redis://127.0.0.1:${port}/0` };
}

async function startDaemon(dir, name, redisUrl) {
  const port = await freePort();
  const config = join(dir, `${name}.json`);
  writeFileSync(
    config,
    JSON.stringify({
      mcpServers: { echo: { command: NODE, args: [ECHO] } },
      listen: { host: '127.0.0.1', port },
      store: { redis: { url: redisUrl } },
      cluster: { advertiseUrl: `http://127.0.0.1:${port}`, secretEnv: 'MCPMUX_CLUSTER_SECRET', drainMs: 0 },
    }),
  );
  const child = spawnTracked(NODE, [MCPMUX, 'serve', '--config', config, '--log-level', 'warn'], {
    label: name,
    env: { ...process.env, MCPMUX_CLUSTER_SECRET: 'bench-cluster-secret-0123456789abcdef-0123' },
  });
  await until(`${name} /readyz`, async () => (await request(`http://127.0.0.1:${port}/readyz`)).status === 200, 60_000);
  return { name, port, child };
}

/** The shipped config with the bench's addresses (as test/helpers/haproxy.ts does for the tests). */
function haproxyConfig(port, daemons, socket) {
  let section = '';
  let servers = false;
  const out = [];
  for (const line of readFileSync(CFG, 'utf8').split('\n')) {
    const t = line.trim();
    if (/^\S/.test(line) && t && !t.startsWith('#')) section = t;
    if (/^bind\s/.test(t) && section.startsWith('frontend ')) out.push(`    bind 127.0.0.1:${port}`);
    else if (/^stats socket\s/.test(t)) out.push(line.replace(/stats socket \S+/, `stats socket ${socket}`));
    else if (/^server\s/.test(t) && section === 'backend mcpmux') {
      if (!servers) for (const d of daemons) out.push(`    server ${d.name} 127.0.0.1:${d.port}`);
      servers = true;
    } else out.push(line);
  }
  return out.join('\n');
}

async function startHaproxy(dir, daemons) {
  const port = await freePort();
  const file = join(dir, `haproxy-${daemons.length}.cfg`);
  writeFileSync(file, haproxyConfig(port, daemons, join(dir, `haproxy-${daemons.length}.sock`)));
  const child = spawnTracked(HAPROXY, ['-db', '-f', file], { label: `haproxy ${daemons.length}` });
  child.stdout.resume(); // its request log
  const url = `http://127.0.0.1:${port}`;
  // Every server UP (two good checks each) before measuring: a request to a server not yet
  // checked would still be served, but the spread would not be even.
  await until('haproxy with every daemon up', async () => (await request(`${url}/readyz`)).status === 200);
  await sleep(2500);
  return { child, url: `${url}/mcp` };
}

async function main() {
  const o = options(process.argv.slice(2));
  installCleanup();
  const dir = mkdtempSync(join(tmpdir(), 'mcpmux-bench-haproxy-'));
  const load = [loadavg()[0]];
  say(`${cpus().length} cores; ${o.calls} sequential calls, then ${o.inflight} in flight for ${o.duration} s, per row`);
  const redis = await startRedis();
  const daemons = [];
  for (const name of ['mcpmux1', 'mcpmux2', 'mcpmux3']) daemons.push(await startDaemon(dir, name, redis.url));
  // Every setup measured once per round, in turn, so that the machine's other load (on a shared
  // 2-core box it varies) falls on all of them alike; cells show median (min-max) over rounds.
  const setups = [{ label: '1 daemon, direct (no HAProxy)', url: `http://127.0.0.1:${daemons[0].port}/mcp`, daemons: [daemons[0]] }];
  const proxies = [];
  const rounds = [];
  try {
    for (const n of [1, 2, 3]) {
      const h = await startHaproxy(dir, daemons.slice(0, n));
      proxies.push(h);
      setups.push({ label: `${n} daemon${n > 1 ? 's' : ''} behind HAProxy`, url: h.url, daemons: daemons.slice(0, n), haproxy: h.child });
    }
    for (let r = 1; r <= o.rounds; r++) {
      const round = [];
      for (const { label, url, daemons: used, haproxy } of setups) {
        say(`round ${r}/${o.rounds}: ${label}`);
        for (let i = 0; i < 100; i++) await call(url); // warm-up
        const seq = await sequential(url, o.calls);
        // CPU per call, from the kernel's accounting: steadier than calls/s on a shared machine.
        const ticks = () => ({ mux: used.reduce((t, d) => t + (cpuTicks(d.child.pid) ?? NaN), 0), haproxy: haproxy ? cpuTicks(haproxy.pid) : 0 });
        const t0 = ticks();
        const thr = await throughput(url, o.inflight, o.duration);
        const t1 = ticks();
        const calls = thr.perSecond * o.duration;
        const cpu = { muxMs: ((t1.mux - t0.mux) * TICK_MS) / calls, haproxyMs: ((t1.haproxy - t0.haproxy) * TICK_MS) / calls };
        round.push({ label, seqP50: seq.p50, seqP99: seq.p99, perSecond: thr.perSecond, loadP50: thr.p50, loadP99: thr.p99, failed: thr.failed, ...cpu });
      }
      rounds.push(round);
    }
  } finally {
    for (const h of proxies) await stopTracked(h.child, { first: 'SIGTERM', graceMs: 3000 });
    for (const d of daemons) await stopTracked(d.child, { first: 'SIGTERM', graceMs: 5000 });
    await stopTracked(redis.child, { first: 'SIGTERM', graceMs: 3000 });
  }
  load.push(loadavg()[0]);
  const cell = (i, k) => spread(rounds.map((round) => round[i][k]));
  const rows = setups.map(({ label }, i) => ({ label, ...Object.fromEntries(['perSecond', 'loadP50', 'loadP99', 'seqP50', 'seqP99', 'failed', 'muxMs', 'haproxyMs'].map((k) => [k, cell(i, k)])) }));
  // The ratio to the direct row, per round (the same round's other load), then its median.
  const ratio = (i) => spread(rounds.map((round) => round[i].perSecond / round[0].perSecond));
  const table = [
    `| setup | calls/s (${o.inflight} in flight) | vs direct | p50 / p99 under load (ms) | p50 / p99 one at a time (ms) | CPU ms per call: mcpmux / HAProxy | failed |`,
    '|---|---|---|---|---|---|---|',
    ...rows.map((r, i) => `| ${r.label} | ${fmtSpread(r.perSecond)} | ${fmtSpread(ratio(i))}x | ${fmt(r.loadP50.med)} / ${fmt(r.loadP99.med)} | ${fmt(r.seqP50.med)} / ${fmt(r.seqP99.med)} | ${fmt(r.muxMs.med)} / ${i === 0 ? '—' : fmt(r.haproxyMs.med)} | ${r.failed.max} |`),
  ].join('\n');
  process.stdout.write(`${table}\n\n${o.rounds} rounds (median, min-max), ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), load average ${load.map((l) => l.toFixed(1)).join(' -> ')}. On 2 cores the client, HAProxy, Redis and every daemon share the same CPUs: the rows show what the balancer costs, not scaling.\n`);
  mkdirSync(o.out, { recursive: true });
  writeFileSync(join(o.out, 'haproxy-latest.json'), JSON.stringify({ options: o, cores: cpus().length, load, rounds }, null, 2));
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench haproxy: ${err.stack ?? err}\n`);
    process.exit(1);
  },
);
