// Prometheus metrics (prom-client), fed only by the events on the bus (events.ts): nothing on
// the data path calls this file. Label values are bounded: methods outside MCP's own become
// "other", clients are the configured token names (and `anonymous`; `none` for an upstream's
// own request no host session could take; `oidc` for every unmapped OIDC host, whose own name
// `oidc:<claim value>` is one per person), servers are config names,
// and tool names appear only with `metrics.toolLabel`, capped. No session id, argument or
// URI ever becomes a label. The metric table is in the README.

import dc from 'node:diagnostics_channel';
import { createRequire } from 'node:module';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { NO_CLIENT, settingsClient } from '../config/types.js';
import { MODERN_METHODS } from '../protocol/modern.js';
import {
  CHANNEL,
  type AuditErrorEvent,
  type ConfigReloadEvent,
  type DeniedEvent,
  type HostBacklogEvent,
  type LimitedEvent,
  type RequestEvent,
  type SessionEvent,
  type ToolChangedEvent,
  type UpstreamProtocolErrorEvent,
  type UpstreamRequestEvent,
  type UpstreamStateEvent,
} from './events.js';
import type { Logger } from './logger.js';
import { FastCounter, FastHistogram, type Buckets } from './series.js';

/** Every method MCP defines that a host or an upstream may send as a request (2026-07-28's too). */
const KNOWN_METHODS = new Set([
  'initialize', 'ping', 'tools/list', 'tools/call', 'prompts/list', 'prompts/get', 'resources/list',
  'resources/templates/list', 'resources/read', 'resources/subscribe', 'resources/unsubscribe',
  'completion/complete', 'logging/setLevel', 'tasks/get', 'tasks/result', 'tasks/cancel', 'tasks/list',
  'sampling/createMessage', 'elicitation/create', 'roots/list',
  ...MODERN_METHODS,
]);

/** From sub-millisecond proxy work to ten-minute tools (timeouts.maxMs defaults to 600 s). */
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Host sessions last from a second (a CLI run) to days (a desktop host). */
const SESSION_BUCKETS = [1, 10, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86_400, 7 * 86_400];

/** Sessions of one client and toolset that got one surface (Router.surfaceGroups has this shape). */
export interface SurfaceCount {
  client: string;
  toolset: string | null;
  mode: string;
  tokens: number | null;
  sessions: number;
}

export interface MetricsOptions {
  version: string;
  /** Adds a `tool` label (the public tool name) to request metrics, for at most `toolLabelLimit` names. */
  toolLabel: boolean;
  toolLabelLimit: number;
  log: Logger;
}

export class Metrics {
  readonly registry: Registry;
  // Updated on every request: kept in our own tables (series.ts), read by the registry on scrape.
  private readonly requests: FastCounter;
  private readonly duration: FastHistogram;
  private readonly upstreamDuration: FastHistogram;
  private readonly bytes: FastCounter;
  /** Requests being handled now: a plain number, read into mcpmux_requests_in_flight on scrape. */
  private inFlightNow = 0;
  /** The series of the last request's labels: under load request after request has the same. */
  private last: Series | undefined;
  private readonly sessions: Gauge;
  private readonly sessionsOpened: Counter;
  private readonly sessionDuration: Histogram;
  private readonly upstreamRestarts: Counter;
  private readonly protocolErrors: Counter;
  private readonly toolChanges: Counter;
  private readonly denials: Counter;
  private readonly limited: Counter;
  private readonly auditErrors: Counter;
  private readonly reloads: Counter;
  private readonly shed: Counter;
  private readonly cut: Counter;
  /** Connection id -> its server and whether it is up (for mcpmux_upstream_up). */
  private readonly connections = new Map<number, { server: string; up: boolean }>();
  private readonly tools = new Set<string>();
  private readonly subscriptions: [string, (msg: unknown) => void][] = [];
  private idleSessions: () => Iterable<[string, number]> = () => [];
  private surfaces: () => Iterable<SurfaceCount> = () => [];
  /** The shared store's health, when there is one (undefined: no store, no series). */
  private storeHealth: () => string | undefined = () => undefined;

