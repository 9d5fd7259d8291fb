// An upstream WebSocket server that stops reading, or stops answering pings (issue 18, item 7):
// mcpmux's send buffer to it is bounded (past maxBacklogBytes, 4 MB here, a request fails at once
// with -31001 naming the cause instead of being queued), and a ping every MCPMUX_WS_PING_MS finds
// a server that no longer answers: the connection is dropped and made again. The server is
// hand-written here (no published server misbehaves this way), on the `ws` package.

import type { Socket } from 'node:net';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import { closeAll, startRawMux, waitFor, writeConfig } from './helpers/harness.js';

afterEach(closeAll);

/** A minimal MCP server over WebSocket: tools `echo` (answers "ok") and `stall` (stops reading its socket, never answers). */
async function wsUpstream(opts: { autoPong: boolean }): Promise<{ url: string; connections: () => number; stalled: () => boolean }> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, autoPong: opts.autoPong, handleProtocols: () => 'mcp' });
  await new Promise((resolve) => wss.once('listening', resolve));
  onTestFinished(() => {
    for (const c of wss.clients) c.terminate();
    wss.close();
  });
  let connections = 0;
  let stalled = false;
  wss.on('connection', (ws: WebSocket) => {
    connections++;
    const reply = (id: unknown, result: object) => ws.send(JSON.stringify({ jsonrpc: '2.0', id, result }));
    ws.on('message', (data) => {
      const m = JSON.parse(String(data));
      if (m.id === undefined) return;
      switch (m.method) {
        case 'initialize':
          return reply(m.id, { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'ws-bad', version: '1' } });
        case 'tools/list':
          return reply(m.id, { tools: ['echo', 'stall'].map((name) => ({ name, inputSchema: { type: 'object' } })) });
        case 'tools/call':
          if (m.params.name === 'stall') {
            stalled = true;
            (ws as unknown as { _socket: Socket })._socket.pause();
            return;
          }
          return reply(m.id, { content: [{ type: 'text', text: 'ok' }] });
        default:
          return reply(m.id, {});
      }
    });
  });
  const { port } = wss.address() as { port: number };
  return { url: `ws://127.0.0.1:${port}/`, connections: () => connections, stalled: () => stalled };
}

describe('an upstream WebSocket server', () => {
  it('that stops reading: once 4 MB wait in the send buffer, requests fail at once with -31001 saying why, instead of queueing', async () => {
    const up = await wsUpstream({ autoPong: true });
    const peer = startRawMux(await writeConfig({ mcpServers: { w: { url: up.url } }, limits: { maxMessageBytes: 65_536 } }));
    await peer.initialize();
    expect((await peer.request('tools/call', { name: 'w__echo', arguments: {} }, 15_000)).result.content[0].text).toBe('ok');
    peer.send({ jsonrpc: '2.0', id: 'stall', method: 'tools/call', params: { name: 'w__stall', arguments: {} } });
    await waitFor(up.stalled, { what: 'the server stalled' });
    // Calls of 60 KB each: the kernel's buffers take a few MB, then mcpmux's send buffer fills.
    const refused = () => peer.messages.find((m) => m.error?.code === -31001);
    let sent = 0;
    for (; sent < 600 && !refused(); sent += 20) {
      for (let i = sent; i < sent + 20; i++) {
        peer.send({ jsonrpc: '2.0', id: `big-${i}`, method: 'tools/call', params: { name: 'w__echo', arguments: { pad: 'x'.repeat(60_000) } } });
      }
      // A round trip with mcpmux between batches paces the host.
      expect((await peer.request('ping', undefined, 15_000)).result).toEqual({});
    }
    const err = await waitFor(refused, { what: 'a request refused' });
    expect(err.error.message).toMatch(/^WebSocket ws:\/\/127\.0\.0\.1:\d+\/: the server is not reading what mcpmux sends \(\d+ bytes waiting\); the request was not sent$/);
    // Refused at once: fewer than 600 x 60 KB (36 MB) were queued for the server.
    expect(sent).toBeLessThan(600);
  }, 120_000);

  it('that stops answering pings is dropped when a ping is still unanswered at the next one, and connected again', async () => {
    const up = await wsUpstream({ autoPong: false });
    const peer = startRawMux(await writeConfig({ mcpServers: { w: { url: up.url } } }), { env: { MCPMUX_WS_PING_MS: '300' } });
    await peer.initialize();
    await waitFor(() => /no answer to a ping within 300 ms \(the server is gone or not reading\)/.test(peer.stderr()), { what: 'the dead peer found', timeoutMs: 15_000 });
    await waitFor(() => up.connections() >= 2, { what: 'connected again', timeoutMs: 15_000 });
  }, 60_000);
});
