// A host speaking the 2026-07-28 revision ("modern") to mcpmux: no initialize, every request
// self-describing. HostSession hands a modern connection's requests here; this file checks
// each envelope, answers server/discover and subscriptions/listen, and shapes what goes back
// (resultType, freshness hints, the notices a listen stream asked for). What it forwards goes
// through the router like a legacy host's request, with the envelope taken off: each upstream
// gets mcpmux's own request in that upstream's era.

import { Canceller, NEVER, type CancelSignal } from '../jsonrpc/cancel.js';
import { IdTable } from '../jsonrpc/id-table.js';
import type { Result } from '../jsonrpc/endpoint.js';
import { ErrorCode, RpcError, type JsonRpcId, type JsonRpcRequest } from '../jsonrpc/message.js';
import { materialise } from '../jsonrpc/opaque.js';
import { awaitRetry, continueCall, type RequestEvent } from '../observe/events.js';
import { logLevelRank, McpError, progressTokenOf, type LogLevel, type Params } from '../protocol/mcp.js';
import { META, MODERN_METHODS, MODERN_VERSIONS, modernResult, readEnvelope, stripEnvelope } from '../protocol/modern.js';
import { listHintsOf } from '../router/catalogue.js';
import type { Router, SessionPort } from '../router/router.js';
import { BridgedCall, type Waiter } from './bridged-call.js';
import type { ParkedCalls } from './parked.js';

/**
 * Resource URIs one subscriptions/listen may ask for at most: each is a subscription upstream
 * (for a 2026-07-28 upstream, a stream of its own), and the listen holds them all while open.
 * Past it the listen is refused (-32602) before anything is subscribed.
 */
export const MAX_LISTEN_URIS = 1_000;

/** What a listen stream asked for and was granted (the acknowledged filter). */
interface Listen {
  id: JsonRpcId;
  tools: boolean;
  prompts: boolean;
  resources: boolean;
  /** Resource URIs (as the host sees them) whose updates it wants. */
  uris: Set<string>;
}

/** How a modern connection sends to its host: a notification, tied to one of its requests. */
export type SendNotification = (method: string, params: Params, related: JsonRpcId) => void;

export class ModernHost {
  private readonly listens = new Map<JsonRpcId, Listen>();
  /** How many of this connection's listens want each URI (subscribed upstream while any does). */
  private readonly uriRefs = new Map<string, number>();
  /** Calls started here and still in flight upstream, by the id of the request that started them. */
  private readonly calls = new IdTable<BridgedCall>();
  /** Called once no call started here is in flight any more (see `busy`). */
  onIdle?: () => void;
  /** Requests that asked for log messages (`_meta` logLevel), and from which level. */
  private readonly logLevels = new IdTable<LogLevel>();
  private admitted: Promise<void> | undefined;

  constructor(
    private readonly session: SessionPort & { clientCapabilities: Params; clientInfo: Params },
    private readonly router: Router,
    private readonly send: SendNotification,
    private readonly serverInfo: Params,
    private readonly parked: ParkedCalls,
  ) {}

  /** A call started here is still in flight upstream (perhaps parked for the host's retry). */
  get busy(): boolean {
    return this.calls.size > 0;
  }

  /**
   * An upstream asks the host something during one of its calls (sampling, elicitation, roots):
   * the call's answer becomes an input_required result, and the host's retry brings the answer.
   * `related`: the host request the upstream call serves, when known.
   */
  ask(method: string, params: Params | undefined, related: JsonRpcId | undefined, signal?: CancelSignal): Promise<Result> {
    const call = this.callOf(related);
    if (!call || call.finished) {
      return Promise.reject(new RpcError(ErrorCode.MethodNotFound, `Cannot tell which call of this 2026-07-28 host ${method} belongs to; it can only be asked during one`));
    }
    return call.ask(method, params ?? {}, signal);
  }

