// What a host-facing writer does while its host is behind (src/transport/backlog.ts), on the
// real stdio transport class over a real TCP connection whose far end stops reading: progress
// and log notifications are shed, list_changed and resources/updated coalesced to one each,
// responses, requests and cancellations always delivered, the host's own input not read until it
// catches up, and the connection cut past the hard bound or when it takes nothing for too long.

import dc from 'node:diagnostics_channel';
import { createServer, connect, type Socket } from 'node:net';
import { pino } from 'pino';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { SHED_BYTES, STUCK_ENV } from '../src/transport/backlog.js';
import { StreamTransport } from '../src/transport/stream.js';
import { CHANNEL, type HostBacklogEvent } from '../src/observe/events.js';
import { waitFor } from './helpers/harness.js';

const MAX_MESSAGE = 64 * 1024; // the hard bound is then 4 MB (MIN_BACKLOG_BYTES)

/** mcpmux's end (`ours`) and the host's end (`host`) of one real TCP connection. */
async function socketPair(): Promise<{ ours: Socket; host: Socket }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
  const host = connect((server.address() as { port: number }).port, '127.0.0.1');
  const ours = await accepted;
  server.close();
  onTestFinished(() => {
    ours.destroy();
    host.destroy();
  });
  return { ours, host };
}

function hostTransport(ours: Socket): { t: StreamTransport; logs: string[]; events: HostBacklogEvent[]; closed: Promise<string> } {
  const logs: string[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void logs.push(line) });
  const t = new StreamTransport(ours, ours, MAX_MESSAGE, true, { log });
  const events: HostBacklogEvent[] = [];
  const listener = (ev: unknown) => events.push(ev as HostBacklogEvent);
  dc.subscribe(CHANNEL.hostBacklog, listener);
  onTestFinished(() => void dc.unsubscribe(CHANNEL.hostBacklog, listener));
  const closed = new Promise<string>((resolve) => (t.onclose = resolve));
  return { t, logs, events, closed };
}

const log = (i: number) => ({ jsonrpc: '2.0' as const, method: 'notifications/message', params: { level: 'info', data: `log ${i} ${'x'.repeat(1000)}` } });

/** Writes log notifications a tick at a time (as a flood from an upstream arrives) until some are shed. */
async function floodUntilShed(t: StreamTransport, events: HostBacklogEvent[]): Promise<number> {
  let i = 0;
  while (!events.some((e) => e.action === 'shed')) {
    for (let j = 0; j < 200; j++) t.send(log(i++));
    await new Promise((resolve) => setImmediate(resolve));
    if (i > 200_000) throw new Error('nothing was shed');
  }
  return i;
}

afterEach(() => {
  delete process.env[STUCK_ENV];
});

describe('a host that falls behind (stdio transport over a real socket)', () => {
  it('sheds progress and logs, coalesces list_changed and resources/updated to one each, never drops answers, requests or cancellations, and reads no requests until it catches up', async () => {
    const { ours, host } = await socketPair();
    const { t, logs, events } = hostTransport(ours);
    const received: string[] = [];
    host.pause();
    const floods = await floodUntilShed(t, events);
    expect(ours.isPaused(), 'the host\'s requests are not read while it is behind').toBe(true);
    for (let k = 0; k < 3; k++) t.send({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    for (let k = 0; k < 3; k++) t.send({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: 'file:///a', n: k } });
    for (let k = 0; k < 2; k++) t.send({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: 'file:///b', n: k } });
    t.send({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } });
    t.send({ jsonrpc: '2.0', id: 7, result: { answer: 'kept' } });
    t.send({ jsonrpc: '2.0', id: 'q', method: 'roots/list' });
    t.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'x' } });
    t.send({ jsonrpc: '2.0', method: 'notifications/tasks/status', params: { taskId: 't', status: 'working' } });
    // The host reads again.
    let buf = '';
    host.setEncoding('utf8').on('data', (c: string) => {
      buf += c;
      let n: number;
      while ((n = buf.indexOf('\n')) >= 0) {
        received.push(buf.slice(0, n));
        buf = buf.slice(n + 1);
      }
    });
    host.resume();
    await waitFor(() => !ours.isPaused(), { what: 'the host\'s requests read again once it caught up', timeoutMs: 15_000 });
    // Everything set aside is out once it has caught up; a marker sent after it closes the list.
    t.send({ jsonrpc: '2.0', id: 'end', result: {} });
    await waitFor(() => received.some((l) => l.includes('"id":"end"')), { what: 'the marker', timeoutMs: 15_000 });
    const parsed = received.map((l) => JSON.parse(l));
    const of = (method: string) => parsed.filter((m) => m.method === method);
    expect(of('notifications/tools/list_changed')).toHaveLength(1);
    expect(of('notifications/resources/updated').map((m) => [m.params.uri, m.params.n]).sort()).toEqual([['file:///a', 2], ['file:///b', 1]]);
    expect(of('notifications/progress')).toHaveLength(0);
    expect(of('notifications/message').length).toBeLessThan(floods);
    expect(parsed.filter((m) => m.id === 7)).toEqual([{ jsonrpc: '2.0', id: 7, result: { answer: 'kept' } }]);
    expect(parsed.filter((m) => m.id === 'q' && m.method === 'roots/list')).toHaveLength(1);
    expect(of('notifications/cancelled')).toHaveLength(1);
    expect(of('notifications/tasks/status')).toHaveLength(1);
    // Counted: each log not delivered, the progress, and the 2 + 2 + 1 notices replaced.
    const shed = events.filter((e) => e.action === 'shed');
    expect(shed.length).toBe(floods - of('notifications/message').length + 1);
    expect(events.filter((e) => e.action === 'coalesced')).toHaveLength(5);
    expect(events.every((e) => e.transport === 'stdio' && e.waiting > SHED_BYTES)).toBe(true);
    // Said once.
    expect(logs.filter((l) => l.includes('host is not keeping up'))).toHaveLength(1);
  }, 60_000);

  it('a host that takes nothing for the stuck time is cut, said and published', async () => {
    process.env[STUCK_ENV] = '500';
    const { ours, host } = await socketPair();
    const { t, logs, events, closed } = hostTransport(ours);
    host.pause();
    await floodUntilShed(t, events);
    expect(await closed).toMatch(/^the peer has read nothing of what mcpmux sends for \d+ s \(\d+ bytes waiting\)$/);
    expect(events.filter((e) => e.action === 'closed')).toEqual([expect.objectContaining({ transport: 'stdio', why: 'stuck' })]);
    expect(logs.some((l) => l.includes('host connection cut: it is not reading'))).toBe(true);
    expect(ours.destroyed).toBe(true);
  }, 60_000);

  it('answers past the hard bound (4 MB here) cut the connection at once: they are never shed', async () => {
    const { ours, host } = await socketPair();
    const { t, events, closed } = hostTransport(ours);
    host.pause();
    let gone = false;
    void closed.then(() => (gone = true));
    for (let id = 0; !gone && id < 2000; id++) {
      t.send({ jsonrpc: '2.0', id, result: { pad: 'y'.repeat(32 * 1024) } });
      if (id % 20 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await closed).toMatch(/^the peer is not reading what mcpmux sends \(\d+ bytes waiting\)$/);
    expect(events.filter((e) => e.action === 'closed')).toEqual([expect.objectContaining({ why: 'full' })]);
    expect(events.filter((e) => e.action === 'shed')).toEqual([]);
  }, 60_000);
});
