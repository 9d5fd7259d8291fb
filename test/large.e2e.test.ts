// Large messages: a 10 MB tool argument and its echo pass through mcpmux on every host
// transport when the limit allows them, and a message over the limit fails clearly.

import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';
import WebSocket from 'ws';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import path from 'node:path';
import { closeAll, fixture, ROOT, startMux } from './helpers/harness.js';

// The SDK's WebSocketClientTransport uses the global WebSocket, which Node 20 has only behind a flag.
(globalThis as any).WebSocket ??= WebSocket;

const MB = 1024 * 1024;
// 10 MB, not 10 MiB: the SDK's stdio server silently drops a line of 10 MiB or more.
const BLOB = 'x'.repeat(10_000_000);
// The benchmark's SDK echo server: `echo {text}` answers with the text. (The test fixture's
// echo is superlinear in the SDK's handling beyond a few MB, so it would time the fixture.)
const ECHO = { command: process.execPath, args: [path.join(ROOT, 'bench/echo-server.mjs')] };
const config = { mcpServers: { fx: ECHO } };

const clients: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
  await closeAll();
});
afterAll(stopAllDaemons);

async function echoBlob(client: Client): Promise<void> {
  const res: any = await client.callTool({ name: 'fx__echo', arguments: { text: BLOB } }, undefined, { timeout: 60_000 });
  expect(res.content[0].text.length).toBe(BLOB.length);
  expect(res.content[0].text === BLOB).toBe(true);
}

describe('large messages: a 10 MB argument and its echo', () => {
  it('stdio host -> stdio upstream', async () => {
    const { client } = await startMux(config);
    await echoBlob(client);
  });

  it('Streamable HTTP host -> stdio upstream', async () => {
    const d = await startDaemon(config);
    const client = new Client({ name: 'big', version: '0.0.0' });
    clients.push(client);
    await client.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    await echoBlob(client);
  });

  it('WebSocket host -> stdio upstream', async () => {
    const d = await startDaemon(config);
    const client = new Client({ name: 'big', version: '0.0.0' });
    clients.push(client);
    await client.connect(new WebSocketClientTransport(new URL(`ws://127.0.0.1:${d.port}/ws`)));
    await echoBlob(client);
  });

  it('over limits.maxMessageBytes: the call fails with an error naming the size, and the session carries on', async () => {
    // The SDK client writes the id last: mcpmux finds it at the end of the refused line.
    const { client } = await startMux({ mcpServers: { fx: fixture({ name: 'fx' }) }, limits: { maxMessageBytes: 1 * MB } });
    await expect(client.callTool({ name: 'fx__echo', arguments: { blob: 'y'.repeat(2 * MB) } })).rejects.toThrow(/exceeds the limit/);
    const small: any = await client.callTool({ name: 'fx__echo', arguments: { ok: 1 } });
    expect(small.structuredContent).toEqual({ ok: 1 });
  });
});
