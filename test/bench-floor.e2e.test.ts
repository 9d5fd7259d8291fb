// bench/throughput-floor.mjs (target 1's throughput clause: calls/s and CPU per call of each
// process, for the no-op relay, the id-rewriting and parsing relays and mcpmux) with tiny settings, and the
// id-rewriting relay itself against the echo server. No speed is asserted (figures are measured
// on a quiet machine): this checks that every target runs, every cell holds a figure, the raw
// figures are written, the relay gives every host its own ids back, and bad options are refused.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { expect, it } from 'vitest';
import { ROOT, runBench, tempDir } from './helpers/harness.js';

const SCRIPT = 'bench/throughput-floor.mjs';

it('bench/throughput-floor.mjs: every target measured, a figure in every cell, the raw figures written', async () => {
  const out = tempDir();
  const { code, stdout, stderr } = await runBench(['--targets', 'governed,parse,rewrite,mcpmux', '--rounds', '1', '--seconds', '1', '--warmup', '1', '--out', out], 120_000, SCRIPT);
  expect(code, stderr.slice(-2000)).toBe(0);
  const md = readFileSync(path.join(out, 'throughput-floor-latest.md'), 'utf8');
  expect(stdout.trim()).toBe(md.trim());
  const rows = md.split('\n').filter((l) => /^\| (no-op|id-rewriting|parsing|mcpmux)/.test(l));
  // The relay is always measured: the ratios are to it.
  expect(rows.map((r) => r.split('|')[1]!.trim())).toEqual(['no-op relay', 'id-rewriting relay', 'parsing relay', 'mcpmux stdio', 'mcpmux stdio, governance on']);
  const figure = /^\d[\d.]*x? \(\d[\d.]*x?-\d[\d.]*x?\)$/;
  for (const row of rows) for (const c of row.split('|').slice(2, -1)) expect(c.trim()).toMatch(figure);
  const raw = JSON.parse(readFileSync(path.join(out, 'throughput-floor-latest.json'), 'utf8'));
  expect(Object.keys(raw.rounds[0]).sort()).toEqual(['governed', 'mcpmux', 'parse', 'relay', 'rewrite']);
  expect(raw.rounds[0].governed.scrapes).toBeGreaterThanOrEqual(1);
});

it.each<[string, string[]]>([['spliced', []], ['parsed', ['--parse']]])('bench/rewrite-relay.mjs (%s) gives each request its own id back, string or number, past a line that is not JSON', async (_how, flags) => {
  const child = spawn(process.execPath, [path.join(ROOT, 'bench/rewrite-relay.mjs'), ...flags, process.execPath, path.join(ROOT, 'bench/echo-server.mjs')], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  const answers = new Map<unknown, Record<string, unknown>>();
  const waiting = new Map<unknown, () => void>();
  lines.on('line', (l) => {
    if (!l.startsWith('{')) return;
    const m = JSON.parse(l) as { id?: unknown };
    answers.set(m.id, m);
    waiting.get(m.id)?.();
  });
  const send = (m: object) => child.stdin!.write(JSON.stringify(m) + '\n');
  const answer = (id: unknown) =>
    answers.has(id)
      ? Promise.resolve(answers.get(id)!)
      : new Promise<Record<string, unknown>>((resolve, reject) => {
          const t = setTimeout(() => reject(new Error(`no answer for ${JSON.stringify(id)}`)), 20_000);
          waiting.set(id, () => (clearTimeout(t), resolve(answers.get(id)!)));
        });
  try {
    send({ jsonrpc: '2.0', id: 'init "1"', method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } });
    expect((await answer('init "1"')).result).toBeDefined();
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    // A line that is not JSON passes as it is (what the server makes of it is its business):
    // the relay goes on.
    child.stdin!.write('not json\n');
    // Ids the relay also hands out (1, 2, ...) and a string: each answer comes back to its own.
    const ids = [2, 1, 'x', 7];
    for (const id of ids) send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text: `for ${id}` } } });
    for (const id of ids) {
      const a = (await answer(id)) as { result?: { content?: { text?: string }[] } };
      expect(a.result?.content?.[0]?.text).toBe(`for ${id}`);
    }
  } finally {
    // The relay ends with its upstream, which ends with its input; a stuck one is killed.
    const exited = new Promise((r) => child.once('exit', r));
    child.stdin!.end();
    const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(kill);
  }
});

it('bench/throughput-floor.mjs refuses an unknown target and a count that is not a whole number', async () => {
  const bad = await runBench(['--targets', 'supergateway'], 30_000, SCRIPT);
  expect(bad.code).toBe(1);
  expect(bad.stderr).toContain('--targets takes relay, rewrite, parse, mcpmux, governed, got supergateway');
  expect(bad.stderr).toContain('usage: node bench/throughput-floor.mjs');
  const zero = await runBench(['--seconds', '0'], 30_000, SCRIPT);
  expect(zero.code).toBe(1);
  expect(zero.stderr).toContain('--seconds takes a whole number >= 1');
});
