// bench/throughput-floor.mjs (target 1's throughput clause: calls/s and CPU per call of each
// process, for the no-op relay, the id-rewriting and parsing relays and mcpmux) with tiny
// settings, and the id-rewriting relay itself. No speed is asserted (figures are measured on a
// quiet machine): this checks that every target runs, every cell holds a figure, the raw figures
// are written, the relay rewrites ids both ways in both its modes, and bad options are refused.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { expect, it } from 'vitest';
import { ROOT, runBench, tempDir } from './helpers/harness.js';

const SCRIPT = 'bench/throughput-floor.mjs';

it('bench/throughput-floor.mjs: every target measured, a figure in every cell, the raw figures written', async () => {
  const out = tempDir();
  const { code, stdout, stderr } = await runBench(['--targets', 'governed,parse,rewrite,mcpmux', '--rounds', '1', '--seconds', '1', '--warmup', '1', '--out', out], 150_000, SCRIPT);
  expect(code, stderr.slice(-2000)).toBe(0);
  const md = readFileSync(path.join(out, 'throughput-floor-latest.md'), 'utf8');
  expect(stdout.trim()).toBe(md.trim());
  const rows = md.split('\n').filter((l) => /^\| (no-op|id-rewriting|parsing|mcpmux)/.test(l));
  // In the table's order whatever the order asked, and the relay always: the ratios are to it.
  expect(rows.map((r) => r.split('|')[1]!.trim())).toEqual(['no-op relay', 'id-rewriting relay', 'parsing relay', 'mcpmux stdio', 'mcpmux stdio, governance on']);
  const figure = /^\d[\d.]*x? \(\d[\d.]*x?-\d[\d.]*x?\)$/;
  for (const row of rows) for (const c of row.split('|').slice(2, -1)) expect(c.trim()).toMatch(figure);
  const raw = JSON.parse(readFileSync(path.join(out, 'throughput-floor-latest.json'), 'utf8'));
  const round = raw.rounds[0];
  expect(Object.keys(round).sort()).toEqual(['governed', 'mcpmux', 'parse', 'relay', 'rewrite']);
  for (const t of Object.values(round) as { calls: number; cpuUsPerCall: Record<string, number> }[]) {
    expect(t.calls).toBeGreaterThan(0);
    expect(Object.keys(t.cpuUsPerCall)).toEqual(['client', 'middle', 'upstream']);
  }
  expect(round.governed.scrapes).toBeGreaterThanOrEqual(1);
}, 180_000);

/**
 * An upstream that answers every request with the id it was given, as `seen`: what the relay
 * sent up is visible in the answer the host gets.
 */
const SEEN_UPSTREAM = `
require('readline').createInterface({ input: process.stdin }).on('line', (l) => {
  let m;
  try { m = JSON.parse(l); } catch { return; }
  if (m.method !== undefined && m.id !== undefined) process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { seen: m.id } }) + '\\n');
});`;

it.each<[string, string[]]>([
  ['spliced', []],
  ['parsed', ['--parse']],
])('bench/rewrite-relay.mjs (%s) sends its own ids up and gives the host its ids back, past a line that is not JSON', async (_how, flags) => {
  const child = spawn(process.execPath, [path.join(ROOT, 'bench/rewrite-relay.mjs'), ...flags, process.execPath, '-e', SEEN_UPSTREAM], { stdio: ['pipe', 'pipe', 'inherit'] });
  // Heard from the start: a relay that dies early must fail the test, not hang it.
  const exited = new Promise((r) => child.once('exit', r));
  const answers: { id: unknown; result: { seen: unknown } }[] = [];
  let heard: () => void = () => {};
  createInterface({ input: child.stdout! }).on('line', (l) => {
    answers.push(JSON.parse(l));
    heard();
  });
  const send = (m: object) => child.stdin!.write(JSON.stringify(m) + '\n');
  try {
    // Host ids the relay also hands out (1, 2, ...), a string one and a notification between.
    const ids = [2, 1, 'x "quoted"', 7];
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    child.stdin!.write('not json\n');
    for (const id of ids) send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text: 'hi' } } });
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`answers so far: ${JSON.stringify(answers)}`)), 20_000);
      heard = () => answers.length === ids.length && (clearTimeout(t), resolve());
      void exited.then(() => reject(new Error('the relay exited')));
    });
    // The upstream saw the relay's ids, in order; each host got its own back.
    expect(answers.map((a) => a.id)).toEqual(ids);
    expect(answers.map((a) => a.result.seen)).toEqual([1, 2, 3, 4]);
  } finally {
    // The relay ends with its upstream, which ends with its input; a stuck one is killed.
    child.stdin!.end();
    const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(kill);
  }
});

it('bench/throughput-floor.mjs refuses an unknown target (an inherited name too) and a count that is not a whole number', async () => {
  const bad = await runBench(['--targets', 'supergateway'], 30_000, SCRIPT);
  expect(bad.code).toBe(1);
  expect(bad.stderr).toContain('--targets takes relay, rewrite, parse, mcpmux, governed, got supergateway');
  expect(bad.stderr).toContain('usage: node bench/throughput-floor.mjs');
  const inherited = await runBench(['--targets', 'toString'], 30_000, SCRIPT);
  expect(inherited.code).toBe(1);
  expect(inherited.stderr).toContain('got toString');
  const zero = await runBench(['--seconds', '0'], 30_000, SCRIPT);
  expect(zero.code).toBe(1);
  expect(zero.stderr).toContain('--seconds takes a whole number >= 1');
});
