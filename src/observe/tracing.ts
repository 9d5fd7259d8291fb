// OpenTelemetry traces, fed by the events on the bus (events.ts) like the audit log and the
// metrics: nothing on the data path calls this file, and it is loaded (with the OpenTelemetry
// packages) only when tracing is on (runtime.ts imports it dynamically). Spans follow the
// OpenTelemetry MCP semantic conventions (docs/events.md has the table of which event feeds
// which attribute):
//
// - one SERVER span per host request, started lazily: when its first upstream request needs a
//   parent, else when it ends (with the time it arrived). Its parent is the host's context
//   (`params._meta.traceparent`); a malformed one is ignored (a new trace). A retry of a call
//   mcpmux answered `input_required` is a child of the call's span.
// - one CLIENT span per upstream request serving a host request, child of the SERVER span,
//   started as the request goes out: its context is what the upstream receives, in `_meta`
//   (and HTTP headers), through the function handed down to the connections (traceContext).
// - one SERVER span per server-initiated request (sampling, elicitation, roots), in the trace
//   of the call it came with: the upstream's own `_meta.traceparent` if it sent one, else the
//   call mcpmux knows it belongs to (HTTP upstreams say), else the one call of that session in
//   flight to that upstream.
//
// Requests mcpmux makes on its own (list pages, re-subscribes, the handshake) get no span.
// Export is batched (bounded queue) and never awaited by a call; an unreachable collector is
// said once in the log, and again once it answers.

import dc from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, defaultTextMapGetter, defaultTextMapSetter, trace, type Attributes, type Context, type Span } from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace';
import type { TelemetryConfig } from '../config/types.js';
import type { JsonRpcId } from '../jsonrpc/message.js';
import { declaredVersion } from '../protocol/modern.js';
import { negotiateVersion } from '../protocol/versions.js';
import type { Call } from '../router/forward.js';
import type { TraceContext } from '../upstream/trace-context.js';
import { fullArguments } from './audit.js';
import { CHANNEL, type RequestEvent, type SessionEvent, type UpstreamRequestEvent } from './events.js';
import type { Logger } from './logger.js';

export interface TracingOptions {
  telemetry: TelemetryConfig;
  version: string;
  log: Logger;
  /** The audit settings in force (a reload may change them): tool arguments go in a span only when `full`. */
  audit: () => { arguments: 'none' | 'redacted' | 'full'; redact: readonly string[] };
  /** The surface mode decided for a session (`all`, `search`), if any. */
  surfaceMode?: (sessionId: string) => string | undefined;
}

/** An upstream request under way, for the host request it serves. */
interface Leg {
  /** What the router sent it with (its Call). */
  context: unknown;
  span: Span;
  server: string;
  method: string;
  host: RequestEvent;
}

/** How long a shutdown waits for the last spans to go out. */
const SHUTDOWN_MS = 3000;

const propagator = new W3CTraceContextPropagator();

export class Tracing {
  private readonly provider: TracerProvider;
  private readonly tracer;
  /** SERVER spans of requests, once started (lazily). */
  private readonly spans = new WeakMap<RequestEvent, Span>();
  /** Upstream requests under way, by the host request they serve. */
  private readonly legs = new WeakMap<RequestEvent, Leg[]>();
  /** Upstream requests under way, by server: where a stdio upstream's sampling belongs. */
  private readonly inFlight = new Map<string, Set<Leg>>();
  /** Each session's protocol version (its initialize's), until it closes. */
  private readonly versions = new Map<string, string>();
  /** Each open session's `mcp.session.id`: the id its host knows it by, else mcpmux's (see sessionOpened). */
  private readonly sessionIds = new Map<string, string>();
  private readonly subscriptions: [string, (msg: unknown) => void][] = [];
  /** The `audit.redact` last seen, and it split at '.' (redactPaths). */
  private redactOf: readonly string[] | undefined;
  private redactSplit: string[][] = [];

