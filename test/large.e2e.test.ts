// Large messages: a 10 MB tool argument and its echo pass through mcpmux on every host
// transport when the limit allows them, and a message over the limit fails clearly.

import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';
import WebSocket from 'ws';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import path from 'node:path';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
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

const HOSTS = ['stdio', 'Streamable HTTP', 'WebSocket'] as const;

/** An SDK client connected to a fresh `mcpmux stdio`, or `mcpmux serve` over HTTP or WebSocket. */
async function host(cfg: object, kind: (typeof HOSTS)[number]): Promise<Client> {
  if (kind === 'stdio') return (await startMux(cfg)).client;
  const d = await startDaemon(cfg);
  const client = new Client({ name: 'big', version: '0.0.0' });
  clients.push(client);
  const url = kind === 'WebSocket' ? new URL(`ws://127.0.0.1:${d.port}/ws`) : new URL(d.url);
  await client.connect(kind === 'WebSocket' ? new WebSocketClientTransport(url) : new StreamableHTTPClientTransport(url));
  return client;
}

async function echoBlob(client: Client): Promise<void> {
  const res: any = await client.callTool({ name: 'fx__echo', arguments: { text: BLOB } }, undefined, { timeout: 60_000 });
  expect(res.content[0].text.length).toBe(BLOB.length);
  expect(res.content[0].text === BLOB).toBe(true);
}

describe('large messages: a 10 MB argument and its echo', () => {
  it.each(HOSTS)('%s host -> stdio upstream', async (kind) => {
    await echoBlob(await host(config, kind));
  });

  it('over limits.maxMessageBytes: the call fails with an error naming the size, and the session carries on', async () => {
    // The SDK client writes the id last: mcpmux finds it at the end of the refused line.
    const { client } = await startMux({ mcpServers: { fx: fixture({ name: 'fx' }) }, limits: { maxMessageBytes: 1 * MB } });
    await expect(client.callTool({ name: 'fx__echo', arguments: { blob: 'y'.repeat(2 * MB) } })).rejects.toThrow(/exceeds the limit/);
    const small: any = await client.callTool({ name: 'fx__echo', arguments: { ok: 1 } });
    expect(small.structuredContent).toEqual({ ok: 1 });
  });
});

// Inside mcpmux, long string values stay the bytes they arrived as (src/jsonrpc/opaque.ts).
// These check that what comes out is exactly what went in, in every direction and shape.
// 200 KB of every escape, non-ASCII text, and a look-alike of mcpmux's own placeholders.
const TRICKY = `quote " backslash \\ tab \t newline \n nul \u0000 é 漢字 🎉 \u0000mcpmux-000000000000-0 `.repeat(3000);
const fx = { mcpServers: { fx: fixture({ name: 'fx' }) } };

async function echoTricky(client: Client): Promise<void> {
  const res: any = await client.callTool({ name: 'fx__echo', arguments: { text: TRICKY, n: 1 } });
  expect(res.structuredContent.text === TRICKY).toBe(true);
  expect(JSON.parse(res.content[0].text)).toEqual({ text: TRICKY, n: 1 });
}

describe('long values pass through byte for byte', () => {
  it.each(HOSTS)('%s host: a 200 KB argument full of escapes, and its echo', async (kind) => {
    await echoTricky(await host(fx, kind));
  });

  it('sampling: a long prompt reaches the host, and a long answer reaches the upstream', async () => {
    let seen = '';
    const { client } = await startMux(fx, {
      clientCapabilities: { sampling: {} },
      beforeConnect: (c) =>
        c.setRequestHandler(CreateMessageRequestSchema, (req) => {
          seen = (req.params.messages[0]!.content as { text: string }).text;
          return { model: 'm', role: 'assistant', content: { type: 'text', text: `${TRICKY}!` } };
        }),
    });
    const res: any = await client.callTool({ name: 'fx__sample', arguments: { text: TRICKY } });
    expect(seen === TRICKY).toBe(true);
    expect(JSON.parse(res.content[0].text).content.text === `${TRICKY}!`).toBe(true);
  });

  it('a long URI in a resource_link is still namespaced (URIs are always parsed, however long)', async () => {
    const { client } = await startMux(fx);
    const uri = `data:text/plain,${'u'.repeat(40_000)}`;
    const res: any = await client.callTool({ name: 'fx__links', arguments: { uri } });
    expect(res.content[1].uri).toBe(`fx+${uri}`);
    expect(res.content[2].resource.uri).toBe(`fx+${uri}`);
  });

  it('a long string inside a tool definition arrives whole in tools/list (lists are always parsed)', async () => {
    // Surface "all": the added tool's 200 KB definition is far over surface.maxDirectTokens, so
    // under the default "auto" this session would get the search surface instead of the list.
    const { client } = await startMux({ ...fx, surface: { mode: 'all' } });
    await client.callTool({ name: 'fx__add_tool', arguments: { note: TRICKY } });
    const { tools } = await client.listTools();
    expect(tools.find((t) => t.name === 'fx__added_0')?.inputSchema.$comment === TRICKY).toBe(true);
  });
});