  /**
   * The call an upstream's message belongs to: the one its host request started, or, when the
   * upstream did not say (a stdio server's log message, its questions), the only call in flight
   * (`server`: the only one on that upstream server; another server's log is not this call's).
   */
  private callOf(related: JsonRpcId | undefined, server?: string): BridgedCall | undefined {
    const named = related !== undefined ? this.calls.get(related) : undefined;
    if (named) return named;
    let only: BridgedCall | undefined;
    for (const call of this.calls.values()) {
      if (server !== undefined && call.server !== server) continue;
      if (only) return undefined;
      only = call;
    }
    return only;
  }

  /** The router sent the host request `id` on to `server`: a call it started is that server's. */
  routed(id: JsonRpcId, server: string): void {
    const call = this.calls.get(id);
    if (call && call.server === undefined) call.server = server;
  }

  /**
   * The host connection is gone (stdio, WebSocket, a Streamable HTTP session): every question
   * fails upstream and every call is cancelled there. Their tokens go too: they are bound to the
   * client, not the connection, and a host that reconnects and retries with one would resume a
   * call that has ended; it gets "Invalid requestState" and starts over.
   */
  abandon(why: string): void {
    for (const call of this.calls.values()) {
      this.parked.forget(call);
      call.abandon(why);
    }
  }

