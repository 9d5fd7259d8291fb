// One host connection (stdio, or later one HTTP session, SSE stream or WebSocket): the server
// side of the handshake, the host's negotiated version and capabilities, its log level. All the
// routing is the router's; this file is what is particular to one host.

import type { CancelSignal } from '../jsonrpc/cancel.js';
import { randomUUID } from 'node:crypto';
import { Endpoint, type IncomingInfo, type Result } from '../jsonrpc/endpoint.js';
import { ErrorCode, RpcError, type JsonRpcId, type JsonRpcNotification, type JsonRpcRequest } from '../jsonrpc/message.js';
import { ANONYMOUS_CLIENT } from '../config/types.js';
import {
  endRequest,
  publishSessionClose,
  publishSessionOpen,
  startHostRequest,
  type HostTransport,
  type RequestEvent,
  type SessionEvent,
} from '../observe/events.js';
import type { Logger } from '../observe/logger.js';
import { cancelProtocol, MuxError, type LogLevel, type Params } from '../protocol/mcp.js';
import { LATEST_VERSION, negotiateVersion, versionAtLeast, type ProtocolVersion } from '../protocol/versions.js';
import { declaredVersion, type Era } from '../protocol/modern.js';
import { PASS_THROUGH, type Router, type SessionPort } from '../router/router.js';
import { ModernHost } from './modern.js';
import type { ParkedCalls } from './parked.js';
import type { Transport } from '../transport/transport.js';

/**
 * Sampling, elicitation and roots requests waiting for one host's answers at once: a person
 * answers a handful; an upstream that sends thousands is flooding (each would wait up to
 * timeouts.maxMs). Beyond this the upstream gets -31003 at once.
 */
const MAX_REQUESTS_TO_HOST = 64;

export interface HostSessionOptions {
  log: Logger;
  /**
   * limits.maxInFlightPerSession, and timeouts.maxMs (the hard cap on how long a
   * server-initiated request may wait for the host): read at each request, so a reload's new
   * values reach sessions already open.
   */
  maxInFlight: () => number;
  maxMs: () => number;
  serverInfo: Params;
  /** The client its bearer token names (HTTP); `anonymous` without one. */
  client?: string;
  /** Its toolset (a name in `toolsets`, checked by whoever chose it). */
  toolset?: string;
  /** An OIDC host's latest validated JWT (the HTTP front renews it at each request of the session). */
  hostToken?: () => string | undefined;
  /**
   * The id the host knows this session by, where its transport has one (Streamable HTTP's
   * `Mcp-Session-Id`, legacy SSE's `sessionId`): only told to observers (SessionEvent), for
   * traces' `mcp.session.id`. Never logged: it lets a request into the session.
   */
  mcpSessionId?: string;
  transport: HostTransport;
  /** Calls of 2026-07-28 hosts waiting for their retry, daemon-wide (a retry may come on another connection). */
  parked: ParkedCalls;
  /**
   * One stateless 2026-07-28 request over HTTP: modern from the start, no session of its own
   * (no session events; `sharing: "session"` servers are not started for it).
   */
  stateless?: boolean;
}

export class HostSession implements SessionPort {
  readonly id = randomUUID();
  readonly client: string;
  readonly toolset: string | undefined;
  readonly transport: HostTransport;
  protocolVersion: ProtocolVersion = LATEST_VERSION;
  clientCapabilities: Params = {};
  clientInfo: Params = {};
  logLevel: LogLevel | undefined;
  /** Undecided until the first request: an initialize (or a request without a modern envelope) is legacy. */
  era: Era | undefined;
  readonly stateless: boolean;
  /** Called once when the host connection is gone. */
  onclose?: (reason: string) => void;

  private initialized = false;
  /** Server-initiated requests sent to this host and not answered yet. */
  private asking = 0;
  /** Set while the first initialize is being answered; requests pipelined behind it wait. */
  private initializing: Promise<Result> | undefined;
  private readonly endpoint: Endpoint;
  private readonly log: Logger;
  private modernHost: ModernHost | undefined;

