// One target, one scenario: start it on the given upstreams, then measure. Shared by every
// row so that each peer gets the same client, warm-up, payload and clock.

import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { echoCall, errText, sequential, throughput } from '../lib/calls.mjs';
import { HttpLight, StdioLight } from '../lib/light-client.mjs';
import { TICK_MS, childrenOf, freePort, memory, spawnTracked, stopTracked } from '../lib/procs.mjs';
import { latencySummary, median } from '../lib/stats.mjs';
import { SseLight } from './sse-light.mjs';

const now = () => performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Opens one initialized light-client session to a started target. */
async function openSession(t, { child, url }, timeoutMs) {
  if (t.transport === 'stdio') {
    const c = new StdioLight(child, { label: t.label });
    await c.initialize(timeoutMs);
    return c;
  }
  const c = t.transport === 'sse' ? new SseLight(url, { label: t.label }) : new HttpLight(url, { label: t.label });
  try {
    if (t.transport === 'sse') await c.open(timeoutMs);
    await c.initialize(timeoutMs);
    return c;
  } catch (e) {
    await c.close().catch(() => {});
    throw e;
  }
}

/** Full tools/list, following nextCursor. */
export async function listAll(c, timeoutMs = 60_000) {
  let cursor;
  let tools = [];
  let pages = 0;
  do {
    const r = await c.request('tools/list', cursor === undefined ? {} : { cursor }, timeoutMs);
    if (r.error) throw new Error(`tools/list failed: ${JSON.stringify(r.error).slice(0, 200)}`);
    pages++;
    tools = tools.concat(r.result.tools);
    cursor = r.result.nextCursor;
    if (pages > 1000) throw new Error('tools/list: more than 1000 pages');
  } while (cursor !== undefined && cursor !== null);
  return { tools, pages };
}

/**
 * Whether a process is an upstream echo server (node running it, or a shell a peer started it
 * through), not the peer itself, whose own arguments may name the echo server too.
 */
function argvOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return [];
  }
}
const isEchoServer = (argv) => argv[1]?.endsWith('echo-server.mjs') ?? false;
function isUpstream(pid) {
  const argv = argvOf(pid);
  if (isEchoServer(argv)) return true;
  return /(^|\/)(ba|da)?sh$/.test(argv[0]) && argv.some((a) => a.includes('echo-server.mjs'));
}

/**
 * The target's own processes: its process tree minus the upstream echo servers and what they
 * started (by parentage, not process group: mcpmux puts each upstream in a group of its own).
 */
function proxyPids(rootPid) {
  const out = [];
  const walk = (pid, depth) => {
    if (isUpstream(pid) || depth > 8) return;
    out.push(pid);
    for (const c of childrenOf(pid)) walk(c, depth + 1);
  };
  walk(rootPid, 0);
  return out.filter((p) => memory(p));
}

/** How many upstream echo servers the target runs (anywhere in its process tree). */
function upstreamCount(rootPid) {
  let n = 0;
  const walk = (pid, depth) => {
    if (isEchoServer(argvOf(pid))) n++;
    if (depth < 8) for (const c of childrenOf(pid)) walk(c, depth + 1);
  };
  walk(rootPid, 0);
  return n;
}

/** VmRSS and VmHWM summed over the target's own processes, in MB. */
function proxyMemory(rootPid) {
  let rss = 0;
  let hwm = 0;
  let n = 0;
  for (const p of proxyPids(rootPid)) {
    const m = memory(p);
    if (!m) continue;
    rss += m.rssKb;
    hwm += m.hwmKb;
    n++;
  }
  return n ? { rssMb: rss / 1024, hwmMb: hwm / 1024, processes: n } : undefined;
}

/**
 * Spawns the target and polls (every 25 ms, the same for all) until an initialize is answered,
 * then lists until `expectedTools` tools are there. Times are from the spawn.
 */
