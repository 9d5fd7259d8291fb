// Taking over a stale login lock (file-lock.ts) from several processes at once never leaves two
// holders. Worker threads stand in for processes: each has its own copy of the module (so no
// shared in-process queue) and they race on the same file for real, in parallel.

import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ROOT, tempDir } from './helpers/harness.js';

const WORKERS = 3;
const ROUNDS = 150;

// Each worker: wait for round r (shared counter), take the lock, count holders, say done.
const WORKER = `
const { workerData, parentPort } = require('node:worker_threads');
const shared = new Int32Array(workerData.sab);
(async () => {
  const { withFileLock } = await import(workerData.lockUrl);
  for (let round = 1; round <= workerData.rounds; round++) {
    while (Atomics.load(shared, 0) < round) Atomics.wait(shared, 0, round - 1, 50);
    await withFileLock(workerData.file, 1_000, async () => {
      const now = Atomics.add(shared, 1, 1) + 1;
      for (;;) {
        const max = Atomics.load(shared, 2);
        if (now <= max || Atomics.compareExchange(shared, 2, max, now) === max) break;
      }
      await new Promise((r) => setTimeout(r, 2));
      Atomics.sub(shared, 1, 1);
    });
    parentPort.postMessage(round);
  }
})().catch((err) => parentPort.postMessage({ error: String(err && err.stack || err) }));
`;

describe('file lock of a login: stale takeover', () => {
  it('several processes breaking one stale lock at once: never two holders', async () => {
    const file = path.join(tempDir(), 'oauth', 's.lock');
    const sab = new SharedArrayBuffer(12);
    const shared = new Int32Array(sab); // [round, holders now, most holders at once]
    const lockUrl = pathToFileURL(path.join(ROOT, 'dist/upstream/oauth/file-lock.js')).href;
    const workers = Array.from(
      { length: WORKERS },
      () => new Worker(WORKER, { eval: true, workerData: { sab, lockUrl, file, rounds: ROUNDS } }),
    );
    const done = new Map<number, number>();
    let waiter: (() => void) | undefined;
    let failure: string | undefined;
    for (const w of workers) {
      w.on('message', (m: number | { error: string }) => {
        if (typeof m === 'object') failure = m.error;
        else done.set(m, (done.get(m) ?? 0) + 1);
        waiter?.();
      });
      w.on('error', (err) => {
        failure = String(err);
        waiter?.();
      });
    }
    try {
      mkdirSync(path.dirname(file), { recursive: true });
      for (let round = 1; round <= ROUNDS; round++) {
        // A lock older than any holder could hold it: stale for everyone, by its age.
        writeFileSync(file, JSON.stringify({ pid: 999_999, host: os.hostname(), at: Date.now() - 60_000, nonce: `stale-${round}` }));
        Atomics.store(shared, 0, round);
        Atomics.notify(shared, 0);
        const deadline = Date.now() + 20_000;
        while ((done.get(round) ?? 0) < WORKERS && failure === undefined) {
          if (Date.now() > deadline) throw new Error(`round ${round} did not finish`);
          await new Promise<void>((r) => {
            waiter = r;
            setTimeout(r, 200);
          });
        }
        if (failure !== undefined) throw new Error(failure);
        if (Atomics.load(shared, 2) > 1) break;
      }
      expect(Atomics.load(shared, 2)).toBe(1);
    } finally {
      await Promise.all(workers.map((w) => w.terminate()));
    }
  }, 120_000);
});
