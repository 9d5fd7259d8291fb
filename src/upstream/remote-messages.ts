// What both HTTP client transports need of the messages they carry: the id of the request in an
// outgoing message, and the synthetic answer that fails a pending request at once.

import { errorResponse, type Incoming, type JsonRpcId, type JsonRpcResponse } from '../jsonrpc/message.js';
import { MuxError } from '../protocol/mcp.js';

/** The synthetic answer that fails a pending request at once (MuxError.UpstreamUnavailable). */
export function unavailable(id: JsonRpcId, message: string): JsonRpcResponse {
  return errorResponse(id, { code: MuxError.UpstreamUnavailable, message });
}

/** Id of the request in an outgoing message (mcpmux never sends batches of requests upstream). */
export function requestIdOf(msg: Incoming): JsonRpcId | undefined {
  const m = (Array.isArray(msg) ? msg[0] : msg) as { id?: JsonRpcId; method?: unknown } | undefined;
  return m && typeof m.method === 'string' && m.id !== undefined ? m.id : undefined;
}