  constructor(private readonly opts: TracingOptions) {
    const { telemetry } = opts;
    const exporter = new OTLPTraceExporter({
      // Unset: the OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT variables decide, else localhost:4318.
      ...(telemetry.endpoint !== undefined && { url: `${telemetry.endpoint.replace(/\/+$/, '')}/v1/traces` }),
      headers: telemetry.headers,
    });
    const resource = defaultResource()
      .merge(resourceFromAttributes({ 'service.name': 'mcpmux', 'service.version': opts.version }))
      // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, when set, say better.
      .merge(detectResources({ detectors: [envDetector] }));
    this.provider = new TracerProvider({
      resource,
      sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(telemetry.sampleRatio) }),
      // The queue is bounded (2048 spans, or OTEL_BSP_MAX_QUEUE_SIZE): past it spans are dropped, never waited for.
      spanProcessors: [new BatchSpanProcessor({ exporter: new SaidOnce(exporter, opts.log, where(telemetry.endpoint)), ...batchSettings() })],
    });
    this.tracer = this.provider.getTracer('mcpmux', opts.version);
  }

  start(): void {
    this.on(CHANNEL.requestEnd, (ev: RequestEvent) => this.ended(ev));
    this.on(CHANNEL.upstreamRequest, (ev: UpstreamRequestEvent) => this.upstreamEnded(ev));
    this.on(CHANNEL.sessionOpen, (ev: SessionEvent) => this.sessionIds.set(ev.sessionId, ev.mcpSessionId ?? ev.sessionId));
    this.on(CHANNEL.sessionClose, (ev: SessionEvent) => {
      this.versions.delete(ev.sessionId);
      this.sessionIds.delete(ev.sessionId);
    });
  }

  /** Stops listening, and sends what is queued (bounded). */
  async close(): Promise<void> {
    for (const [name, fn] of this.subscriptions.splice(0)) dc.unsubscribe(name, fn);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.provider.shutdown().catch(() => {}), new Promise<void>((r) => (timer = setTimeout(r, SHUTDOWN_MS)))]);
    clearTimeout(timer);
  }

  /**
   * Handed down to the upstream connections (UpstreamDeps.traceContext): the context an upstream
   * request carries, its CLIENT span's. Undefined for mcpmux's own requests.
   */
  readonly traceContext = (context: unknown, id: JsonRpcId): TraceContext | undefined => {
    try {
      const call = context as Call | undefined;
      const host = call?.event;
      if (!host) return undefined;
      let legs = this.legs.get(host);
      let leg = legs?.find((l) => l.context === context);
      if (!leg) {
        leg = { context, span: this.clientSpan(call!, host, id), server: call!.upstream.name, method: call!.method, host };
        if (!legs) this.legs.set(host, (legs = []));
        legs.push(leg);
        let open = this.inFlight.get(leg.server);
        if (!open) this.inFlight.set(leg.server, (open = new Set()));
        open.add(leg);
      }
      const carrier: Partial<TraceContext> = {};
      propagator.inject(trace.setSpan(ROOT_CONTEXT, leg.span), carrier, defaultTextMapSetter);
      return carrier.traceparent ? (carrier as TraceContext) : undefined;
    } catch (err) {
      this.failed(err);
      return undefined;
    }
  };

  private on<T>(name: string, fn: (ev: T) => void): void {
    // A span must never take the data path down: a failure here costs that span only.
    const safe = (msg: unknown): void => {
      try {
        fn(msg as T);
      } catch (err) {
        this.failed(err);
      }
    };
    dc.subscribe(name, safe);
    this.subscriptions.push([name, safe]);
  }

  private failed(err: unknown): void {
    this.opts.log.warn({ err: (err as Error).message }, 'tracing subscriber failed');
  }

  // ---- spans --------------------------------------------------------------------------------

  /** The SERVER span of a request, started now if it was not yet (at the time it arrived). */
  private serverSpan(ev: RequestEvent): Span {
    const known = this.spans.get(ev);
    if (known) return known;
    if (ev.method === 'initialize' && ev.sessionId !== undefined) this.versions.set(ev.sessionId, negotiateVersion(ev.params?.protocolVersion));
    const span = this.tracer.startSpan(spanName(ev.method, ev.name), { kind: SpanKind.SERVER, startTime: performance.timeOrigin + ev.t0, attributes: this.requestAttributes(ev) }, this.parentOf(ev));
    this.spans.set(ev, span);
    return span;
  }

  /** Where a request's span hangs: see the top of this file. */
  private parentOf(ev: RequestEvent): Context {
    if (ev.roundOf) return trace.setSpan(ROOT_CONTEXT, this.serverSpan(ev.roundOf));
    const own = extract(ev.params);
    if (own || ev.direction === 'host-to-server') return own ?? ROOT_CONTEXT;
    // A server-initiated request the upstream sent without a context of its own.
    const cause = ev.cause && (this.legs.get(ev.cause)?.find((l) => l.server === ev.server)?.span ?? this.spans.get(ev.cause));
    if (cause) return trace.setSpan(ROOT_CONTEXT, cause);
    // The one request in flight to that server for this session, if exactly one (a plain loop: no arrays per request).
    let only: Leg | undefined;
    for (const l of this.inFlight.get(ev.server ?? '') ?? []) {
      if (l.host.sessionId !== ev.sessionId) continue;
      if (only) return ROOT_CONTEXT;
      only = l;
    }
    return only ? trace.setSpan(ROOT_CONTEXT, only.span) : ROOT_CONTEXT;
  }

  private clientSpan(call: Call, host: RequestEvent, id: JsonRpcId): Span {
    const target = call.method === 'tools/call' || call.method === 'prompts/get' ? call.target?.upstreamName : undefined;
    const attributes: Attributes = {
      'mcp.method.name': call.method,
      'jsonrpc.request.id': String(id),
      'network.transport': call.upstream.config.transport === 'stdio' ? 'pipe' : 'tcp',
      'mcpmux.upstream': call.upstream.name,
    };
    const version = call.upstream.info?.protocolVersion;
    if (typeof version === 'string') attributes['mcp.protocol.version'] = version;
    this.targetAttributes(attributes, call.method, call.target?.upstreamName);
    return this.tracer.startSpan(spanName(call.method, target), { kind: SpanKind.CLIENT, attributes }, trace.setSpan(ROOT_CONTEXT, this.serverSpan(host)));
  }

  private upstreamEnded(ev: UpstreamRequestEvent): void {
    const host = ev.request;
    if (!host) return;
    const legs = this.legs.get(host);
    const i = legs?.findIndex((l) => l.server === ev.server && l.method === ev.method) ?? -1;
    if (i < 0) return;
    const leg = legs!.splice(i, 1)[0]!;
    if (ev.code !== undefined) failure(leg.span, String(ev.code));
    this.closeLeg(leg);
  }

  /** Ends an upstream request's CLIENT span and forgets it as in flight (its server's Set too, once empty). */
  private closeLeg(leg: Leg): void {
    const open = this.inFlight.get(leg.server);
    if (open) {
      open.delete(leg);
      if (open.size === 0) this.inFlight.delete(leg.server);
    }
    leg.span.end();
  }

  private ended(ev: RequestEvent): void {
    const span = this.serverSpan(ev);
    const a: Attributes = { 'mcpmux.outcome': ev.outcome ?? 'error' };
    if (ev.server !== undefined) a['mcpmux.upstream'] = ev.server;
    if (ev.upstreamName !== undefined && ev.upstreamName !== ev.name) a['mcpmux.upstream.name'] = ev.upstreamName;
    if (ev.rounds > 1) a['mcpmux.rounds'] = ev.rounds;
    if (ev.cacheHit !== undefined) a['mcpmux.cache.hit'] = ev.cacheHit;
    if (ev.code !== undefined) a['rpc.response.status_code'] = String(ev.code);
    if (ev.outcome === 'denied') a['mcpmux.policy.denied'] = true;
    if (ev.outcome === 'limited') {
      a['mcpmux.ratelimit.limited'] = true;
      if (ev.retryAfterMs !== undefined) a['mcpmux.ratelimit.retry_after_ms'] = ev.retryAfterMs;
    }
    if (ev.direction === 'host-to-server' && ev.sessionId !== undefined && ev.method.startsWith('tools/')) {
      const mode = this.opts.surfaceMode?.(ev.sessionId);
      if (mode) a['mcpmux.surface.mode'] = mode;
    }
    const args = this.argumentsOf(ev);
    if (args !== undefined) a['gen_ai.tool.call.arguments'] = args;
    span.setAttributes(a);
    const error = errorType(ev);
    if (error) failure(span, error);
    // Upstream requests it left open (their answers came after it was given up on) end with it.
    for (const leg of this.legs.get(ev)?.splice(0) ?? []) this.closeLeg(leg);
    span.end(performance.timeOrigin + ev.t0 + ev.durationMs);
  }

  private requestAttributes(ev: RequestEvent): Attributes {
    const a: Attributes = { 'mcp.method.name': ev.method, 'mcpmux.direction': ev.direction };
    if (ev.requestId !== null) a['jsonrpc.request.id'] = String(ev.requestId);
    if (ev.sessionId !== undefined) {
      // The conventions' session id is the one the host sees (Mcp-Session-Id over Streamable
      // HTTP, legacy SSE's sessionId); stdio and WebSocket have none on the wire, and carry
      // mcpmux's own. A stateless 2026-07-28 request is no session (no open event): none.
      const known = this.sessionIds.get(ev.sessionId);
      if (known !== undefined) a['mcp.session.id'] = known;
      a['mcpmux.session.id'] = ev.sessionId;
    }
    if (ev.client !== undefined) a['mcpmux.client'] = ev.client;
    if (ev.transport !== undefined) a['network.transport'] = ev.transport === 'stdio' ? 'pipe' : 'tcp';
    if (ev.transport !== undefined && ev.transport !== 'stdio') a['network.protocol.name'] = ev.transport === 'ws' ? 'websocket' : 'http';
    const version = declaredVersion(ev.params) ?? (ev.sessionId !== undefined ? this.versions.get(ev.sessionId) : undefined);
    if (version !== undefined) a['mcp.protocol.version'] = version;
    if (ev.server !== undefined) a['mcpmux.upstream'] = ev.server;
    this.targetAttributes(a, ev.method, ev.name ?? nameOf(ev));
    return a;
  }

  /** gen_ai.tool.name, gen_ai.prompt.name or mcp.resource.uri, as the method has one. */
  private targetAttributes(a: Attributes, method: string, name: string | undefined): void {
    if (name === undefined) return;
    if (method === 'tools/call') {
      a['gen_ai.tool.name'] = name;
      a['gen_ai.operation.name'] = 'execute_tool';
    } else if (method === 'prompts/get') a['gen_ai.prompt.name'] = name;
    else if (method.startsWith('resources/')) a['mcp.resource.uri'] = name;
  }

  /** Tool arguments, only where the audit log may keep them (`audit.arguments: "full"`), redacted as it does. */
  private argumentsOf(ev: RequestEvent): string | undefined {
    if (ev.direction !== 'host-to-server' || ev.method !== 'tools/call' || ev.params?.arguments === undefined) return undefined;
    const audit = this.opts.audit();
    if (audit.arguments !== 'full') return undefined;
    // The request has been answered: decoding its long values now costs the trace only.
    return JSON.stringify(fullArguments(ev.params, this.redactPaths(audit.redact)));
  }

  /** `audit.redact` split at '.', once per config (a reload gives a new array). */
  private redactPaths(redact: readonly string[]): readonly string[][] {
    if (this.redactOf !== redact) {
      this.redactOf = redact;
      this.redactSplit = redact.map((p) => p.split('.'));
    }
    return this.redactSplit;
  }
}

