// JSON-RPC over a WebSocket (`ws` package), host side and upstream side alike: the
// subprotocol, reading a message, writing one.

import type { RawData, WebSocket } from 'ws';
import { encodeChunks, parseBytes, type Wire } from '../jsonrpc/framing.js';
import type { Incoming } from '../jsonrpc/message.js';

/** The subprotocol MCP over WebSocket uses (the SDK's WebSocketClientTransport asks for it). */
export const WS_SUBPROTOCOL = 'mcp';
/** After a close frame, how long the peer gets to answer before the socket is destroyed. */
export const WS_CLOSE_GRACE_MS = 1000;

/** One received message, whatever shape `ws` delivered it in, read as UTF-8 JSON. */
export function parseWsMessage(data: RawData): ReturnType<typeof parseBytes> {
  return parseBytes(Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data));
}

/**
 * One text message per JSON-RPC message. A message carrying raw values (opaque.ts) goes out as
 * fragments of that one message, so the large values are never copied into a single buffer.
 */
export function sendOverWs(ws: WebSocket, msg: Incoming): Wire {
  const wire = encodeChunks(msg);
  if (typeof wire === 'string') {
    ws.send(wire);
    return wire;
  }
  const last = wire.length - 1;
  wire.forEach((piece, i) => ws.send(piece, { binary: false, fin: i === last }));
  return wire;
}
