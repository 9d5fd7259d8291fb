// Driving tools/call load through an initialized client: the echo call, the sequential
// latency phase and the `inflight` throughput phase that every benchmark script shares,
// so that each one uses the same warm-up, failure rule and clock.

import { performance } from 'node:perf_hooks';
import { TICK_MS, cpuTicks } from './procs.mjs';
import { latencySummary } from './stats.mjs';

const now = () => performance.now();

export const errText = (e) => (e && e.message) || String(e);

/** A call that sends `text` to the echo tool `name` over a light client; resolves true if it came back. */
export function echoCall(c, name, text = 'hello from the benchmark') {
  const params = { name, arguments: { text } };
  return () => c.request('tools/call', params).then((r) => !r.error && !r.result?.isError && r.result?.content?.[0]?.text === text);
}

/** The same over the SDK's Client (bounded at 30 s a call, as the SDK's own default is 60). */
export function sdkCall(client, name, text = 'hello from the benchmark') {
  const params = { name, arguments: { text } };
  return () => client.callTool(params, undefined, { timeout: 30_000 }).then((r) => !r.isError && r.content?.[0]?.text === text);
}

/** The echo server's echo tool among listed names: `echo` itself, or namespaced (`echo__echo`). */
export function echoTool(names) {
  return names.find((n) => n === 'echo') ?? names.find((n) => /(^|[^a-z])echo$/.test(n));
}

/**
 * The echo tool's name once `list()` (the listed tools) holds it: mcpmux lists it once its
 * upstream is up. Throws after `timeoutMs`.
 */
export async function listedEchoTool(list, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const tool = echoTool((await list()).map((t) => t.name));
    if (tool) return tool;
    if (Date.now() > deadline) throw new Error(`no echo tool listed within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * `warmup` calls, then `n` timed one at a time; throws if any did not echo (`hint` is added to
 * that message). Returns latencySummary of the n.
 */
export async function sequential(call, warmup, n, hint = '') {
  let errors = 0;
  for (let i = 0; i < warmup; i++) if (!(await call())) errors++;
  const lat = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const t0 = now();
    const ok = await call();
    lat[i] = now() - t0;
    if (!ok) errors++;
  }
  if (errors) throw new Error(`sequential tools/call: ${errors} of ${warmup + n} calls did not echo${hint}`);
  return latencySummary(lat);
}

/**
 * `inflight` workers calling back-to-back for durationMs; CPU ticks of `pids` over the phase
 * (cpuMsPerCall, one a pid, NaN where unknown) and this process's own CPU a call.
 * Gives up (throws) once more than 100 calls failed and failures outnumber successes.
 */
export async function throughput(call, { inflight, durationMs, pids = [] }) {
  const ticks0 = pids.map((p) => (p ? cpuTicks(p) : undefined));
  const cpu0 = process.cpuUsage();
  const t0 = now();
  let stop = false;
  let calls = 0;
  let errors = 0;
  let firstErr;
  const timer = setTimeout(() => (stop = true), durationMs);
  const worker = async () => {
    while (!stop) {
      try {
        if (await call()) calls++;
        else errors++;
      } catch (e) {
        errors++;
        firstErr ??= e;
      }
      if (errors > 100 && errors > calls) stop = true;
    }
  };
  try {
    await Promise.all(Array.from({ length: inflight }, worker));
  } finally {
    clearTimeout(timer);
  }
  const elapsed = now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const ticks1 = pids.map((p) => (p ? cpuTicks(p) : undefined));
  if (errors > 100 && errors > calls) throw new Error(`throughput: ${errors} failed calls, ${calls} ok; first error: ${firstErr ? errText(firstErr) : 'wrong echo'}`);
  const ticks = pids.map((_, i) => (ticks0[i] !== undefined && ticks1[i] !== undefined ? ticks1[i] - ticks0[i] : undefined));
  const perCall = (i) => (ticks[i] !== undefined && calls ? (ticks[i] * TICK_MS) / calls : NaN);
  const result = {
    calls,
    errors,
    seconds: elapsed / 1000,
    callsPerSec: calls / (elapsed / 1000),
    cpuMsPerCall: pids.map((_, i) => perCall(i)),
    clientCpuMsPerCall: (cpu.user + cpu.system) / 1000 / calls,
  };
  // The raw tick deltas, for callers that add several processes up; not enumerable, so not in the JSON.
  Object.defineProperty(result, 'ticks', { value: ticks, enumerable: false });
  return result;
}
