// bench/interleaved.mjs (the p50 clauses of issue 23's targets 1 and 2, measured with the
// compared processes open at once) with tiny settings. No speed is asserted (the figures are
// measured by hand on a quiet machine): this checks that both comparisons run, that the table
// has a figure in every cell and a verdict, that the raw figures are written, and that a bad
// option is refused with the usage.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { runBench, tempDir } from './helpers/harness.js';

const SCRIPT = 'bench/interleaved.mjs';

it('bench/interleaved.mjs: relay and governance compared, a figure in every cell, a verdict per target', async () => {
  const out = tempDir();
  const { code, stdout, stderr } = await runBench(['--rounds', '1', '--blocks', '2', '--block', '5', '--warmup', '5', '--out', out], 120_000, SCRIPT);
  expect(code, stderr.slice(-2000)).toBe(0);
  const md = readFileSync(path.join(out, 'interleaved-latest.md'), 'utf8');
  expect(stdout.trim()).toBe(md.trim());
  const row = (header: string) => {
    const lines = md.split('\n');
    const at = lines.findIndex((l) => l.startsWith(header));
    expect(at, header).toBeGreaterThanOrEqual(0);
    return lines[at + 2]!.split('|').slice(1, -1).map((c) => c.trim());
  };
  const figure = /^-?\d[\d.]*x? \(-?\d[\d.]*x?--?\d[\d.]*x?\)$/;
  const relay = row('| p50 (µs) | direct | relay | mcpmux |');
  for (const c of relay.slice(1, 5)) expect(c).toMatch(figure);
  expect(relay[5]).toMatch(/^relay \+ 30 µs (ok|\*\*missed\*\*)$/);
  const gov = row('| p50 (µs) | governance off |');
  for (const c of gov.slice(1, 5)) expect(c).toMatch(figure);
  expect(gov[5]).toMatch(/^≤ 1\.1x (ok|\*\*missed\*\*)$/);
  const raw = JSON.parse(readFileSync(path.join(out, 'interleaved-latest.json'), 'utf8'));
  expect(Object.keys(raw.results.relay[0])).toEqual(['direct', 'relay', 'mcpmux']);
  expect(Object.keys(raw.results.governance[0])).toEqual(['off', 'on', 'scrapes']);
});

it('bench/interleaved.mjs refuses an unknown comparison and a count that is not a whole number', async () => {
  const bad = await runBench(['--compare', 'peers'], 30_000, SCRIPT);
  expect(bad.code).toBe(1);
  expect(bad.stderr).toContain('--compare takes relay and/or governance, got peers');
  expect(bad.stderr).toContain('usage: node bench/interleaved.mjs');
  const zero = await runBench(['--blocks', '0'], 30_000, SCRIPT);
  expect(zero.code).toBe(1);
  expect(zero.stderr).toContain('--blocks takes a whole number >= 1');
});
