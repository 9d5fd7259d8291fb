// One host session over stdio: `node ARGS` spawned (tracked, its own process group) with the
// bench's light client or the official SDK's Client on its pipes, initialized. Shared by
// bench/run.mjs (its stdio targets), bench/interleaved.mjs and bench/throughput-floor.mjs.

import { performance } from 'node:perf_hooks';
import { errText } from './calls.mjs';
import { StdioLight } from './light-client.mjs';
import { spawnTracked, stopTracked } from './procs.mjs';
import { closeSdk, connectSdk } from './sdk-client.mjs';

/** Why a session failed (to open, or later), with the tail of the process's stderr. */
export function sessionError(label, child, e) {
  const tail = child.stderrTail();
  return new Error(`${label}: ${errText(e)}${tail ? `\n--- its stderr:\n${tail}` : ''}`);
}

/**
 * The light client, initialized: {c, initMs (spawn -> initialize answered), pid, child, close()};
 * close() resolves with what stopTracked found left behind.
 */
export async function openStdioLight(args, { label, timeoutMs = 30_000 }) {
  const t0 = performance.now();
  const child = spawnTracked(process.execPath, args, { label });
  const c = new StdioLight(child, { label });
  try {
    await c.initialize(timeoutMs);
  } catch (e) {
    await stopTracked(child);
    throw sessionError(label, child, e);
  }
  return {
    c,
    initMs: performance.now() - t0,
    pid: child.pid,
    child,
    close: async () => {
      await c.close();
      return stopTracked(child);
    },
  };
}

/** The SDK's Client, connected: {sdk: {client, transport}, pid, child, close()}. */
export async function openStdioSdk(args, { label, timeoutMs = 30_000 }) {
  const child = spawnTracked(process.execPath, args, { label });
  let sdk;
  try {
    sdk = await connectSdk('stdio', child, timeoutMs);
  } catch (e) {
    await stopTracked(child);
    throw sessionError(`${label} (SDK client)`, child, e);
  }
  return {
    sdk,
    pid: child.pid,
    child,
    close: async () => {
      await closeSdk(sdk, 'stdio');
      return stopTracked(child);
    },
  };
}
