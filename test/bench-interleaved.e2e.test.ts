// bench/interleaved.mjs (the p50 clauses of issue 23's targets 1 and 2, measured with the
// compared processes open at once) with tiny settings. No speed is asserted (the figures are
// measured by hand on a quiet machine): this checks that both comparisons run for both clients
// (the light client and the SDK's), that the table has a figure in every cell and a verdict,
// that the raw figures are written, and that a bad option is refused with the usage.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { runBench, tempDir } from './helpers/harness.js';

const SCRIPT = 'bench/interleaved.mjs';

it('bench/interleaved.mjs: relay and governance compared for both clients, a figure in every cell, a verdict per target', async () => {
  const out = tempDir();
  const { code, stdout, stderr } = await runBench(['--rounds', '1', '--blocks', '2', '--block', '5', '--warmup', '5', '--out', out], 120_000, SCRIPT);
  expect(code, stderr.slice(-2000)).toBe(0);
  const md = readFileSync(path.join(out, 'interleaved-latest.md'), 'utf8');
  expect(stdout.trim()).toBe(md.trim());
  /** The `n`th row (0: the light client's, 1: the SDK client's) under the table with this header. */
  const row = (header: string, n: number) => {
    const lines = md.split('\n');
    const at = lines.findIndex((l) => l.startsWith(header));
    expect(at, header).toBeGreaterThanOrEqual(0);
    return lines[at + 2 + n]!.split('|').slice(1, -1).map((c) => c.trim());
  };
  const figure = /^-?\d[\d.]*x? \(-?\d[\d.]*x?--?\d[\d.]*x?\)$/;
  for (const [n, client] of ['light client', 'SDK client'].entries()) {
    const relay = row('| p50 (µs) | direct | relay | mcpmux |', n);
    expect(relay[0]).toBe(`tools/call, ${client}`);
    for (const c of relay.slice(1, 5)) expect(c).toMatch(figure);
    expect(relay[5]).toMatch(/^relay \+ 30 µs (ok|\*\*missed\*\*)$/);
    const gov = row('| p50 (µs) | governance off |', n);
    expect(gov[0]).toBe(`tools/call, ${client}`);
    for (const c of gov.slice(1, 5)) expect(c).toMatch(figure);
    expect(gov[5]).toMatch(/^≤ 1\.1x (ok|\*\*missed\*\*)$/);
  }
  const raw = JSON.parse(readFileSync(path.join(out, 'interleaved-latest.json'), 'utf8'));
  for (const client of ['light', 'sdk']) {
    expect(Object.keys(raw.results.relay[client][0])).toEqual(['direct', 'relay', 'mcpmux']);
    expect(Object.keys(raw.results.governance[client][0])).toEqual(['off', 'on', 'scrapes']);
  }
}, 180_000);

it('bench/interleaved.mjs --compare floor: the id-rewriting and parsing relays and mcpmux, each over the no-op relay', async () => {
  const out = tempDir();
  const { code, stderr } = await runBench(['--compare', 'floor', '--clients', 'light', '--rounds', '1', '--blocks', '2', '--block', '5', '--warmup', '5', '--out', out], 120_000, SCRIPT);
  expect(code, stderr.slice(-2000)).toBe(0);
  const md = readFileSync(path.join(out, 'interleaved-latest.md'), 'utf8');
  const lines = md.split('\n');
  const at = lines.findIndex((l) => l.startsWith('| p50 over the no-op relay (µs) |'));
  expect(lines[at]).toBe('| p50 over the no-op relay (µs) | no-op relay p50 | id-rewriting relay | parsing relay | mcpmux |');
  const row = lines[at + 2]!.split('|').slice(1, -1).map((c) => c.trim());
  expect(row[0]).toBe('tools/call, light client');
  for (const c of row.slice(1)) expect(c).toMatch(/^-?\d[\d.]* \(-?\d[\d.]*--?\d[\d.]*\)$/);
  // Asked alone, it is the only table: relay and governance are not run.
  expect(md).not.toContain('| p50 (µs) |');
  const raw = JSON.parse(readFileSync(path.join(out, 'interleaved-latest.json'), 'utf8'));
  expect(Object.keys(raw.results)).toEqual(['floor']);
  expect(Object.keys(raw.results.floor.light[0])).toEqual(['relay', 'rewrite', 'parse', 'mcpmux']);
}, 180_000);

it('bench/interleaved.mjs refuses an unknown comparison, an unknown client and a count that is not a whole number', async () => {
  const bad = await runBench(['--compare', 'peers'], 30_000, SCRIPT);
  expect(bad.code).toBe(1);
  expect(bad.stderr).toContain('--compare takes relay, governance, floor, got peers');
  expect(bad.stderr).toContain('usage: node bench/interleaved.mjs');
  const client = await runBench(['--clients', 'curl'], 30_000, SCRIPT);
  expect(client.code).toBe(1);
  expect(client.stderr).toContain('--clients takes light and/or sdk, got curl');
  const zero = await runBench(['--blocks', '0'], 30_000, SCRIPT);
  expect(zero.code).toBe(1);
  expect(zero.stderr).toContain('--blocks takes a whole number >= 1');
});
