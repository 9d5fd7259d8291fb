// The peers comparison (`npm run bench -- --peers`, bench/peers.mjs) with only the rows that
// need no download: direct stdio/HTTP and mcpmux stdio/serve, tiny settings. No speed is
// asserted (the figures are measured by hand on a quiet machine); this checks that the one
// table has every column, that every row produced its figures, that a single-server row says
// "n/a: one server" for the aggregation columns, and that nothing is left running.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { ROOT, runBench, tempDir } from './helpers/harness.js';

it('bench --peers, mcpmux and direct rows only: one table with every column and a figure in every cell', async () => {
  const out = tempDir();
  const args = ['--peers', '--quick', '--only', 'direct,mcpmux', '--no-install', '--servers', '2', '--tools', '5', '--duration', '0.5', '--calls', '20', '--warmup', '5', '--list-repeats', '3', '--idle', '0.2', '--max-minutes', '4', '--out', out];
  const { code, stdout, stderr } = await runBench(args, 250_000);
  expect(code, stderr.slice(-2000)).toBe(0);

  const { columns } = (await import(path.join(ROOT, 'bench/peers.mjs'))) as { columns: (o: object) => string[] };
  const COLUMNS = columns({ servers: 2, tools: 5, inflight: 64 });
  expect(COLUMNS).toContain('2×5: tools/list first (ms)');
  const md = readFileSync(path.join(out, 'peers-latest.md'), 'utf8');
  expect(stdout.trim()).toBe(md.trim());
  const header = md.split('\n').find((l) => l.startsWith('| | '));
  expect(header).toBe(`| | ${COLUMNS.join(' | ')} |`);
  const row = (label: string) => {
    const line = md.split('\n').find((l) => l.startsWith(`| ${label} |`));
    expect(line, label).toBeDefined();
    const cells = line!.split('|').slice(1, -1).map((c) => c.trim());
    expect(cells.length, label).toBe(COLUMNS.length + 1);
    return cells;
  };
  const number = /^\d[\d.]*( \/ \d[\d.]*)?$/;
  for (const label of ['mcpmux stdio', 'mcpmux serve']) {
    const cells = row(label);
    // start-up, p50, calls/s, CPU/call, RSS, and the four 2 x 5 aggregation columns
    for (const i of [3, 4, 5, 6, 7, 8, 9, 10, 11]) expect(cells[i], `${label}: ${COLUMNS[i - 1]}`).toMatch(number);
  }
  for (const label of ['direct (stdio), reference', 'direct (HTTP, SDK server), reference']) {
    const cells = row(label);
    for (const i of [3, 4, 5]) expect(cells[i], `${label}: ${COLUMNS[i - 1]}`).toMatch(number);
    expect(cells[8]).toBe('n/a: one server');
  }

  const results = JSON.parse(readFileSync(path.join(out, 'peers-latest.json'), 'utf8'));
  expect(results.meta.git).toBeTruthy();
  expect(results.meta.cpus).toBeGreaterThan(0);
  for (const round of results.rounds) {
    for (const [key, rec] of [...Object.entries(round.calls), ...Object.entries(round.lists)] as [string, Record<string, unknown>][]) {
      expect(rec.error, key).toBeUndefined();
      expect(rec.leftovers, `${key} left processes behind`).toBeUndefined();
    }
    expect(round.lists['mcpmux-http'].tools).toBe(2 * 6);
    expect(round.lists['mcpmux-http'].upstreams).toBe(2);
  }
}, 270_000);

// mcp-hub's row depends on the bench's client for the older HTTP+SSE transport; CI cannot
// download mcp-hub, so the client is checked here against a loopback server that writes every
// event in pieces (a boundary split between chunks, \r\n line ends, a 300 KB message).
it('the SSE light client (bench/peers/sse-light.mjs) reads events split anywhere across chunks', async () => {
  const http = await import('node:http');
  const { SseLight } = (await import(path.join(ROOT, 'bench/peers/sse-light.mjs'))) as {
    SseLight: new (url: string, o: { label: string }) => { open(ms: number): Promise<void>; request(m: string, p: unknown, ms?: number): Promise<{ result: { text: string } }>; close(): Promise<void> };
  };
  let stream: import('node:http').ServerResponse | undefined;
  let writing = Promise.resolve(); // one event at a time on the stream, as a server writes them
  const writeInPieces = (text: string, size: number) =>
    (writing = writing.then(async () => {
      for (let i = 0; i < text.length; i += size) {
        stream!.write(text.slice(i, i + size));
        await new Promise((r) => setImmediate(r));
      }
    }));
  const paths: string[] = [];
  const server = http.createServer((req, res) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      stream = res;
      void writeInPieces('event: endpoint\r\ndata: /messages?sessionId=abc\r\n\r\n', 7);
      return;
    }
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      paths.push(req.url ?? '');
      res.writeHead(202).end('Accepted');
      const msg = JSON.parse(body);
      const text = msg.method === 'big' ? 'x'.repeat(300_000) : String(msg.params.text);
      // the first event ends in the middle of a chunk that also starts the next one
      void writeInPieces(`: comment\n\nevent: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { text } })}\n\n`, msg.method === 'big' ? 65_536 : 5);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as import('node:net').AddressInfo;
  const c = new SseLight(`http://127.0.0.1:${port}/mcp`, { label: 'sse test' });
  try {
    await c.open(5000);
    const [a, b] = await Promise.all([c.request('echo', { text: 'one' }, 5000), c.request('echo', { text: 'two' }, 5000)]);
    expect([a.result.text, b.result.text]).toEqual(['one', 'two']);
    expect((await c.request('big', {}, 5000)).result.text.length).toBe(300_000);
    expect(new Set(paths)).toEqual(new Set(['/messages?sessionId=abc']));
  } finally {
    await c.close();
    stream?.destroy();
    await new Promise((r) => server.close(r));
  }
});
