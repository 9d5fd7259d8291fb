// The WebSocket host endpoint at `/ws`: the `ws` package in noServer mode on the daemon's HTTP
// server. One JSON-RPC message (or batch) per frame, subprotocol `mcp` (as the SDK's
// WebSocketClientTransport asks). Browsers do not apply CORS to WebSockets, so the Host and
// Origin checks and the bearer token are done on the upgrade request itself, before the
// handshake; a refusal is a plain HTTP answer on the socket.

import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { wireBytes, type Wire } from '../../jsonrpc/framing.js';
import type { Incoming } from '../../jsonrpc/message.js';
import type { Logger } from '../../observe/logger.js';
import { afterAuth, type AuthResult, type Guard } from './guard.js';
import { HttpRpcCode } from './respond.js';
import { splitTarget } from './url.js';
import { parseWsMessage, sendOverWs, WS_CLOSE_GRACE_MS, WS_SUBPROTOCOL } from '../ws-frames.js';
import { ConnectionSession, type OpenSession, type SessionRegistry } from './sessions.js';
import { Backlog, maxBacklogBytes, unsentBytes } from '../backlog.js';

export interface WsOptions {
  registry: SessionRegistry;
  open: OpenSession;
  guard: Guard;
  maxMessageBytes: number;
  log: Logger;
}

/** The close code of a session whose JWT expired (RFC 6455 7.4.1: policy violation). */
export const WS_TOKEN_EXPIRED = 1008;

class WsSession extends ConnectionSession {
  readonly kind = 'ws' as const;
  /** Cleared on each keep-alive ping, set by the pong: still false at the next one = dead peer. */
  private alive = true;
  /** What waits for a host that does not read (backlog.ts). */
  private readonly backlog: Backlog;

  constructor(
    private readonly ws: WebSocket,
    /** Bytes that may wait for the peer before the connection is dropped (backlog.ts). */
    maxBacklog: number,
    log: Logger,
  ) {
    super();
    this.backlog = new Backlog({
      transport: 'ws',
      log,
      maxBytes: maxBacklog,
      waiting: () => ws.bufferedAmount,
      unsent: () => unsentBytes((ws as unknown as { _socket?: unknown })._socket),
      cut: (why) => {
        ws.terminate();
        this.finish(why);
      },
      resend: (msg) => this.send(msg),
      // A host that does not read its answers: its next requests wait in its own socket.
      onBehind: (behind) => (behind ? ws.pause() : ws.resume()),
    });
    ws.on('message', (data: RawData) => this.receive(data));
    ws.on('pong', () => (this.alive = true));
    ws.on('close', (code: number) => this.finish(`websocket closed (${code})`));
    // Oversized frames (maxPayload) and protocol errors end the connection; 'close' follows.
    ws.on('error', (e: Error) => this.finish(`websocket error: ${e.message}`));
  }

  private receive(data: RawData): void {
    // Text and binary frames alike are read as UTF-8 JSON.
    const frame = parseWsMessage(data);
    if (frame.ok) this.onmessage?.(frame.value, undefined, frame.bytes);
    else this.onframeerror?.(frame);
  }

  send(msg: Incoming): Wire | undefined {
    if (this.closed || this.ws.readyState !== this.ws.OPEN) return undefined;
    if (!this.backlog.admit(msg)) return undefined;
    const wire = sendOverWs(this.ws, msg);
    this.backlog.wrote(wireBytes(wire));
    return wire;
  }

  protected override finish(reason: string): void {
    this.backlog.release();
    super.finish(reason);
  }

  async close(): Promise<void> {
    if (this.ws.readyState === this.ws.OPEN || this.ws.readyState === this.ws.CONNECTING) {
      this.ws.close(1000, 'session closed');
      setTimeout(() => this.ws.terminate(), WS_CLOSE_GRACE_MS).unref();
    }
    this.finish('closed');
  }

  /**
   * The upgrade's JWT has expired: closed with 1008 (policy violation) and the reason
   * "token expired"; the host reconnects with a new JWT. Its calls in flight end as in any
   * closed session.
   */
  protected expired(): void {
    if (this.ws.readyState === this.ws.OPEN || this.ws.readyState === this.ws.CONNECTING) {
      this.ws.close(WS_TOKEN_EXPIRED, 'token expired');
      setTimeout(() => this.ws.terminate(), WS_CLOSE_GRACE_MS).unref();
    }
    this.finish('token expired');
  }

  keepalive(): void {
    if (!this.alive) {
      this.ws.terminate();
      return;
    }
    this.alive = false;
    this.ws.ping();
  }

}

export class WsEndpoint {
  private readonly wss: WebSocketServer;

  constructor(private readonly opts: WsOptions) {
    this.wss = new WebSocketServer({
      noServer: true,
      maxPayload: opts.maxMessageBytes,
      perMessageDeflate: false,
      // Clients that offer subprotocols must offer `mcp`; clients that offer none are accepted.
      handleProtocols: (protocols) => (protocols.has(WS_SUBPROTOCOL) ? WS_SUBPROTOCOL : false),
    });
  }

  /** The http server's 'upgrade' for `/ws`. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const { guard } = this.opts;
    const verdict = guard.check(req);
    if (!verdict.ok) return refuse(socket, 403, verdict.message);
    // A JWT is checked asynchronously: ws drops the upgrade itself if the socket is gone by then.
    afterAuth(guard.authenticate(req), (auth) => this.admitted(req, socket, head, auth), (err) => {
      this.opts.log.error({ err: (err as Error)?.message ?? String(err) }, 'websocket upgrade failed');
      socket.destroy();
    });
  }

  private admitted(req: IncomingMessage, socket: Duplex, head: Buffer, auth: AuthResult): void {
    const { guard, registry } = this.opts;
    if (!auth.ok) return refuse(socket, 401, auth.message, { 'www-authenticate': auth.challenge });
    // The upgrade URL's `?toolset=` (else the token's) is the session's, for its whole life.
    const who = guard.who(splitTarget(req.url ?? '/').query, auth);
    if (!who.ok) return refuse(socket, who.status, who.message);
    const offered = req.headers['sec-websocket-protocol'];
    if (offered !== undefined && !offered.split(',').some((p) => p.trim() === WS_SUBPROTOCOL)) {
      return refuse(socket, 400, `Bad Request: the WebSocket subprotocol must be "${WS_SUBPROTOCOL}"`);
    }
    const full = registry.refusal(auth.client);
    if (full) return refuse(socket, 503, full, { 'retry-after': '5' }, HttpRpcCode.Overloaded);
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const session = new WsSession(ws, maxBacklogBytes(this.opts.maxMessageBytes), this.opts.log);
      const host = registry.open(session, this.opts.open, who);
      this.opts.log.debug({ session: host.id, client: who.client, toolset: who.toolset }, 'websocket session opened');
    });
  }

  close(): void {
    this.wss.close();
  }
}

/** An HTTP answer instead of the 101, then the socket is closed. */
function refuse(socket: Duplex, status: number, message: string, headers: Record<string, string> = {}, code: number = HttpRpcCode.Transport): void {
  const body = JSON.stringify({ jsonrpc: '2.0', id: null, error: { code, message } });
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`;
  for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
  socket.once('error', () => {}); // the peer may already be gone
  socket.end(`${head}\r\n${body}`);
}
