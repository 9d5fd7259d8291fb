// The official SDK's Client over each transport, as a host built with the SDK would use it.
//
// stdio: the SDK's StdioClientTransport spawns its own child and cannot put it in a process
// group of its own, so the bench spawns the child itself (tracked, own group) and runs the
// SDK's framing on its pipes: ChildStdioTransport below is StdioClientTransport's message path
// (ReadBuffer + serializeMessage from the SDK, same 10 MiB default buffer limit) minus spawning.
// http: StreamableHTTPClientTransport (fetch/undici). ws: WebSocketClientTransport, with the
// `ws` package as the global WebSocket (Node 20 has none without --experimental-websocket).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import { setMaxListeners } from 'node:events';
import WebSocket from 'ws';

if (typeof globalThis.WebSocket === 'undefined') globalThis.WebSocket = WebSocket;

export class ChildStdioTransport {
  constructor(child) {
    this.child = child;
    this.readBuffer = new ReadBuffer();
  }

  async start() {
    const c = this.child;
    c.stdout.on('data', (chunk) => {
      try {
        this.readBuffer.append(chunk);
      } catch (e) {
        this.onerror?.(e);
        return;
      }
      for (;;) {
        let m;
        try {
          m = this.readBuffer.readMessage();
        } catch (e) {
          this.onerror?.(e);
          continue;
        }
        if (m === null) break;
        this.onmessage?.(m);
      }
    });
    c.stdout.on('error', (e) => this.onerror?.(e));
    c.once('exit', () => this.onclose?.());
  }

  async send(message) {
    await new Promise((resolve) => {
      if (this.child.stdin.write(serializeMessage(message))) resolve();
      else this.child.stdin.once('drain', resolve);
    });
  }

  async close() {
    this.child.stdin.end();
  }
}

export function newClient() {
  return new Client({ name: 'mcpmux-bench-sdk', version: '1.0.0' }, { capabilities: {} });
}

/** Connects (initialize + initialized) with a bound; returns {client, transport}. */
export async function connectSdk(kind, target, timeoutMs = 30_000) {
  const client = newClient();
  let transport;
  if (kind === 'stdio') transport = new ChildStdioTransport(target);
  else if (kind === 'http') transport = new StreamableHTTPClientTransport(new URL(target));
  else if (kind === 'ws') transport = new WebSocketClientTransport(new URL(target));
  else throw new Error(`unknown transport ${kind}`);
  await client.connect(transport, { timeout: timeoutMs });
  // StreamableHTTPClientTransport passes one AbortSignal to every fetch; undici removes its
  // abort listener only when the request is garbage-collected, so after 1 500 calls Node prints
  // a MaxListenersExceededWarning on every call, and that stderr spam would be measured as
  // client cost. Not a leak that matters here: lift the limit on that one signal.
  const signal = transport._abortController?.signal;
  if (signal) setMaxListeners(0, signal);
  return { client, transport };
}

export async function closeSdk({ client, transport }, kind) {
  const bounded = (p) => Promise.race([p.catch(() => {}), new Promise((r) => setTimeout(r, 3000).unref())]);
  if (kind === 'http') await bounded(transport.terminateSession());
  await bounded(client.close());
}
