// A host's W3C trace context in the HTTP headers of its POST (`traceparent`, `tracestate`;
// Streamable HTTP's POST, and a legacy SSE host's POST /messages),
// taken as if it were in each request's `params._meta` when the request has none there: the
// MCP semantic conventions put it in `_meta`, but an HTTP client instrumented by OpenTelemetry
// sends the headers. Only with tracing on (HttpServerOptions.traceHeaders): with it off, the
// message stays exactly as the host sent it. `_meta` wins over the headers (it is per
// message; one POST may carry a batch).

import type { IncomingMessage } from 'node:http';

export function adoptTraceHeaders(req: IncomingMessage, value: unknown): void {
  const traceparent = req.headers.traceparent;
  if (typeof traceparent !== 'string') return;
  const tracestate = req.headers.tracestate;
  for (const item of Array.isArray(value) ? value : [value]) {
    if (typeof item !== 'object' || item === null || typeof (item as { method?: unknown }).method !== 'string' || !('id' in item)) continue;
    const msg = item as { params?: unknown };
    if (msg.params !== undefined && (typeof msg.params !== 'object' || msg.params === null || Array.isArray(msg.params))) continue;
    const params = (msg.params ??= {}) as Record<string, unknown>;
    const meta = params._meta;
    if (meta !== undefined && (typeof meta !== 'object' || meta === null)) continue;
    const m = (params._meta ??= {}) as Record<string, unknown>;
    if (m.traceparent !== undefined) continue;
    m.traceparent = traceparent;
    if (typeof tracestate === 'string' && m.tracestate === undefined) m.tracestate = tracestate;
  }
}
