// The lock file that keeps two processes from refreshing one login at once (file-lock.ts): a
// holder makes others wait until it is done; a lock whose holder died is taken over at once.

import { spawnSync } from 'node:child_process';
import { existsSync, readlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { withFileLock } from '../src/upstream/oauth/file-lock.js';
import { tempDir } from './helpers/harness.js';

describe('file lock of a login', () => {
  it('one holder at a time; removed when done', async () => {
    const file = path.join(tempDir(), 'oauth', 's.lock');
    const order: string[] = [];
    let release!: () => void;
    const first = withFileLock(file, 30_000, async () => {
      order.push('first in');
      await new Promise<void>((r) => (release = r));
      order.push('first out');
    });
    await new Promise((r) => setTimeout(r, 0));
    let waited = false;
    const second = withFileLock(file, 30_000, async () => void order.push('second'), () => (waited = true));
    await new Promise((r) => setImmediate(r));
    expect(existsSync(file)).toBe(true);
    release();
    await Promise.all([first, second]);
    expect(order).toEqual(['first in', 'first out', 'second']);
    expect(existsSync(file)).toBe(false);
    // In one process the second queues behind the first without looking at the file.
    expect(waited).toBe(false);
  });

  it("a lock left by a process that is gone is taken over at once; another host's by its age only", async () => {
    const file = path.join(tempDir(), 's.lock');
    const dead = spawnSync(process.execPath, ['-e', '0']).pid!;
    const ns = pidNamespace();
    writeFileSync(file, JSON.stringify({ pid: dead, host: os.hostname(), ns, at: Date.now(), nonce: 'x' }));
    let waited = false;
    const started = Date.now();
    await withFileLock(file, 30_000, async () => {}, () => (waited = true));
    expect(waited).toBe(false);
    expect(Date.now() - started).toBeLessThan(5_000);
    // A lock from another host, not yet stale: held (its pid means nothing here) until older than the bound plus 5 s.
    writeFileSync(file, JSON.stringify({ pid: dead, host: 'elsewhere', at: Date.now() - 4_950, nonce: 'y' }));
    await withFileLock(file, 100, async () => {}, () => (waited = true));
    expect(waited).toBe(true);
  }, 20_000);

  it('a dead pid on the same hostname but in another pid namespace (a container) is held until its age', async () => {
    const file = path.join(tempDir(), 's.lock');
    const dead = spawnSync(process.execPath, ['-e', '0']).pid!;
    writeFileSync(file, JSON.stringify({ pid: dead, host: os.hostname(), ns: 'pid:[1]', at: Date.now() - 4_950, nonce: 'z' }));
    let waited = false;
    await withFileLock(file, 100, async () => {}, () => (waited = true));
    expect(waited).toBe(true);
  }, 20_000);
});

function pidNamespace(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}
