// Hostile HTTP against `mcpmux serve`, over raw sockets: slow headers and bodies (slowloris),
// oversized headers, malformed and smuggling-shaped requests, and clients that vanish mid-SSE
// or mid-WebSocket-frame. Every one gets a 4xx (or the connection closed) within a bounded
// time, never a 5xx, and leaves no session or request behind.

import http from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import WebSocket from 'ws';
import { HEADERS_TIMEOUT_MS as DEFAULT_HEADERS_MS, REQUEST_TIMEOUT_MS as DEFAULT_REQUEST_MS } from '../src/transport/http/timeouts.js';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { fixture, waitFor } from './helpers/harness.js';
import { scrape, total } from './helpers/prom.js';

afterAll(stopAllDaemons);

const HEADERS_TIMEOUT_MS = 600;
const REQUEST_TIMEOUT_MS = 1200;
/** A host that takes nothing of what waits for it past the shed bound for this long is cut (backlog.ts). */
const STUCK_MS = 1500;

let d: Daemon;
beforeAll(async () => {
  d = await startDaemon(
    { mcpServers: { fx: fixture({ name: 'fx' }) }, limits: { maxMessageBytes: 65536 } },
    { MCPMUX_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS), MCPMUX_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS), MCPMUX_STUCK_MS: String(STUCK_MS) },
  );
});

/** A raw TCP connection to the daemon: what it answered, and when it closed. */
function rawConnection(port: number): { socket: Socket; answer: () => string; closed: Promise<number> } {
  const socket = connect(port, '127.0.0.1');
  const t0 = Date.now();
  let answer = '';
  socket.setEncoding('latin1').on('data', (c: string) => (answer += c));
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now() - t0)));
  return { socket, answer: () => answer, closed };
}

const statusOf = (answer: string): number | undefined => {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(answer);
  return m ? Number(m[1]) : undefined;
};

const inFlight = async (): Promise<number> => total((await scrape(`${d.base}/metrics`)).samples, 'mcpmux_requests_in_flight');
const sessions = async (): Promise<number> => total((await scrape(`${d.base}/metrics`)).samples, 'mcpmux_sessions');

const INIT = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } });
const HEAD = (length: number) =>
  `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: ${length}\r\n\r\n`;

