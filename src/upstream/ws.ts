// WebSocket client transport (subprotocol `mcp`, as the SDK's WebSocket transports use): one
// JSON-RPC message per text frame, in both directions. Config headers go on the upgrade request.

import { WebSocket, type RawData } from 'ws';
import type { Incoming, JsonRpcId } from '../jsonrpc/message.js';
import type { Logger } from '../observe/logger.js';
import type { FrameError } from '../transport/transport.js';
import { parseWsMessage, sendOverWs, WS_CLOSE_GRACE_MS, WS_SUBPROTOCOL } from '../transport/ws-frames.js';
import type { RemoteTransport } from './connect.js';
import { safeUrl } from './fetch.js';

/** A server that accepts TCP but never completes the upgrade must not hang the startup. */
const HANDSHAKE_TIMEOUT_MS = 10_000;

export class WsTransport implements RemoteTransport {
  onmessage?: (value: unknown, related?: JsonRpcId) => void;
  onframeerror?: (err: FrameError) => void;
  onclose?: (reason: string) => void;
  /** Resolves when the socket is open (sends before that are held by the caller). */
  readonly ready: Promise<void>;
  readonly expired = false;

  private readonly ws: WebSocket;
  private closed = false;
  /** ws reports the cause in 'error' and then emits 'close' with only a code. */
  private lastError: string | undefined;
  private readonly socketClosed: Promise<void>;
  private readonly where: string;

  constructor(url: string, headers: Record<string, string>, maxBytes: number, log: Logger) {
    this.where = safeUrl(url);
    this.ws = new WebSocket(url, WS_SUBPROTOCOL, {
      headers,
      // ws's default is 100 MiB; a larger frame closes the socket with 1009.
      maxPayload: maxBytes,
      handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
      followRedirects: false,
    });
    this.ready = new Promise((resolve) => this.ws.once('open', () => resolve()));
    this.socketClosed = new Promise((resolve) => this.ws.once('close', () => resolve()));
    this.ws.on('open', () => {
      // A server that ignores the subprotocol still speaks JSON-RPC frames in practice.
      if (this.ws.protocol !== WS_SUBPROTOCOL) log.debug({ protocol: this.ws.protocol }, 'WebSocket server did not select the mcp subprotocol');
    });
    this.ws.on('message', (data, isBinary) => this.receive(data, isBinary));
    this.ws.on('error', (err) => (this.lastError ??= err.message));
    this.ws.on('close', (code, reason) => {
      const why = this.lastError ?? `closed by the server (code ${code}${reason.length ? `: ${reason.toString('utf8')}` : ''})`;
      this.finish(`WebSocket ${this.where}: ${why}`);
    });
  }

  send(msg: Incoming): void {
    if (this.closed || this.ws.readyState !== WebSocket.OPEN) return;
    sendOverWs(this.ws, msg);
  }

  async close(): Promise<void> {
    if (!this.closed) this.finish('closed');
    if (this.ws.readyState === WebSocket.CLOSED) return;
    this.ws.close(1000);
    const timer = setTimeout(() => this.ws.terminate(), WS_CLOSE_GRACE_MS);
    await this.socketClosed;
    clearTimeout(timer);
  }

  private receive(data: RawData, isBinary: boolean): void {
    if (this.closed) return;
    if (isBinary) return this.onframeerror?.({ ok: false, error: 'parse', detail: 'binary WebSocket frame (MCP uses text frames)' });
    const frame = parseWsMessage(data);
    if (frame.ok) this.onmessage?.(frame.value);
    else this.onframeerror?.(frame);
  }

  private finish(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.(reason);
  }
}