  constructor(private readonly opts: MetricsOptions) {
    // prom-client (and the OpenTelemetry API it pulls in) loads only when metrics are on: a
    // desktop host's `mcpmux stdio` without an admin port never needs it.
    const { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } = createRequire(import.meta.url)('prom-client') as typeof import('prom-client');
    this.registry = new Registry();
    const registers = [this.registry];
    const toolLabel = opts.toolLabel ? ['tool'] : [];
    new Gauge({ name: 'mcpmux_build_info', help: 'Always 1; the version is a label.', labelNames: ['version'], registers }).set({ version: opts.version }, 1);
    const reg = this.registry;
    this.requests = new FastCounter(
      'mcpmux_requests_total',
      'Requests through mcpmux: host requests, and server-initiated ones (sampling, elicitation, roots).',
      ['method', 'server', 'outcome', 'client', ...toolLabel],
      reg,
    );
    this.duration = new FastHistogram(
      'mcpmux_request_duration_seconds',
      'Time from a request arriving to its answer, as the sender sees it (mcpmux as a server).',
      ['method', 'server', 'outcome', ...toolLabel],
      DURATION_BUCKETS,
      reg,
    );
    this.upstreamDuration = new FastHistogram(
      'mcpmux_upstream_request_duration_seconds',
      'Time an upstream took to answer a request of mcpmux (mcpmux as a client), list pages and housekeeping included.',
      ['method', 'server', 'outcome'],
      DURATION_BUCKETS,
      reg,
    );
    this.bytes = new FastCounter(
      'mcpmux_request_bytes_total',
      'Bytes of host requests (direction="in") and of their answers (direction="out") on host connections.',
      ['method', 'server', 'direction'],
      reg,
    );
    const inFlight: Gauge = new Gauge({
      name: 'mcpmux_requests_in_flight',
      help: 'Requests being handled now (both directions).',
      registers,
      collect: () => inFlight.set(this.inFlightNow),
    });
    this.sessions = new Gauge({ name: 'mcpmux_sessions', help: 'Host sessions connected now.', labelNames: ['transport'], registers });
    const sessionsIdle: Gauge = new Gauge({
      name: 'mcpmux_sessions_idle',
      help: 'Of mcpmux_sessions, those idle now: Streamable HTTP sessions with no request and no open stream for 60 s (a host that left without DELETE).',
      labelNames: ['transport'],
      registers,
      collect: () => {
        sessionsIdle.reset();
        for (const [transport, n] of this.idleSessions()) sessionsIdle.set({ transport }, n);
      },
    });
    const surfaceSessions: Gauge = new Gauge({
      name: 'mcpmux_surface_sessions',
      help: 'Host sessions by the tool surface they got: mode="all" (every tool listed), "search" (search_tools and call_tool), "undecided" (not listed yet).',
      labelNames: ['mode', 'client', 'toolset'],
      registers,
      collect: () => {
        surfaceSessions.reset();
        for (const c of this.surfaces()) surfaceSessions.inc({ mode: c.mode, client: settingsClient(c.client), toolset: c.toolset ?? '' }, c.sessions);
      },
    });
    const surfaceTokens: Gauge = new Gauge({
      name: 'mcpmux_surface_tool_tokens',
      help: 'Estimated tokens of the tool definitions a session of this client and toolset may see (what mode "all" would list); the largest among its sessions.',
      labelNames: ['client', 'toolset'],
      registers,
      collect: () => {
        surfaceTokens.reset();
        const most = new Map<string, SurfaceCount>();
        for (const c of this.surfaces()) {
          if (c.tokens === null) continue;
          const client = settingsClient(c.client);
          const key = `${client}\0${c.toolset ?? ''}`;
          if ((most.get(key)?.tokens ?? -1) < c.tokens) most.set(key, { ...c, client });
        }
        for (const c of most.values()) surfaceTokens.set({ client: c.client, toolset: c.toolset ?? '' }, c.tokens!);
      },
    });
    const storeUp: Gauge = new Gauge({
      name: 'mcpmux_store_up',
      help: 'With store configured: 1 while the shared store (Redis) answers, 0 while it is unreachable (what needs it fails or is skipped, as store.onError says).',
      registers,
      collect: () => {
        const h = this.storeHealth();
        storeUp.reset();
        if (h !== undefined) storeUp.set(h === 'up' ? 1 : 0);
      },
    });
    this.sessionsOpened = new Counter({ name: 'mcpmux_sessions_opened_total', help: 'Host sessions opened.', labelNames: ['transport'], registers });
    this.sessionDuration = new Histogram({
      name: 'mcpmux_session_duration_seconds',
      help: 'How long host sessions lasted.',
      labelNames: ['transport'],
      buckets: SESSION_BUCKETS,
      registers,
    });
    const upstreamUp: Gauge = new Gauge({
      name: 'mcpmux_upstream_up',
      help: '1 if the server has a ready connection, else 0 (servers with no connection yet are absent).',
      labelNames: ['server'],
      registers,
      // Computed at scrape time from the connection states seen on the bus.
      collect: () => {
        upstreamUp.reset();
        for (const [server, up] of this.upState()) upstreamUp.set({ server }, up ? 1 : 0);
      },
    });
    this.upstreamRestarts = new Counter({ name: 'mcpmux_upstream_restarts_total', help: 'Restarts scheduled after an upstream was lost or failed to start.', labelNames: ['server'], registers });
    this.toolChanges = new Counter({
      name: 'mcpmux_tool_definition_changes_total',
      help: 'Tool definitions that differ from the approved ones, and tools new to a pinned server ("held": hidden until approved).',
      labelNames: ['server', 'held'],
      registers,
    });
    this.protocolErrors = new Counter({
      name: 'mcpmux_upstream_protocol_errors_total',
      help: 'Messages from an upstream that broke the protocol (not JSON, over the size limit, a response to no request...), by kind.',
      labelNames: ['server', 'kind'],
      registers,
    });
    this.denials = new Counter({ name: 'mcpmux_policy_denials_total', help: 'Requests refused by policy.', labelNames: ['server', 'kind', 'client'], registers });
    this.limited = new Counter({ name: 'mcpmux_rate_limited_total', help: 'Requests refused by a rate limit.', labelNames: ['server', 'client'], registers });
    this.auditErrors = new Counter({ name: 'mcpmux_audit_errors_total', help: 'Audit lines lost: the file could not be written, or the writer fell too far behind.', registers });
    this.auditErrors.inc(0);
    this.reloads = new Counter({ name: 'mcpmux_config_reloads_total', help: 'Config reloads: applied, or refused because the new file was invalid (the running config stays).', labelNames: ['result'], registers });
    this.reloads.inc({ result: 'applied' }, 0);
    this.reloads.inc({ result: 'refused' }, 0);
    // Hosts that do not read (transport/backlog.ts). `method` is one of the few shed or coalesced ones.
    this.shed = new Counter({
      name: 'mcpmux_host_messages_shed_total',
      help: 'Notifications not sent to a host that was behind reading: progress and log messages shed, list_changed and resources/updated replaced by a newer one.',
      labelNames: ['transport', 'method'],
      registers,
    });
    this.cut = new Counter({
      name: 'mcpmux_host_connections_cut_total',
      help: 'Host connections cut for not reading: why="stuck" (nothing taken for a while), why="full" (past the hard bound).',
      labelNames: ['transport', 'why'],
      registers,
    });
    // Last, so that a scrape shows mcpmux's own metrics first and Node's process_/nodejs_ ones after.
    collectDefaultMetrics({ register: this.registry });
  }