describe('slow and oversized requests', () => {
  // No upper bound near the limit (a busy machine fires timers late): not before the configured
  // limit, and long before the default one, so the configured limit is the one that acted.
  it('headers that never finish get 408 and the connection closed, after the headers timeout', async () => {
    const c = rawConnection(d.port);
    c.socket.write('POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    const ms = await c.closed;
    expect(statusOf(c.answer())).toBe(408);
    expect(ms).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS);
    expect(ms).toBeLessThan(DEFAULT_HEADERS_MS);
  });

  it('a body that never finishes gets 408 and the connection closed, after the request timeout', async () => {
    const c = rawConnection(d.port);
    c.socket.write(HEAD(INIT.length) + INIT.slice(0, 10));
    const ms = await c.closed;
    expect(statusOf(c.answer())).toBe(408);
    expect(ms).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS);
    expect(ms).toBeLessThan(DEFAULT_REQUEST_MS);
  });

  it('headers over 16 KB get 431', async () => {
    const c = rawConnection(d.port);
    c.socket.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`);
    await c.closed;
    expect(statusOf(c.answer())).toBe(431);
  });

  it('a declared body over the limit gets 413 without being read', async () => {
    const c = rawConnection(d.port);
    c.socket.write(HEAD(10_000_000) + '{"jsonrpc":"2.0",');
    await c.closed;
    expect(statusOf(c.answer())).toBe(413);
  });

  it('a POST declaring 100 MB is refused at once: 413 before any "100 Continue", the connection closed, the body never read', async () => {
    const c = rawConnection(d.port);
    c.socket.write(HEAD(104_857_600).replace('\r\n\r\n', '\r\nExpect: 100-continue\r\n\r\n'));
    await c.closed;
    // Node says "100 Continue" to every such request unless told otherwise: the client would
    // then start sending its 100 MB.
    expect(c.answer()).not.toContain('100 Continue');
    expect(statusOf(c.answer())).toBe(413);
  });

  it.each([
    ['413 (too large)', (h: string) => h, 413],
    ['406 (it does not accept SSE)', (h: string) => h.replace('Accept: application/json, text/event-stream', 'Accept: text/html'), 406],
    ['415 (not JSON)', (h: string) => h.replace('Content-Type: application/json', 'Content-Type: text/plain'), 415],
    ['404 (no such route)', (h: string) => h.replace('POST /mcp', 'POST /nowhere'), 404],
  ])('a client sending a 100 MB body refused with %s gets the answer, and the connection ends before the body is read', async (_what, edit, status) => {
    const DECLARED = 104_857_600;
    const c = rawConnection(d.port);
    c.socket.write(edit(HEAD(DECLARED)));
    // It keeps sending for as long as the daemon reads.
    let sent = 0;
    const chunk = Buffer.alloc(65_536, 0x20);
    const pump = (): void => {
      while (c.socket.writable && sent < DECLARED) {
        sent += chunk.length;
        if (!c.socket.write(chunk)) return void c.socket.once('drain', pump);
      }
    };
    pump();
    await c.closed;
    expect(statusOf(c.answer())).toBe(status);
    expect(c.answer().split('\r\n\r\n')[0]!.toLowerCase()).toContain('connection: close');
    // Kept alive, the connection would have read (and thrown away) all of it first.
    expect(sent, 'bytes the client got to send').toBeLessThan(DECLARED);
  });

  it.each([
    ['a malformed request line', 'GARBAGE\r\n\r\n'],
    ['Content-Length and Transfer-Encoding together (smuggling)', `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`],
    ['two different Content-Length headers', `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!`],
    ['a bad chunk size', `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: */*\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n`],
    ['a space before the header colon', `POST /mcp HTTP/1.1\r\nHost : 127.0.0.1\r\nContent-Length: 0\r\n\r\n`],
  ])('%s gets 400 and the connection closed', async (_what, bytes) => {
    const c = rawConnection(d.port);
    c.socket.write(bytes);
    await c.closed;
    expect(statusOf(c.answer())).toBe(400);
  });
});

describe('POST bodies being read at once', () => {
  it('hold at most 4 x limits.maxMessageBytes together: past that a POST gets 503 at once, and passes again once one ends', async () => {
    const MAX = 65536;
    const e = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) }, limits: { maxMessageBytes: MAX } });
    // Four clients each declare a maximal body and send only its first bytes.
    const holders = Array.from({ length: 4 }, () => {
      const c = rawConnection(e.port);
      c.socket.write(HEAD(MAX) + '{"jsonrpc":');
      return c;
    });
    onTestFinished(() => holders.forEach((h) => h.socket.destroy()));
    // A whole, maximal body: read and answered (400: it is no initialize) while there is room.
    const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    const probe = async () =>
      (await fetch(e.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: ping.padEnd(MAX, ' ') })).status;
    // Once the server holds the four (they arrive in any order), the next one does not fit.
    await waitFor(async () => (await probe()) === 503, { what: 'a POST refused for the bodies being read' });
    const refused = await fetch(e.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: ping.padEnd(MAX, ' ') });
    expect(refused.headers.get('retry-after')).toBe('1');
    expect((await refused.json()).error.message).toMatch(/request bodies being read already hold 262144 bytes \(4 x limits.maxMessageBytes\)/);
    // A client that goes away gives its share back.
    holders[0]!.socket.destroy();
    await waitFor(async () => (await probe()) === 400, { what: 'POSTs read again' });
    await e.stop();
  });
});

describe('clients that vanish', () => {
  it('a client that drops its SSE answer mid-call leaves no request in flight and no session behind after DELETE', async () => {
    const init = await fetch(d.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream;q=0.5' }, body: INIT });
    const sid = init.headers.get('mcp-session-id')!;
    await init.text();
    const h = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
    await fetch(d.url, { method: 'POST', headers: h, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
    const ac = new AbortController();
    const call = await fetch(d.url, {
      method: 'POST',
      headers: h,
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'fx__slow', arguments: { ms: 60_000 } } }),
      signal: ac.signal,
    });
    expect(call.headers.get('content-type')).toBe('text/event-stream');
    await waitFor(async () => (await inFlight()) >= 1, { what: 'the slow call in flight' });
    ac.abort();
    // The session ends with DELETE: its request is cancelled upstream and nothing stays in flight.
    expect((await fetch(d.url, { method: 'DELETE', headers: h })).status).toBe(200);
    await waitFor(async () => (await inFlight()) === 0, { what: 'nothing in flight' });
  });

  it('a WebSocket that disconnects in the middle of a frame leaves no session behind', async () => {
    const before = await sessions();
    const ws = new WebSocket(`ws://127.0.0.1:${d.port}/ws`, 'mcp');
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    await waitFor(async () => (await sessions()) === before + 1, { what: 'the WebSocket session open' });
    // A text frame header announcing 1000 bytes (masked, as from a client), then 10 of them.
    const raw = (ws as unknown as { _socket: Socket })._socket;
    raw.write(Buffer.concat([Buffer.from([0x81, 0xfe, 0x03, 0xe8, 1, 2, 3, 4]), Buffer.alloc(10, 0x41)]));
    raw.destroy();
    await waitFor(async () => (await sessions()) === before, { what: 'the session closed' });
  });

  it('a GET stream whose reader stops reading is cut once it has taken nothing for the stuck time, with a log line and a metric; the session carries on', async () => {
    const init = await fetch(d.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream;q=0.5' }, body: INIT });
    const sid = init.headers.get('mcp-session-id')!;
    await init.text();
    const h = { 'content-type': 'application/json', accept: 'application/json, text/event-stream;q=0.5', 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
    await fetch(d.url, { method: 'POST', headers: h, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
    // A GET stream read by nobody: the socket is paused as soon as the headers are in.
    const get = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: d.port, path: '/mcp', headers: { accept: 'text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' } }, resolve);
      req.on('error', reject);
      req.end();
    });
    get.pause();
    get.socket.pause();
    onTestFinished(() => void get.destroy());
    // Log notifications from the upstream, all for the GET stream, until more than the shed bound
    // (1 MB) waits for it (the kernel's socket buffers take a few MB first); past it they are shed.
    const flood = (id: number) =>
      fetch(d.url, { method: 'POST', headers: h, body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'fx__log', arguments: { levels: Array(8000).fill('info') } } }) });
    const stuck = async () => total((await scrape(`${d.base}/metrics`)).samples, 'mcpmux_host_connections_cut_total', { transport: 'http', why: 'stuck' });
    const cutBefore = await stuck();
    for (let id = 10; id < 60 && !/"msg":"SSE stream dropped"/.test(d.stderr()) && !/"transport":"http"[^\n]*host is not keeping up/.test(d.stderr()); id++) {
      expect((await flood(id)).status).toBe(200);
    }
    // Then nothing is taken for STUCK_MS: the stream is cut.
    await waitFor(() => /"msg":"SSE stream dropped"/.test(d.stderr()), { what: 'the stream dropped', timeoutMs: 20_000 });
    expect(d.stderr()).toMatch(/"why":"the peer has read nothing of what mcpmux sends for \d+ s \(\d+ bytes waiting\)"/);
    expect(await stuck()).toBe(cutBefore + 1);
    // The session itself is fine.
    const ping = await fetch(d.url, { method: 'POST', headers: h, body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping' }) });
    expect(await ping.json()).toEqual({ jsonrpc: '2.0', id: 3, result: {} });
  });

  it('a WebSocket whose reader stops reading is cut once it has taken nothing for the stuck time, and its session ends', async () => {
    const before = await sessions();
    const ws = new WebSocket(`ws://127.0.0.1:${d.port}/ws`, 'mcp');
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    ws.on('error', () => {});
    const closed = new Promise((resolve) => ws.once('close', resolve));
    const answers: any[] = [];
    ws.on('message', (m) => answers.push(JSON.parse(String(m))));
    ws.send(INIT);
    await waitFor(() => answers.some((a) => a.id === 1), { what: 'initialize answered' });
    ws.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    (ws as unknown as { _socket: Socket })._socket.pause();
    const dropped = () => /"reason":"the peer has read nothing of what mcpmux sends for \d+ s \(\d+ bytes waiting\)"/.test(d.stderr());
    // Each call floods ~1.2 MB of log notifications at the socket nobody reads, until some are
    // shed; then nothing is taken for STUCK_MS and the socket is cut.
    for (let id = 10; id < 60 && !dropped(); id++) {
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'fx__log', arguments: { levels: Array(8000).fill('info') } } }));
      await waitFor(async () => dropped() || total((await scrape(`${d.base}/metrics`)).samples, 'mcpmux_requests_in_flight') === 0, { what: 'the call done', timeoutMs: 20_000 });
    }
    await waitFor(dropped, { what: 'the session dropped', timeoutMs: 20_000 });
    (ws as unknown as { _socket: Socket })._socket.resume();
    await closed;
    await waitFor(async () => (await sessions()) === before, { what: 'the session gone' });
  });

  it('after all of it, the daemon still serves a good request', async () => {
    const r = await fetch(d.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream;q=0.5' }, body: INIT });
    expect(r.status).toBe(200);
    expect((await r.json()).result.serverInfo).toBeDefined();
    expect(d.child.exitCode).toBeNull();
  });
});
