// The benchmark harness itself (`npm run bench`): a minimal run of every section into a
// temporary folder. No speed is asserted here (figures belong in docs/performance.md, measured
// on a quiet machine); this checks that every figure is produced for direct and mcpmux, that
// every echo up to 10 MB succeeds, and that no process is left behind.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { runBench, tempDir } from './helpers/harness.js';

const FIGURES = [
  'tools/list, 1 upstream, p50 (ms)',
  'tools/call p50, SDK client (ms)',
  'tools/call p50, light client (ms)',
  'throughput, SDK client (calls/s)',
  'throughput, light client (calls/s)',
  'echo 100 KB, p50 (ms)',
  'echo 1 MB, p50 (ms)',
  'echo 10 MB, p50 (ms)',
  'peak RSS growth during one 10 MB echo ÷ 10 MB: direct = echo server; else the middle process',
];

it('a minimal bench run measures every section, direct and through mcpmux, and leaves nothing behind', async () => {
  const out = tempDir();
  // --no-surface: the tool-search section fetches real servers from the npm registry (no network in tests).
  const args = ['--quick', '--no-20x100', '--no-profile', '--no-surface', '--duration', '0.5', '--calls', '50', '--warmup', '10', '--max-minutes', '5', '--out', out];
  const { code, stdout, stderr } = await runBench(args, 340_000);
  expect(code, stderr.slice(-2000)).toBe(0);

  const results = JSON.parse(readFileSync(path.join(out, 'latest.json'), 'utf8'));
  expect(results.sections.map((s: { kind: string }) => s.kind)).toEqual(['stdio', 'http', 'ws']);
  for (const section of results.sections) {
    for (const label of FIGURES) {
      const row = section.rows.find((r: { label: string }) => r.label === label);
      expect(row, `${section.kind}: ${label}`).toBeDefined();
      expect(row.proxyFailed, `${section.kind}: ${label}`).toBeUndefined();
      expect(Number.isFinite(row.proxy.med), `${section.kind}: ${label} through mcpmux`).toBe(true);
      expect(Number.isFinite(row.direct.med), `${section.kind}: ${label} direct`).toBe(true);
    }
  }
  for (const round of results.rounds) {
    expect(round.errors ?? {}).toEqual({});
    for (const [label, rec] of Object.entries(round)) {
      if (rec && typeof rec === 'object' && 'leftovers' in rec) expect.fail(`${label} left processes behind`);
    }
  }
  // Governance on vs off: both sides measured in every round, the on side scraped and audited.
  expect(results.governance.error).toBeUndefined();
  for (const round of results.governance.rounds) {
    for (const side of ['off', 'on']) {
      for (const figure of ['seqLight', 'seqSdk']) expect(Number.isFinite(round[side][figure].p50), `${side}: ${figure}`).toBe(true);
      for (const figure of ['tputLight', 'tputSdk']) expect(round[side][figure].callsPerSec, `${side}: ${figure}`).toBeGreaterThan(0);
    }
    expect(round.on.scrapes, 'the governed side was scraped').toBeGreaterThan(0);
    expect(round.auditLines, 'the governed side wrote audit lines').toBeGreaterThan(0);
  }
  // The p50 clauses of targets 1 and 2 measured with the compared processes open at once
  // (bench/interleaved.mjs as a section): every figure there, and the two tables above point to it.
  expect(results.interleaved.error).toBeUndefined();
  for (const client of ['light', 'sdk']) {
    for (const round of results.interleaved.results.relay[client]) for (const k of ['direct', 'relay', 'mcpmux']) expect(Number.isFinite(round[k]), `interleaved ${client} ${k}`).toBe(true);
    for (const round of results.interleaved.results.governance[client]) {
      for (const k of ['off', 'on']) expect(Number.isFinite(round[k]), `interleaved governance ${client} ${k}`).toBe(true);
      expect(round.scrapes, 'the interleaved governed side was scraped').toBeGreaterThan(0);
    }
  }
  expect(stdout).toContain('## Interleaved sequential p50 (issue 23, targets 1 and 2)');
  for (const client of ['light', 'SDK']) {
    // Twice each: the stdio table's relay verdict and the governance table's.
    const pointers = stdout.match(new RegExp(`\\| tools/call p50, ${client} client \\(ms\\) \\|[^\\n]*\\| see the interleaved section \\|\\n`, 'g'));
    expect(pointers, client).toHaveLength(2);
  }
  // Governance with Redis vs in memory (redis-server is installed here and in CI): both sides
  // measured, and at most one Redis round trip per limited call.
  expect(results.sharedLimits.skipped).toBeUndefined();
  expect(results.sharedLimits.error).toBeUndefined();
  for (const round of results.sharedLimits.rounds) {
    for (const side of ['memory', 'redis']) expect(round[side].tput.callsPerSec, side).toBeGreaterThan(0);
    expect(round.redis.roundTripsPerCall).toBeGreaterThan(0);
    expect(round.redis.roundTripsPerCall).toBeLessThanOrEqual(1);
  }
  expect(stdout).toContain('## Governance with Redis vs in memory');
  expect(stdout).toContain('## stdio host → stdio upstream');
  expect(stdout).toContain('## Governance on vs off');
}, 360_000);
