// The W3C trace context mcpmux sends with a request to an upstream, when tracing is on
// (observe/tracing.ts): in `params._meta.traceparent` / `tracestate` for every transport (the
// place MCP's semantic conventions name), and in the `traceparent` / `tracestate` HTTP headers
// for HTTP upstreams. The upstream layer knows nothing of OpenTelemetry: it is handed a
// function at construction (UpstreamDeps.traceContext), absent when tracing is off, and then
// nothing here runs and a host's own `_meta.traceparent` goes on untouched like any `_meta`.

import type { JsonRpcId } from '../jsonrpc/message.js';
import type { Params } from '../protocol/mcp.js';

/** A W3C trace context, already formatted (`traceparent` is `00-<trace id>-<span id>-<flags>`). */
export interface TraceContext {
  traceparent: string;
  tracestate?: string;
}

/**
 * The context for one request going upstream: `context` is what was passed with it
 * (CallOptions.context: the router's call), `id` the id it goes with. Undefined: none (a request
 * of mcpmux's own).
 */
export type TraceContextOf = (context: unknown, id: JsonRpcId) => TraceContext | undefined;

/** Where the HTTP upstream transports find the context to put in headers (not serialized: a symbol). */
export const TRACE_HEADERS = Symbol('mcpmux.traceHeaders');

type Traced = Params & { [TRACE_HEADERS]?: TraceContext };

/**
 * `params` with the context in its `_meta` (a copy: the host's params stay as received). A
 * `tracestate` the host sent with its own context does not go on beside ours: it belongs to
 * a `traceparent` the upstream no longer sees.
 */
export function withTraceContext(params: Params | undefined, tc: TraceContext): Params {
  const meta: Params = { ...(params?._meta as Params | undefined), traceparent: tc.traceparent };
  if (tc.tracestate) meta.tracestate = tc.tracestate;
  else delete meta.tracestate;
  const out: Traced = { ...params, _meta: meta };
  out[TRACE_HEADERS] = tc;
  return out;
}

/** Sets the trace headers of an HTTP request carrying `msg`, when mcpmux traced it. */
export function traceHeaders(h: Headers, msg: unknown): void {
  const tc = ((msg as { params?: Traced } | undefined)?.params)?.[TRACE_HEADERS];
  if (!tc) return;
  h.set('traceparent', tc.traceparent);
  if (tc.tracestate) h.set('tracestate', tc.tracestate);
  else h.delete('tracestate');
}
