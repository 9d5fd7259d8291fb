import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Bounds that only a failing test reaches: a test that starts a daemon, an upstream and a
    // host takes ~20 s on a 2-core machine loaded with other work (10 s under CI's usual load).
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Tests spawn real processes; two cores, so keep parallelism modest.
    maxWorkers: 2,
    reporters: ['default', './test/helpers/summary-reporter.ts'],
    // Tool pins (and any other state) go to a folder of the test run's own, never to the
    // user's ~/.local/state; tests of pinning set their own.
    env: { MCPMUX_STATE_DIR: mkdtempSync(path.join(os.tmpdir(), 'mcpmux-state-')) },
  },
});