/**
 * The batch processor's settings from the standard OTEL_BSP_* variables (the trace SDK 2.x no
 * longer reads them itself); the SDK's defaults otherwise (5 s delay, 2048 queued, 512 a batch,
 * 30 s an export).
 */
function batchSettings(): { scheduledDelayMillis?: number; maxQueueSize?: number; maxExportBatchSize?: number; exportTimeoutMillis?: number } {
  const n = (name: string): number | undefined => {
    const v = Number(process.env[name]);
    return process.env[name]?.trim() && Number.isInteger(v) && v > 0 ? v : undefined;
  };
  const out: ReturnType<typeof batchSettings> = {};
  const delay = n('OTEL_BSP_SCHEDULE_DELAY');
  const queue = n('OTEL_BSP_MAX_QUEUE_SIZE');
  const batch = n('OTEL_BSP_MAX_EXPORT_BATCH_SIZE');
  const timeout = n('OTEL_BSP_EXPORT_TIMEOUT');
  if (delay !== undefined) out.scheduledDelayMillis = delay;
  if (queue !== undefined) out.maxQueueSize = queue;
  if (batch !== undefined) out.maxExportBatchSize = batch;
  if (timeout !== undefined) out.exportTimeoutMillis = timeout;
  return out;
}

/** `{mcp.method.name} {target}` (a tool or prompt name), or the method alone. */
function spanName(method: string, name: string | undefined): string {
  return (method === 'tools/call' || method === 'prompts/get') && name !== undefined ? `${method} ${name}` : method;
}

