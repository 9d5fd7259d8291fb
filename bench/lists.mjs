// Issue 23, target 3: `tools/list` of 10 upstreams x 100 tools over Streamable HTTP, as the
// official SDK client sees it (host -> `mcpmux serve` -> 10 stdio echo servers).
//
//   node bench/run.mjs --only lists [--quick]          (or: node bench/lists.mjs [--quick])
//
// Rows: the first list once every upstream is ready (no host has listed yet: mcpmux serves what
// it listed from each upstream as it became ready, or joins those lists still in flight), a new
// session's first list (mcpmux's pages are cached), and the repeated list
// (p50). Beside the wall-clock figures, CPU per repeated list of mcpmux (from /proc) and of the
// client (process.cpuUsage), which a loaded machine disturbs far less than the wall clock.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { TICK_MS, cpuTicks, installCleanup, spawnTracked, stopTracked } from './lib/procs.mjs';
import { closeSdk, connectSdk } from './lib/sdk-client.mjs';
import { latencySummary } from './lib/stats.mjs';
import { echoServersConfig } from './lib/upstreams.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ECHO = join(ROOT, 'bench', 'echo-server.mjs');
const MCPMUX = join(ROOT, 'bin', 'mcpmux.js');
const NODE = process.execPath;

/** Starts `mcpmux serve` on `servers` x `tools` and resolves once it listens and every upstream is ready. */
async function startMux(servers, tools, tmp, timeoutMs) {
  const mcpServers = echoServersConfig(ECHO, servers, tools, NODE);
  const file = join(tmp, `lists-${servers}x${tools}.json`);
  // surface "all": the whole catalogue is listed (the default "auto" gives 1 010 tools the search surface).
  writeFileSync(file, JSON.stringify({ mcpServers, listen: { host: '127.0.0.1', port: 0 }, timeouts: { startupMs: 60_000 }, surface: { mode: 'all' } }, null, 2));
  const child = spawnTracked(NODE, [MCPMUX, 'serve', '--config', file, '--port', '0'], { label: 'mcpmux lists' });
  const url = await new Promise((resolve, reject) => {
    let listening;
    let ready = 0;
    const t = setTimeout(() => reject(new Error(`mcpmux: not listening with ${servers} upstreams ready within ${timeoutMs} ms\n${child.stderrTail(1500)}`)), timeoutMs);
    child.exited.then(() => reject(new Error(`mcpmux exited early\n${child.stderrTail(1500)}`)));
    child.onStderrLine = (line) => {
      let m;
      try {
        m = JSON.parse(line);
      } catch {
        return;
      }
      if (m.msg === 'listening' && typeof m.url === 'string') listening = new URL('/mcp', new URL(m.url).origin).href;
      if (m.msg === 'upstream ready') ready++;
      if (listening && ready >= servers) {
        clearTimeout(t);
        child.onStderrLine = () => {}; // later lines of this same chunk still come here
        resolve(listening);
      }
    };
  });
  return { child, url };
}

const now = () => performance.now();

export async function measureLists(o = {}, { phase = () => {} } = {}) {
  const servers = o.servers ?? 10;
  const tools = o.tools ?? 100;
  const repeats = o.listRepeats ?? (o.quick ? 10 : 50);
  const tmp = mkdtempSync(join(tmpdir(), 'mcpmux-lists-'));
  phase(`lists: starting mcpmux serve with ${servers} upstreams x ${tools} tools`);
  const { child, url } = await startMux(servers, tools, tmp, 180_000);
  const expected = servers * (tools + 1);
  try {
    const a = await connectSdk('http', url, 60_000);
    let t0 = now();
    const first = await a.client.listTools(undefined, { timeout: 60_000 });
    const firstMs = now() - t0;
    if (first.tools.length !== expected) throw new Error(`first list held ${first.tools.length} of ${expected} tools`);
    const bytes = Buffer.byteLength(JSON.stringify(first));
    await closeSdk(a, 'http');

    phase(`lists: a new session's first list, then tools/list x${repeats}`);
    const b = await connectSdk('http', url, 60_000);
    t0 = now();
    await b.client.listTools(undefined, { timeout: 60_000 });
    const newSessionMs = now() - t0;
    for (let i = 0; i < 3; i++) await b.client.listTools(undefined, { timeout: 60_000 });
    const lat = [];
    const ticks0 = cpuTicks(child.pid);
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < repeats; i++) {
      t0 = now();
      await b.client.listTools(undefined, { timeout: 60_000 });
      lat.push(now() - t0);
    }
    const cpu = process.cpuUsage(cpu0);
    const muxCpuMs = ((cpuTicks(child.pid) - ticks0) * TICK_MS) / repeats;
    await closeSdk(b, 'http');
    return { servers, tools: expected, bytes, firstMs, newSessionMs, repeated: latencySummary(lat), muxCpuMsPerList: muxCpuMs, clientCpuMsPerList: (cpu.user + cpu.system) / 1000 / repeats };
  } finally {
    await stopTracked(child, { first: 'SIGTERM', graceMs: 8000 });
  }
}

export function renderLists(L, r) {
  L.push(`## tools/list, ${r?.servers ?? 10} upstreams × 100 tools over Streamable HTTP (SDK client)`);
  L.push('');
  if (!r || r.error) {
    L.push(`**failed:** ${(r?.error ?? 'no result').split('\n')[0]}`, '');
    return;
  }
  const f = (x) => (Number.isFinite(x) ? x.toFixed(1) : '—');
  L.push('| figure | mcpmux |', '|---|---:|');
  L.push(`| first list, every upstream ready, no host listed yet (ms) | ${f(r.firstMs)} |`);
  L.push(`| a new session's first list (ms) | ${f(r.newSessionMs)} |`);
  L.push(`| repeated list, p50 (ms) | ${f(r.repeated.p50)} |`);
  L.push(`| mcpmux CPU per repeated list (ms) | ${f(r.muxCpuMsPerList)} |`);
  L.push(`| client CPU per repeated list (ms) | ${f(r.clientCpuMsPerList)} |`);
  L.push(`| answer (tools, bytes) | ${r.tools}, ${r.bytes} |`);
  L.push('');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  installCleanup();
  const quick = process.argv.includes('--quick');
  const r = await measureLists({ quick }, { phase: (s) => process.stderr.write(`bench: ${s}\n`) });
  const L = [];
  renderLists(L, r);
  process.stdout.write(L.join('\n') + '\n');
  process.exit(0);
}