  /** Where mcpmux_sessions_idle is read from at scrape time (the HTTP front's sessions; none under stdio). */
  countIdleSessions(fn: () => Iterable<[transport: string, count: number]>): void {
    this.idleSessions = fn;
  }

  /** Where mcpmux_surface_* are read from at scrape time (the router's sessions). */
  countSurfaces(fn: () => Iterable<SurfaceCount>): void {
    this.surfaces = fn;
  }

  /** Where mcpmux_store_up is read from at scrape time. */
  countStore(fn: () => string | undefined): void {
    this.storeHealth = fn;
  }

  /** Starts listening on the bus. Subscribe before upstreams start, so their states are seen. */
  start(): void {
    this.on(CHANNEL.requestStart, () => this.inFlightNow++);
    this.on(CHANNEL.requestEnd, (ev: RequestEvent) => this.requestEnded(ev));
    this.on(CHANNEL.upstreamRequest, (ev: UpstreamRequestEvent) => this.upstreamDuration.observe(ev.durationMs / 1000, method(ev.method), ev.server, ev.outcome));
    this.on(CHANNEL.sessionOpen, (ev: SessionEvent) => {
      this.sessions.inc({ transport: ev.transport });
      this.sessionsOpened.inc({ transport: ev.transport });
    });
    this.on(CHANNEL.sessionClose, (ev: SessionEvent) => {
      this.sessions.dec({ transport: ev.transport });
      this.sessionDuration.observe({ transport: ev.transport }, (ev.durationMs ?? 0) / 1000);
    });
    this.on(CHANNEL.upstreamState, (ev: UpstreamStateEvent) => this.upstreamState(ev));
    this.on(CHANNEL.toolChanged, (ev: ToolChangedEvent) => this.toolChanges.inc({ server: ev.server, held: String(ev.held) }));
    this.on(CHANNEL.upstreamProtocolError, (ev: UpstreamProtocolErrorEvent) => this.protocolErrors.inc({ server: ev.server, kind: ev.kind }));
    this.on(CHANNEL.policyDenied, (ev: DeniedEvent) => this.denials.inc({ server: ev.server, kind: ev.kind, client: settingsClient(ev.client) }));
    this.on(CHANNEL.rateLimited, (ev: LimitedEvent) => this.limited.inc({ server: ev.server, client: settingsClient(ev.client) }));
    this.on(CHANNEL.auditError, (ev: AuditErrorEvent) => this.auditErrors.inc(ev.lines));
    this.on(CHANNEL.configReload, (ev: ConfigReloadEvent) => this.reloads.inc({ result: ev.result }));
    this.on(CHANNEL.hostBacklog, (ev: HostBacklogEvent) => {
      if (ev.action === 'closed') this.cut.inc({ transport: ev.transport, why: ev.why ?? 'full' });
      else this.shed.inc({ transport: ev.transport, method: ev.method ?? 'other' });
    });
  }