  constructor(
    transport: Transport,
    private readonly router: Router,
    private readonly opts: HostSessionOptions,
  ) {
    this.client = opts.client ?? ANONYMOUS_CLIENT;
    this.toolset = opts.toolset;
    this.transport = opts.transport;
    this.stateless = opts.stateless === true;
    this.era = this.stateless ? 'modern' : undefined;
    this.log = opts.log.child({ session: this.id, ...(opts.client ? { client: opts.client } : {}), ...(opts.toolset ? { toolset: opts.toolset } : {}) });
    this.endpoint = new Endpoint(
      transport,
      { request: (req, signal, _related, info) => this.observed(req, signal, info), notification: (n) => this.onNotification(n) },
      {
        cancel: cancelProtocol,
        // A getter: the endpoint reads it at each incoming request, and a reload may change it.
        get maxInFlight() {
          return opts.maxInFlight();
        },
        opaqueRequests: PASS_THROUGH.hostRequests,
        acceptBatch: () => this.acceptBatch(),
        onProtocolError: (what, detail) => this.log.debug({ detail: String(detail) }, what),
      },
    );
    const opened = Date.now();
    const about: SessionEvent = { sessionId: this.id, client: this.client, transport: this.transport, ...(opts.mcpSessionId !== undefined && { mcpSessionId: opts.mcpSessionId }) };
    this.endpoint.onclose = (reason) => {
      if (!this.stateless) this.log.info({ reason }, 'host session closed');
      const gone = (): void => {
        this.router.detach(this);
        if (!this.stateless) publishSessionClose({ ...about, durationMs: Date.now() - opened, reason });
        this.onclose?.(reason);
      };
      const modern = this.modernHost;
      if (modern?.busy && this.stateless) {
        // A stateless request whose call waits for the host's retry: the call stays this
        // session's (questions the upstream asks still find it) until it ends.
        modern.onIdle = gone;
        return;
      }
      // A connection that is gone will not retry: questions waiting on it fail upstream.
      modern?.abandon(`the host connection closed: ${reason}`);
      gone();
    };
    router.attach(this);
    if (!this.stateless) publishSessionOpen(about);
  }

  /** True once the initialize answer has been produced. */
  get isInitialized(): boolean {
    return this.initialized;
  }

  close(): Promise<void> {
    return this.endpoint.close();
  }

  hostToken(): string | undefined {
    return this.opts.hostToken?.();
  }

  // ---- SessionPort: the router's way back to this host --------------------------------

  notify(method: string, params?: Params, related?: JsonRpcId, server?: string): void {
    if (this.modernHost) return this.modernHost.notify(method, params, related, server);
    if (this.initialized) this.endpoint.notify(method, params, related);
  }

  routed(hostRequestId: JsonRpcId, server: string): void {
    this.modernHost?.routed(hostRequestId, server);
  }

  request(method: string, params: Params | undefined, signal: CancelSignal, related?: JsonRpcId): Promise<Result> {
    if (this.era === 'modern') {
      // 2026-07-28 has no server-to-client requests: the question goes out as input_required.
      if (!this.modernHost) return Promise.reject(new RpcError(ErrorCode.MethodNotFound, `The host has sent no request yet; cannot take ${method}`));
      return this.modernHost.ask(method, params, related, signal);
    }
    if (!this.initialized) return Promise.reject(new RpcError(ErrorCode.MethodNotFound, `The host has not finished initializing; cannot take ${method}`));
    // A host asked for more answers than a person could give at once is not asked for more.
    if (this.asking >= MAX_REQUESTS_TO_HOST) {
      return Promise.reject(new RpcError(MuxError.TooManyInFlight, `Too many requests waiting for this host's answer (limit ${MAX_REQUESTS_TO_HOST})`));
    }
    this.asking++;
    // Only the router asks (sampling, elicitation, roots), and it hands the result back upstream untouched.
    return this.endpoint
      .request(this.endpoint.allocateId(), method, params, { signal, related, maxTotalMs: this.opts.maxMs(), opaque: true })
      .finally(() => this.asking--);
  }

  // ---- what the host sends ------------------------------------------------------------

  /** Every host request passes here: observed (observe/events.ts) when anyone listens. */
  private observed(req: JsonRpcRequest, signal: CancelSignal, info: IncomingInfo): Promise<Result> | Result {
    const ev = startHostRequest(this, req.method, req.id, req.params, info.bytes);
    // The answer the endpoint writes (or its absence) says how the request ended.
    if (ev) info.onAnswered = (response, bytesOut) => endRequest(ev, response, bytesOut);
    return this.onRequest(req, signal, ev, info.inBatch === true);
  }