export async function startTarget(t, { servers, tmp, expectedTools, timeoutMs = 180_000 }) {
  const port = t.transport === 'stdio' ? undefined : await freePort();
  const spec = t.spawn({ servers, port, tmp });
  const t0 = now();
  const child = spawnTracked(spec.cmd, spec.args, { label: t.label, env: spec.env });
  const url = t.url?.(port);
  const running = { child, url, port };
  const deadline = t0 + timeoutMs;
  const rec = {};
  let c;
  try {
    let lastErr;
    while (!c) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`exited (${child.signalCode ?? `code ${child.exitCode}`}) before answering initialize`);
      if (now() > deadline) throw new Error(`no initialize answered within ${timeoutMs} ms (last error: ${errText(lastErr)})`);
      try {
        c = await openSession(t, running, Math.max(1000, deadline - now()));
      } catch (e) {
        lastErr = e;
        if (t.transport === 'stdio') throw e;
        await sleep(25);
      }
    }
    rec.initMs = now() - t0;
    let l = await listAll(c);
    rec.firstListAfterStartMs = now() - t0;
    rec.toolsAtFirstList = l.tools.length;
    // The first listing that held the whole catalogue, timed on its own ("first" for stdio).
    let lastListMs = rec.firstListAfterStartMs - rec.initMs;
    while (l.tools.length < expectedTools) {
      if (now() > deadline) throw new Error(`only ${l.tools.length} of ${expectedTools} tools listed after ${timeoutMs} ms`);
      await sleep(50);
      const s = now();
      l = await listAll(c);
      lastListMs = now() - s;
    }
    rec.completeMs = now() - t0;
    rec.firstCompleteListMs = lastListMs;
    rec.tools = l.tools.length;
    rec.pages = l.pages;
    rec.names = l.tools.map((x) => x.name);
    return { running, c, rec };
  } catch (e) {
    await c?.close().catch(() => {});
    await stopTarget(t, running);
    throw new Error(`${t.label}: ${errText(e)}${child.stderrTail() ? `\n--- its stderr:\n${child.stderrTail(1500)}` : ''}`);
  }
}

export async function stopTarget(t, running) {
  const first = t.transport === 'stdio' ? 'stdin' : 'SIGTERM';
  return stopTracked(running.child, { first, graceMs: 8000 });
}

/** throughput() (bench/lib/calls.mjs) with the CPU of all the target's own processes added up. */
async function proxyThroughput(call, { inflight, durationMs, rootPid }) {
  const pids = proxyPids(rootPid);
  const r = await throughput(call, { inflight, durationMs, pids });
  const ticks = r.ticks.reduce((sum, t) => (t === undefined ? sum : sum + t), 0);
  return { calls: r.calls, errors: r.errors, seconds: r.seconds, callsPerSec: r.callsPerSec, proxyCpuMsPerCall: pids.length && r.calls ? (ticks * TICK_MS) / r.calls : NaN };
}

/**
 * Scenario "calls": one echo upstream. Start-up, sequential p50 after a warm-up, calls/s with
 * `inflight` in flight, then `idleMs` idle and the memory of the target's own processes.
 */
export async function measureCalls(t, o, { echoArgs, tmp }) {
  const { running, c, rec } = await startTarget(t, { servers: [{ name: 'echo', args: echoArgs }], tmp, expectedTools: 1, timeoutMs: o.startTimeoutMs });
  try {
    const tool = rec.names.find((n) => /(^|[^a-z])echo$/.test(n));
    delete rec.names;
    if (!tool) throw new Error(`${t.label}: no echo tool listed`);
    rec.tool = tool;
    const call = echoCall(c, tool);
    rec.seq = await sequential(call, o.warmup, o.calls);
    rec.tput = await proxyThroughput(call, { inflight: o.inflight, durationMs: o.duration * 1000, rootPid: running.child.pid });
    await sleep(o.idleMs);
    rec.mem = proxyMemory(running.child.pid);
    if (c.mode) rec.responseMode = c.mode;
  } finally {
    await c.close().catch(() => {});
    const left = await stopTarget(t, running);
    if (left?.length) rec.leftovers = left.length;
  }
  return rec;
}

/**
 * Scenario "lists": `servers` upstreams of `tools` tools each. Spawn → whole catalogue listed;
 * the first full listing (HTTP: of a new session opened once everything is up); repeated
 * listings (p50, after 2 unmeasured); then `idleMs` idle and memory.
 */
export async function measureLists(t, o, { servers, expectedTools, tmp }) {
  const { running, c, rec } = await startTarget(t, { servers, tmp, expectedTools, timeoutMs: o.startTimeoutMs });
  delete rec.names;
  let s = c;
  try {
    if (t.transport !== 'stdio') {
      // A host connecting to an aggregator that is already up: its first listing.
      await c.close().catch(() => {});
      s = await openSession(t, running, 60_000);
      const t0 = now();
      const l = await listAll(s);
      rec.newSessionFirstListMs = now() - t0;
      if (l.tools.length !== expectedTools) throw new Error(`${t.label}: a new session listed ${l.tools.length} of ${expectedTools} tools`);
    }
    rec.firstListMs = rec.newSessionFirstListMs ?? rec.firstCompleteListMs;
    await listAll(s);
    await listAll(s);
    const lat = [];
    for (let i = 0; i < o.listRepeats; i++) {
      const t0 = now();
      await listAll(s);
      lat.push(now() - t0);
    }
    rec.list = latencySummary(lat);
    await sleep(o.idleMs);
    rec.mem = proxyMemory(running.child.pid);
    rec.upstreams = upstreamCount(running.child.pid);
  } finally {
    await s.close().catch(() => {});
    const left = await stopTarget(t, running);
    if (left?.length) rec.leftovers = left.length;
  }
  return rec;
}

export { errText, freePort, median };
