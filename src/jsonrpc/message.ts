// JSON-RPC 2.0 message shapes and guards. No MCP knowledge lives here.
//
// Messages are kept as the plain objects JSON.parse produced: unknown fields ride along
// untouched, and nothing is copied or re-parsed on the way through the proxy.

export type JsonRpcId = string | number;

export interface JsonRpcRequest {
  jsonrpc: '2.0';
  id: JsonRpcId;
  method: string;
  params?: Record<string, unknown>;
}

export interface JsonRpcNotification {
  jsonrpc: '2.0';
  method: string;
  params?: Record<string, unknown>;
}

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

export interface JsonRpcSuccess {
  jsonrpc: '2.0';
  id: JsonRpcId;
  result: Record<string, unknown>;
}

export interface JsonRpcFailure {
  jsonrpc: '2.0';
  id: JsonRpcId | null;
  error: JsonRpcErrorObject;
}

export type JsonRpcResponse = JsonRpcSuccess | JsonRpcFailure;
export type JsonRpcMessage = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse;

/** What a transport hands upward: one message or a batch (an array). */
export type Incoming = JsonRpcMessage | JsonRpcMessage[];

export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
} as const;

/** An error that travels as a JSON-RPC error object. */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'RpcError';
  }

  static from(obj: JsonRpcErrorObject): RpcError {
    return new RpcError(obj.code, obj.message, obj.data);
  }

  toJSON(): JsonRpcErrorObject {
    return this.data === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, data: this.data };
  }
}

function isId(v: unknown): v is JsonRpcId {
  return typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));
}

export type Classified =
  | { kind: 'request'; msg: JsonRpcRequest }
  | { kind: 'notification'; msg: JsonRpcNotification }
  | { kind: 'response'; msg: JsonRpcResponse }
  | { kind: 'invalid'; id: JsonRpcId | null; reason: string }
  /** Looks like a response but is not a valid one: never answered (it would look like a response to the peer). */
  | { kind: 'bad-response'; id: JsonRpcId | null; reason: string };

/** Sorts one parsed value into its JSON-RPC kind, or says why it is not a valid message. */
export function classify(v: unknown): Classified {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    return { kind: 'invalid', id: null, reason: 'a JSON-RPC message must be an object' };
  }
  const m = v as Record<string, unknown>;
  const id = isId(m.id) ? m.id : null;
  if (m.jsonrpc !== '2.0') return { kind: 'invalid', id, reason: 'jsonrpc must be "2.0"' };
  if ('method' in m) {
    if (typeof m.method !== 'string') return { kind: 'invalid', id, reason: 'method must be a string' };
    if (m.params !== undefined && (typeof m.params !== 'object' || m.params === null || Array.isArray(m.params))) {
      // MCP only uses by-name params.
      return { kind: 'invalid', id, reason: 'params must be an object' };
    }
    if (!('id' in m)) return { kind: 'notification', msg: m as unknown as JsonRpcNotification };
    if (id === null) return { kind: 'invalid', id: null, reason: 'id must be a string or a number' };
    return { kind: 'request', msg: m as unknown as JsonRpcRequest };
  }
  if ('result' in m || 'error' in m) {
    if ('error' in m) {
      const e = m.error as Record<string, unknown> | null;
      if (typeof e !== 'object' || e === null || typeof e.code !== 'number' || typeof e.message !== 'string') {
        return { kind: 'bad-response', id, reason: 'error must be {code: number, message: string}' };
      }
    } else if (typeof m.result !== 'object' || m.result === null) {
      return { kind: 'bad-response', id, reason: 'result must be an object' };
    }
    if (id === null && !('error' in m)) return { kind: 'bad-response', id: null, reason: 'response without id' };
    return { kind: 'response', msg: m as unknown as JsonRpcResponse };
  }
  return { kind: 'invalid', id, reason: 'neither a request, a notification nor a response' };
}

export function isFailure(r: JsonRpcResponse): r is JsonRpcFailure {
  return (r as JsonRpcFailure).error !== undefined;
}

export function errorResponse(id: JsonRpcId | null, err: JsonRpcErrorObject): JsonRpcFailure {
  return { jsonrpc: '2.0', id, error: err };
}