/** The tool or prompt name or URI in a request's params, when mcpmux did not name it (requests it refused early). */
function nameOf(ev: RequestEvent): string | undefined {
  const p = ev.params;
  const v = ev.method.startsWith('resources/') ? p?.uri : ev.method === 'tools/call' || ev.method === 'prompts/get' ? p?.name : undefined;
  return typeof v === 'string' ? v : undefined;
}

/** The context in a request's `_meta`, when it is a valid W3C one (else undefined: a new trace). */
function extract(params: Record<string, unknown> | undefined): Context | undefined {
  const meta = params?._meta;
  if (typeof meta !== 'object' || meta === null || typeof (meta as { traceparent?: unknown }).traceparent !== 'string') return undefined;
  const ctx = propagator.extract(ROOT_CONTEXT, meta, defaultTextMapGetter);
  return trace.getSpanContext(ctx) ? ctx : undefined;
}

/**
 * error.type as the conventions say: the JSON-RPC error code, `tool_error` for a tool result
 * with isError, or mcpmux's outcome when no answer was written (cancelled, timeout).
 */
function errorType(ev: RequestEvent): string | undefined {
  if (ev.code !== undefined) return String(ev.code);
  switch (ev.outcome) {
    case 'ok':
    case undefined:
      return undefined;
    case 'error':
      return 'tool_error';
    case 'limited':
      return 'rate_limited';
    default:
      return ev.outcome;
  }
}