  stop(): void {
    for (const [name, fn] of this.subscriptions.splice(0)) dc.unsubscribe(name, fn);
  }

  /** The Prometheus text exposition. */
  async text(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  private on<T>(name: string, fn: (ev: T) => void): void {
    // A metric must never take the data path down: a failure here costs that sample only.
    const safe = (msg: unknown): void => {
      try {
        fn(msg as T);
      } catch (err) {
        this.opts.log.warn({ err: (err as Error).message, channel: name }, 'metrics subscriber failed');
      }
    };
    dc.subscribe(name, safe);
    this.subscriptions.push([name, safe]);
  }

  private requestEnded(ev: RequestEvent): void {
    this.inFlightNow--;
    // A retry of a call mcpmux answered input_required is a round of that call, which is
    // counted once, when it ends, on its own record (events.ts: endRequest).
    if (ev.roundOf) return;
    const m = method(ev.method);
    const server = ev.server ?? '';
    const outcome = ev.outcome ?? 'error';
    const client = settingsClient(ev.client ?? NO_CLIENT);
    const tool = this.opts.toolLabel ? this.toolOf(ev) : '';
    // The series of these labels, looked up once and kept while the labels stay the same.
    let s = this.last;
    if (s === undefined || s.method !== m || s.server !== server || s.outcome !== outcome || s.client !== client || s.tool !== tool) {
      const t = this.opts.toolLabel ? tool : undefined;
      s = this.last = {
        method: m,
        server,
        outcome,
        client,
        tool,
        requests: this.requests.at(m, server, outcome, client, t),
        duration: this.duration.series(m, server, outcome, t),
        bytesIn: undefined,
        bytesOut: undefined,
      };
    }
    s.requests.value++;
    this.duration.record(s.duration, ev.durationMs / 1000);
    // Bytes are counted for host-to-server requests only: looking the series up creates it,
    // so a server-to-host request must not (it would add a zero series to /metrics).
    if (ev.direction === 'host-to-server') {
      (s.bytesIn ??= this.bytes.at(m, server, 'in')).value += ev.bytesIn;
      (s.bytesOut ??= this.bytes.at(m, server, 'out')).value += ev.bytesOut;
    }
  }

  /** The public tool name for tools/call, until `toolLabelLimit` names are in use; then "other". */
  private toolOf(ev: RequestEvent): string {
    if (ev.method !== 'tools/call' || ev.name === undefined) return '';
    if (this.tools.has(ev.name)) return ev.name;
    if (this.tools.size >= this.opts.toolLabelLimit) return 'other';
    this.tools.add(ev.name);
    return ev.name;
  }

  private upstreamState(ev: UpstreamStateEvent): void {
    if (ev.state === 'restarting') this.upstreamRestarts.inc({ server: ev.server });
    if (ev.state === 'closed') this.connections.delete(ev.connection);
    else this.connections.set(ev.connection, { server: ev.server, up: ev.state === 'up' });
  }

  /** Per server: up if any of its connections is. */
  private upState(): Map<string, boolean> {
    const out = new Map<string, boolean>();
    for (const { server, up } of this.connections.values()) out.set(server, (out.get(server) ?? false) || up);
    return out;
  }
}

/** The series one request's end updates, for one set of label values. */
interface Series {
  method: string;
  server: string;
  outcome: string;
  client: string;
  tool: string;
  requests: { value: number };
  duration: Buckets;
  /** Looked up on the first host-to-server request of these labels (undefined until then). */
  bytesIn: { value: number } | undefined;
  bytesOut: { value: number } | undefined;
}

function method(m: string): string {
  return KNOWN_METHODS.has(m) ? m : 'other';
}
