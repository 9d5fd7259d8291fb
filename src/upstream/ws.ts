// WebSocket client transport (subprotocol `mcp`, as the SDK's WebSocket transports use): one
// JSON-RPC message per text frame, in both directions. Config headers go on the upgrade request.
//
// A server that stops reading must not grow mcpmux: past maxBacklogBytes() waiting in the send
// buffer, requests fail at once (-31001) instead of being queued (answers and cancellations,
// bounded by the requests, still go). A server that is gone without a FIN, or no longer reads,
// is found by a ping every WS_PING_MS: no pong by the next one and the connection is dropped
// (the upstream restarts as after any lost connection).

import { WebSocket, type RawData } from 'ws';
import { RpcError, type Incoming, type JsonRpcId } from '../jsonrpc/message.js';
import type { Logger } from '../observe/logger.js';
import { MuxError } from '../protocol/mcp.js';
import { carriesRequest, maxBacklogBytes, notReading } from '../transport/backlog.js';
import type { FrameError } from '../transport/transport.js';
import { parseWsMessage, sendOverWs, WS_CLOSE_GRACE_MS, WS_SUBPROTOCOL } from '../transport/ws-frames.js';
import type { RemoteTransport } from './connect.js';
import { safeUrl } from './fetch.js';

/** A server that accepts TCP but never completes the upgrade must not hang the startup. */
const HANDSHAKE_TIMEOUT_MS = 10_000;
/** How often the server is pinged; one that has not answered by the next ping is gone. */
export const WS_PING_MS = 30_000;
/** Tests shorten WS_PING_MS with this (milliseconds). */
export const WS_PING_ENV = 'MCPMUX_WS_PING_MS';

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
  /** Bytes that may wait in the send buffer before requests are refused. */
  private readonly maxBuffered: number;
  /** Cleared by each ping, set by its pong: still clear at the next ping = the server is gone. */
  private answered = true;
  private pinger: NodeJS.Timeout | undefined;

  constructor(url: string, headers: Record<string, string>, maxBytes: number, log: Logger) {
    this.where = safeUrl(url);
    this.maxBuffered = maxBacklogBytes(maxBytes);
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
      const every = pingMs();
      this.pinger = setInterval(() => this.ping(every), every);
      this.pinger.unref();
    });
    this.ws.on('pong', () => (this.answered = true));
    this.ws.on('message', (data, isBinary) => this.receive(data, isBinary));
    this.ws.on('error', (err) => (this.lastError ??= err.message));
    this.ws.on('close', (code, reason) => {
      clearInterval(this.pinger);
      const why = this.lastError ?? `closed by the server (code ${code}${reason.length ? `: ${reason.toString('utf8')}` : ''})`;
      this.finish(`WebSocket ${this.where}: ${why}`);
    });
  }

  /** Throws an RpcError for a request while the server is not reading (see the top of this file). */
  send(msg: Incoming): void {
    if (this.closed || this.ws.readyState !== WebSocket.OPEN) return;
    const waiting = this.ws.bufferedAmount;
    if (waiting > this.maxBuffered && carriesRequest(msg)) {
      throw new RpcError(MuxError.UpstreamUnavailable, `WebSocket ${this.where}: ${notReading(waiting, 'the server')}; the request was not sent`);
    }
    sendOverWs(this.ws, msg);
  }

  private ping(every: number): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    if (!this.answered) {
      this.lastError = `no answer to a ping within ${every} ms (the server is gone or not reading)`;
      this.ws.terminate();
      return;
    }
    this.answered = false;
    this.ws.ping();
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

function pingMs(): number {
  const v = Number(process.env[WS_PING_ENV]);
  return Number.isFinite(v) && v > 0 ? v : WS_PING_MS;
}
