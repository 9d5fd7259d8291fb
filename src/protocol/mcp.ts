// MCP-level constants and small helpers shared by the host side and the upstream side.

import { TOO_MANY_IN_FLIGHT, type CancelProtocol } from '../jsonrpc/endpoint.js';
import type { JsonRpcId } from '../jsonrpc/message.js';

export const McpError = {
  /** The SDK's code for a closed connection; we use it when an upstream goes away mid-request. */
  ConnectionClosed: -32000,
  RequestTimeout: -32001,
  ResourceNotFound: -32002,
  UrlElicitationRequired: -32042,
  /** What the endpoint rejects a request with when its own side cancelled it. */
  RequestCancelled: -32800,
} as const;

/**
 * mcpmux's own error codes. They sit outside -32768..-32000 (JSON-RPC's reserved range, part
 * of which MCP already uses) so no peer mistakes them for a protocol error of its own.
 */
export const MuxError = {
  UpstreamUnavailable: -31001,
  PolicyDenied: -31002,
  /** Set by the JSON-RPC endpoint itself (it enforces the limit). */
  TooManyInFlight: TOO_MANY_IN_FLIGHT,
  /** Too many sessions (the HTTP front's 503s), or too many per-session upstream connections. */
  Overloaded: -31004,
  /** A rate limit refused a request that is not a tools/call; `data.retryAfterMs` says when to retry. */
  RateLimited: -31005,
  /** A pinned tool whose definition changed (or that is new) is held until an admin approves it. */
  ToolChanged: -31006,
  /** What the call needs lives in the shared store (Redis), which is unreachable, and store.onError is "closed". */
  StoreUnavailable: -31007,
} as const;

export const cancelProtocol: CancelProtocol = {
  method: 'notifications/cancelled',
  params: (requestId: JsonRpcId, reason: string) => ({ requestId, reason }),
  requestId: (params) => {
    const id = params?.requestId;
    return typeof id === 'string' || typeof id === 'number' ? id : undefined;
  },
  reason: (params) => (typeof params?.reason === 'string' ? params.reason : undefined),
};

export const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export function logLevelRank(level: unknown): number {
  return LOG_LEVELS.indexOf(level as LogLevel);
}

export type Params = Record<string, unknown>;

/** Reads `params._meta.progressToken`. */
export function progressTokenOf(params: Params | undefined): string | number | undefined {
  const meta = params?._meta as Params | undefined;
  const t = meta?.progressToken;
  return typeof t === 'string' || typeof t === 'number' ? t : undefined;
}

/** Returns params whose `_meta.progressToken` is `token`; only `_meta` is copied. */
export function withProgressToken(params: Params, token: string | number): Params {
  const meta = params._meta as Params | undefined;
  params._meta = meta ? { ...meta, progressToken: token } : { progressToken: token };
  return params;
}