function failure(span: Span, type: string): void {
  span.setAttribute('error.type', type);
  span.setStatus({ code: SpanStatusCode.ERROR });
}

/** The collector's address as the log says it (no credentials, no query). */
function where(endpoint: string | undefined): string {
  if (endpoint === undefined) return process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : process.env.OTEL_EXPORTER_OTLP_ENDPOINT ? 'OTEL_EXPORTER_OTLP_ENDPOINT' : 'http://localhost:4318';
  try {
    const u = new URL(endpoint);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return 'the configured endpoint';
  }
}

/**
 * The exporter, with its failures said once: the first failed export is logged (its spans
 * dropped), the next ones are not until an export succeeds again (said too). One collector
 * down for an hour is two lines, not one per batch.
 */
class SaidOnce implements SpanExporter {
  private down = false;
  private dropped = 0;

  constructor(
    private readonly inner: SpanExporter,
    private readonly log: Logger,
    private readonly where: string,
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) {
        if (this.down) this.log.info({ collector: this.where, dropped: this.dropped }, 'traces: the collector answers again; spans are exported');
        this.down = false;
        this.dropped = 0;
      } else {
        this.dropped += spans.length;
        if (!this.down) {
          this.down = true;
          this.log.warn(
            { collector: this.where, err: result.error?.message },
            'traces: cannot export spans to the collector; they are dropped (said once until it answers again)',
          );
        }
      }
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}
