// `mcpmux connect` (issue 18, item 5) through the real binary and a real daemon, with the host
// as raw pipes: ids and numbers pass byte-exact both ways (as through `mcpmux stdio`), a batch
// is answered with one array, and a host that stops reading stops the bridge reading from the
// daemon (its memory stays bounded) until it reads again, when everything comes.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { closeAll, fixture, MUX_BIN, ROOT, startRawMux, tempFile, waitFor, type RawPeer } from './helpers/harness.js';
import { scrape, total } from './helpers/prom.js';

afterEach(closeAll);
afterAll(stopAllDaemons);

const bad = (opts: object) => ({ command: process.execPath, args: [path.join(ROOT, 'test/fixtures/bad-upstream.mjs'), JSON.stringify(opts)] });
const connect = (url: string) => ({ command: process.execPath, args: [MUX_BIN, 'connect', url] });
const initParams = (protocolVersion: string) => ({ protocolVersion, capabilities: {}, clientInfo: { name: 'connect-test', version: '0' } });
/** Whether `text` holds a response carrying exactly this id literal. */
const echoes = (text: string, id: string): boolean => text.includes(`"id":${id},"result"`) || text.includes(`"id":${id},"error"`);

async function init(peer: RawPeer, version: string): Promise<void> {
  const res = await peer.request('initialize', initParams(version), 30_000);
  expect(res.result?.protocolVersion).toBe(version);
  peer.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
}

describe('mcpmux connect keeps numbers exact', () => {
  it('ids and arguments a double cannot hold pass byte-exact, and a batch is answered with one array', async () => {
    const raw = tempFile('upstream-in.jsonl');
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }), bad: bad({ rawLog: raw }) } });
    const peer = startRawMux(connect(d.url));
    // 2025-03-26: the last version with batches.
    await init(peer, '2025-03-26');
    peer.send('{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping"}');
    await waitFor(() => peer.lines.some((l) => echoes(l, '12345678901234567890')), { what: 'the ping answered', timeoutMs: 10_000 });
    expect(peer.lines).toContain('{"jsonrpc":"2.0","id":12345678901234567890,"result":{}}');

    const args = '{"mode":"ok","big":12345678901234567890,"huge":1e400,"list":[-1e400,98765432109876543210]}';
    peer.send(`{"jsonrpc":"2.0","id":-1e400,"method":"tools/call","params":{"name":"bad__misbehave","arguments":${args}}}`);
    await waitFor(() => peer.lines.some((l) => echoes(l, '-1e400')), { what: 'the call answered', timeoutMs: 10_000 });
    await waitFor(() => existsSync(raw) && readFileSync(raw, 'utf8').includes('"method":"tools/call"'), { what: 'the call seen upstream' });
    expect(readFileSync(raw, 'utf8')).toContain(`"arguments":${args}`);

    // The daemon answers a batch on an SSE stream, one event per response: the host gets one array.
    peer.send('[{"jsonrpc":"2.0","id":1e400,"method":"ping"},{"jsonrpc":"2.0","id":98765432109876543210,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]');
    const batch = await waitFor(() => peer.lines.find((l) => l.startsWith('[')), { what: 'the batch answered', timeoutMs: 10_000 });
    expect(batch.startsWith('[{"jsonrpc":"2.0","id":1e400,"result":{}},{"jsonrpc":"2.0","id":98765432109876543210,"result":{"tools":[')).toBe(true);
    expect(JSON.parse(batch)).toHaveLength(2);
    // Each request answered once: nothing else carries these ids.
    for (const id of ['1e400', '98765432109876543210', '12345678901234567890', '-1e400']) {
      expect(peer.lines.filter((l) => l.includes(`"id":${id},`)), id).toHaveLength(1);
    }
    expect(peer.lines.join('\n')).not.toMatch(/mcpmux-num-|"id":null/);
  });
});

/** The peak resident set of a process so far (Linux). */
const peakRss = (pid: number): number => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

describe('mcpmux connect and a host that stops reading', () => {
  /** The bridge may hold this much more than after the handshake while its host does not read. */
  const BOUND = 16 * 1024 * 1024;
  /** Notifications the upstream floods while the host does not read: ~48 MB, three times the bound. */
  const FLOOD = { n: 24_000, pad: 2000 };

  it.skipIf(process.platform !== 'linux')(
    'stops reading from the daemon: its memory stays bounded during a flood, and everything comes once the host reads',
    async () => {
      const d = await startDaemon({ mcpServers: { bad: bad({}) } });
      // --liftoff-only: about a second after its first request, V8 recompiles undici's WASM HTTP
      // parser in the background, a one-off ~25 MB peak that has nothing to do with traffic and
      // would hide what is measured here.
      const child = spawn(process.execPath, ['--liftoff-only', MUX_BIN, 'connect', d.url], { stdio: ['pipe', 'pipe', 'pipe'] });
      onTestFinished(() => void (child.exitCode === null && child.signalCode === null && child.kill('SIGKILL')));
      let err = '';
      child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
      // What the host reads: counted as it comes, not kept (48 MB).
      let tail = '';
      let floodSeen = 0;
      let lastFlood = -1;
      let outOfOrder = 0;
      let answered = false;
      const onOut = (c: string): void => {
        const text = tail + c;
        const lines = text.split('\n');
        tail = lines.pop()!;
        for (const l of lines) {
          const m = /"data":"flood (\d+)x/.exec(l);
          if (m) {
            floodSeen++;
            if (Number(m[1]) <= lastFlood) outOfOrder++;
            lastFlood = Number(m[1]);
          } else if (l.startsWith('{"jsonrpc":"2.0","id":3,')) answered = true;
        }
      };
      let early = '';
      const onEarly = (c: string): void => void (early += c);
      child.stdout.setEncoding('utf8').on('data', onEarly);
      const send = (m: object): void => void child.stdin.write(JSON.stringify(m) + '\n');
      send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: initParams('2025-11-25') });
      await waitFor(() => early.includes('"id":1,'), { what: 'initialize answered', timeoutMs: 30_000 });
      send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'bad__misbehave', arguments: { mode: 'ok' } } });
      await waitFor(() => early.includes('"id":2,'), { what: 'a first call answered', timeoutMs: 10_000 });
      const base = peakRss(child.pid!);

      // The host stops reading; the upstream floods it.
      child.stdout.off('data', onEarly);
      child.stdout.pause();
      send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'bad__misbehave', arguments: { mode: 'notify-flood', ...FLOOD } } });
      // The daemon has handed the whole flood and the answer to the bridge's connection once it
      // counts the call as answered (it writes the answer after the notifications, in order).
      const calls = async (): Promise<number> => total((await scrape(`${d.base}/metrics`)).samples, 'mcpmux_requests_total', { method: 'tools/call' });
      await waitFor(async () => (await calls()) >= 2, { what: 'the flood sent and the call answered by the daemon', timeoutMs: 60_000 });
      const grown = peakRss(child.pid!) - base;
      expect(grown, `the bridge grew by ${(grown / 1048576).toFixed(1)} MB while its host did not read`).toBeLessThan(BOUND);

      // The host reads again: the answer comes, after the notifications, in order.
      child.stdout.on('data', onOut);
      child.stdout.resume();
      await waitFor(() => answered, { what: `the call's answer (${floodSeen} notifications so far)\n${err}`, timeoutMs: 120_000 });
      expect(outOfOrder).toBe(0);
      // What the daemon kept for this host comes whole (the daemon may shed log notifications for
      // a host that lags behind: its own bound, not the bridge's).
      expect(floodSeen).toBeGreaterThan(0);
      child.stdin.end();
    },
    180_000,
  );
});