  /**
   * Not an async function (the endpoint awaits what it returns, and turns a throw into an error
   * response): an async layer here would cost every call promise turns both ways (issue 23).
   */
  private onRequest(req: JsonRpcRequest, signal: CancelSignal, ev: RequestEvent | undefined, inBatch: boolean): Promise<Result> | Result {
    // MCP's params are an object, and so is their _meta. Anything else is refused here, at once:
    // an upstream would drop such a request without an answer (the SDK's servers do), leaving
    // the host waiting for the whole timeout.
    const shapeError = paramsShapeError(req.params);
    if (shapeError) throw new RpcError(ErrorCode.InvalidParams, `Invalid params: ${shapeError}`);
    if (inBatch && req.method === 'initialize') throw new RpcError(ErrorCode.InvalidRequest, 'Invalid Request: initialize must not be part of a batch');
    // A connection's first request decides its era: a request (not initialize) that declares a
    // version in its _meta is modern; everything else goes the legacy way. A batch (legacy
    // JSON-RPC, answered entry by entry before initialize) decides nothing.
    if (!inBatch) this.era ??= req.method !== 'initialize' && declaredVersion(req.params) !== undefined ? 'modern' : 'legacy';
    if (this.era === 'modern') return this.modern().handle(req, signal, ev);
    switch (req.method) {
      case 'initialize':
        if (this.initializing) throw new RpcError(ErrorCode.InvalidRequest, 'Invalid Request: the session is already initialized');
        return (this.initializing = this.initialize(req.params ?? {}));
      case 'ping':
        return {};
    }
    if (!this.initializing) {
      throw new RpcError(ErrorCode.InvalidRequest, `Invalid Request: ${req.method} before initialize`);
    }
    if (!this.initialized) return this.initializing.then(() => this.router.handle(this, req, signal, ev));
    return this.router.handle(this, req, signal, ev);
  }

  private modern(): ModernHost {
    if (!this.modernHost) {
      this.modernHost = new ModernHost(this, this.router, (method, params, related) => this.endpoint.notify(method, params, related), this.opts.serverInfo, this.opts.parked);
      this.initialized = true;
    }
    return this.modernHost;
  }

  private async initialize(params: Params): Promise<Result> {
    this.protocolVersion = negotiateVersion(params.protocolVersion);
    this.clientCapabilities = (params.capabilities as Params) ?? {};
    this.clientInfo = (params.clientInfo as Params) ?? {};
    // The answer waits for the upstreams (bounded), so the host's first lists are complete.
    const { capabilities, instructions } = await this.router.greet(this);
    this.initialized = true;
    this.log.info({ protocolVersion: this.protocolVersion, clientInfo: this.clientInfo }, 'host initialized');
    return {
      protocolVersion: this.protocolVersion,
      capabilities,
      serverInfo: this.opts.serverInfo,
      ...(instructions ? { instructions } : {}),
    };
  }

  private onNotification(n: JsonRpcNotification): void {
    switch (n.method) {
      case 'notifications/initialized':
      case 'notifications/cancelled': // the endpoint already aborted the request
        return;
      case 'notifications/roots/list_changed':
        this.router.rootsChanged(this);
        return;
      default:
        this.log.debug({ method: n.method }, 'notification from host not routed');
    }
  }

  /**
   * Batches existed in JSON-RPC for 2024-11-05 and 2025-03-26; 2025-06-18 removed them. Once
   * initialize has arrived its version decides, even while it is still being answered (the
   * batch's requests then wait for it, like single ones). Before any initialize the version is
   * unknown: the batch is taken, and each of its requests answered on its own ("before
   * initialize"; an initialize in it, "must not be part of a batch").
   */
  private acceptBatch(): true | string {
    if (this.era === 'modern') return 'batches are not part of protocol version 2026-07-28';
    if (this.initializing && versionAtLeast(this.protocolVersion, '2025-06-18')) return `batches are not part of protocol version ${this.protocolVersion}`;
    return true;
  }
}

/** Why `params` is not the shape every MCP request's params have, or undefined. */
function paramsShapeError(params: unknown): string | undefined {
  if (params === undefined) return undefined;
  if (typeof params !== 'object' || params === null || Array.isArray(params)) return 'params must be an object';
  const meta = (params as Params)._meta;
  if (meta === undefined) return undefined;
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) return '_meta must be an object';
  const token = (meta as Params).progressToken;
  if (token !== undefined && typeof token !== 'string' && typeof token !== 'number') return '_meta.progressToken must be a string or a number';
  return undefined;
}
