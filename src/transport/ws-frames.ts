// Writing one JSON-RPC message to a WebSocket (`ws` package), host side and upstream side alike.

import type { WebSocket } from 'ws';
import { encodeChunks } from '../jsonrpc/framing.js';
import type { Incoming } from '../jsonrpc/message.js';

/**
 * One text message per JSON-RPC message. A message carrying raw values (opaque.ts) goes out as
 * fragments of that one message, so the large values are never copied into a single buffer.
 */
export function sendOverWs(ws: WebSocket, msg: Incoming): void {
  const wire = encodeChunks(msg);
  if (typeof wire === 'string') return ws.send(wire);
  const last = wire.length - 1;
  wire.forEach((piece, i) => ws.send(piece, { binary: false, fin: i === last }));
}