  async handle(req: JsonRpcRequest, signal: CancelSignal, event: RequestEvent | undefined): Promise<Result> {
    if (!MODERN_METHODS.has(req.method)) {
      throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${req.method}${req.method === 'initialize' ? ' (this connection speaks 2026-07-28, which has no handshake)' : ''}`);
    }
    const params = (req.params ??= {});
    const envelope = readEnvelope(params);
    const level = (params._meta as Params)[META.logLevel];
    stripEnvelope(params);
    // Capabilities are per request; the latest stands for the connection where one is needed
    // (a `sharing: "session"` server started for it declares them).
    this.session.clientCapabilities = envelope.capabilities;
    if (envelope.clientInfo) this.session.clientInfo = envelope.clientInfo;
    // The first request makes the router wait (bounded) for the upstreams, as initialize does.
    await (this.admitted ??= this.router.admit(this.session));
    if (typeof level === 'string' && logLevelRank(level) >= 0) this.logLevels.set(req.id, level as LogLevel);
    try {
      switch (req.method) {
        case 'server/discover':
          return modernResult(req.method, this.discover(), this.serverInfo);
        case 'subscriptions/listen':
          return await this.listen(req, params, signal, event);
        case 'tools/call':
        case 'prompts/get':
        case 'resources/read':
          return modernResult(req.method, await this.withInput(req, params, signal, event), this.serverInfo);
        default:
          return modernResult(req.method, await this.router.handle(this.session, req, signal, event), this.serverInfo, listHintsOf);
      }
    } catch (err) {
      // 2026-07-28 reports an unknown resource as invalid params.
      if (err instanceof RpcError && err.code === McpError.ResourceNotFound) throw new RpcError(ErrorCode.InvalidParams, err.message, err.data);
      throw err;
    } finally {
      this.logLevels.delete(req.id);
    }
  }

  /**
   * A request that may need the host's input on the way. A retry that brings mcpmux's own
   * requestState resumes the call it names (answers given to the questions waiting upstream);
   * anything else starts a call. Either way: its result, or input_required with new questions
   * and a new token. A modern upstream's own input_required passes through as it is, and so
   * does the retry that brings its state back.
   */
  private async withInput(req: JsonRpcRequest, params: Params, signal: CancelSignal, event: RequestEvent | undefined): Promise<Result> {
    const target = String(params.name ?? params.uri ?? '');
    const client = this.session.client;
    // Every requestState a host holds is one of mcpmux's tokens: a retry must bring a good one.
    const parked = params.requestState === undefined ? undefined : this.parked.redeem(String(params.requestState), client, req.method, target);
    // A retry is a round of the call it resumes: observers see one call (events.ts).
    const prior = parked && ('call' in parked ? parked.call.record : parked.record);
    // (A call that ended meanwhile has a published record: the retry is then a request of its own.)
    const record = event && (prior && continueCall(event, prior) ? prior : event);
    // This request is the one the call's progress and log messages go with now (not the first's).
    const waiter: Waiter = { id: req.id, progressToken: progressTokenOf(params), logLevel: this.logLevels.get(req.id), send: this.send };
    let call: BridgedCall;
    let release: () => void;
    if (parked && 'call' in parked) {
      call = parked.call;
      // Before the answers go up: what the upstream says next already finds this request.
      release = call.attach(waiter);
      call.answer((params.inputResponses as Params | undefined) ?? {});
    } else {
      // A 2026-07-28 server's own input round: its state goes back to it (or none, if it gave none).
      if (parked) {
        if (parked.upstreamState === undefined) delete params.requestState;
        else params.requestState = parked.upstreamState;
      }
      // Its own canceller: the upstream call outlives this request when it is parked.
      const ctl = new Canceller();
      const started = new BridgedCall(this.router.handle(this.session, req, ctl, event), (why) => ctl.cancel(why));
      started.record = record;
      release = started.attach(waiter);
      this.calls.set(req.id, started);
      const done = (): void => {
        // The host may have reused the id for a later call (this one was answered, parked).
        if (this.calls.get(req.id) === started) this.calls.delete(req.id);
        if (this.calls.size === 0) this.onIdle?.();
      };
      started.outcome.then(done, done);
      call = started;
    }
    try {
      // The host giving up on this request gives up the call (a new call's canceller, or a resumed one's).
      signal.onCancel(() => call.cancel(signal.reason ?? 'cancelled by the host'));
      const step = await call.next();
      if (step.done) {
        const result = step.result;
        if (result.resultType !== 'input_required') return result;
        // A modern server needs input: the host answers it directly, but holds mcpmux's token.
        const upstreamState = typeof result.requestState === 'string' ? result.requestState : undefined;
        if (record) awaitRetry(record);
        return { ...result, requestState: this.parked.park({ upstreamState, record }, client, req.method, target) };
      }
      if (record) awaitRetry(record);
      const requestState = this.parked.park({ call }, client, req.method, target);
      return {
        resultType: 'input_required',
        // Each ask's params (an upstream's sampling or elicitation request, which may keep long
        // values raw: opaque.ts) are nested in this answer, whose encoder only knows its own.
        inputRequests: Object.fromEntries(step.asks.map((a) => [a.key, { method: a.method, params: materialised(a.params) }])),
        requestState,
      };
    } finally {
      // Answered (or failed): until the next retry, nothing the upstream says has a request to go with.
      release();
    }
  }

  /** A notice from the router: what a listen stream asked for, or a message tied to a request. */
  notify(method: string, params: Params | undefined, related: JsonRpcId | undefined, server?: string): void {
    switch (method) {
      case 'notifications/tools/list_changed':
      case 'notifications/prompts/list_changed':
      case 'notifications/resources/list_changed': {
        const kind = method.split('/')[1] as 'tools' | 'prompts' | 'resources';
        for (const l of this.listens.values()) if (l[kind]) this.onStream(l, method, params);
        return;
      }
      case 'notifications/resources/updated': {
        const uri = params?.uri;
        for (const l of this.listens.values()) if (typeof uri === 'string' && l.uris.has(uri)) this.onStream(l, method, params);
        return;
      }
      case 'notifications/progress':
      case 'notifications/message': {
        // A call's messages go with the host request waiting on it now: its retry, once resumed.
        // (A message that names another request of this host is that request's, not a call's.)
        // A log message that names no request may be the call's only if it comes from the call's server.
        const call = related !== undefined ? this.calls.get(related) : method === 'notifications/message' && server !== undefined ? this.callOf(undefined, server) : undefined;
        if (call) return call.relay(method, params ?? {});
        if (method === 'notifications/progress') {
          if (related !== undefined) this.send(method, params ?? {}, related);
          return;
        }
        // Only for a request that asked for log messages, and from its level up.
        const wanted = related === undefined ? undefined : this.logLevels.get(related);
        if (wanted !== undefined && logLevelRank(params?.level) >= logLevelRank(wanted)) this.send(method, params ?? {}, related!);
        return;
      }
      default:
        // Elicitation completions, task status: the revision has no such notices for hosts.
        return;
    }
  }

  private onStream(l: Listen, method: string, params: Params | undefined): void {
    this.send(method, { ...params, _meta: { ...(params?._meta as Params | undefined), [META.subscriptionId]: l.id } }, l.id);
  }

  private discover(): Params {
    const { capabilities, instructions } = this.router.offer(this.session);
    return { supportedVersions: [...MODERN_VERSIONS], capabilities, ...(instructions ? { instructions } : {}) };
  }

  /**
   * subscriptions/listen: acknowledged with what mcpmux will send, then open until the host
   * cancels it (or goes). List changes are always honoured: mcpmux announces its merged lists
   * changing whatever its upstreams support. Resource URIs are subscribed upstream (shared with
   * legacy hosts' subscriptions); one that cannot be is left out of the acknowledgement.
   */
  private async listen(req: JsonRpcRequest, params: Params, signal: CancelSignal, event: RequestEvent | undefined): Promise<Result> {
    const asked = (params.notifications ?? {}) as Params;
    if (typeof asked !== 'object' || asked === null || Array.isArray(asked)) throw new RpcError(ErrorCode.InvalidParams, 'Invalid params: notifications must be an object');
    const l: Listen = { id: req.id, tools: asked.toolsListChanged === true, prompts: asked.promptsListChanged === true, resources: asked.resourcesListChanged === true, uris: new Set() };
    const listed = Array.isArray(asked.resourceSubscriptions) ? (asked.resourceSubscriptions as unknown[]) : [];
    if (listed.length > MAX_LISTEN_URIS) {
      throw new RpcError(ErrorCode.InvalidParams, `Invalid params: notifications.resourceSubscriptions has ${listed.length} entries; at most ${MAX_LISTEN_URIS} per subscriptions/listen`, { max: MAX_LISTEN_URIS });
    }
    const uris = listed.filter((u): u is string => typeof u === 'string');
    for (const uri of new Set(uris)) {
      // Several listens of one connection may want the same URI: subscribed once, for all.
      const refs = this.uriRefs.get(uri) ?? 0;
      try {
        if (refs === 0) await this.router.handle(this.session, { jsonrpc: '2.0', id: req.id, method: 'resources/subscribe', params: { uri } }, signal, event);
        this.uriRefs.set(uri, (this.uriRefs.get(uri) ?? 0) + 1);
        l.uris.add(uri);
      } catch {
        // Not subscribable (unknown, or its server cannot): not acknowledged.
      }
    }
    const honored: Params = {};
    if (l.tools) honored.toolsListChanged = true;
    if (l.prompts) honored.promptsListChanged = true;
    if (l.resources) honored.resourcesListChanged = true;
    if (l.uris.size > 0) honored.resourceSubscriptions = [...l.uris];
    // Cancelled while its URIs were being subscribed: nothing more may be said on it.
    if (!signal.aborted) this.send('notifications/subscriptions/acknowledged', { _meta: { [META.subscriptionId]: req.id }, notifications: honored }, req.id);
    this.listens.set(req.id, l);
    try {
      await new Promise<void>((resolve) => signal.onCancel(() => resolve()));
    } finally {
      this.listens.delete(req.id);
      for (const uri of l.uris) {
        const refs = (this.uriRefs.get(uri) ?? 1) - 1;
        if (refs > 0) {
          this.uriRefs.set(uri, refs);
          continue;
        }
        this.uriRefs.delete(uri);
        // The listen's own signal is spent (that is why we are here).
        this.router.handle(this.session, { jsonrpc: '2.0', id: req.id, method: 'resources/unsubscribe', params: { uri } }, NEVER, undefined).catch(() => {});
      }
    }
    // Cancelled: the endpoint sends nothing for it.
    return { _meta: { [META.subscriptionId]: req.id } };
  }
}

/** `params` with every long value kept raw (opaque.ts) decoded, for a message other than its own. */
function materialised(params: Params | undefined): Params | undefined {
  if (params) materialise(params);
  return params;
}
