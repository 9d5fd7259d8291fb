// What happens on the data path, published on node:diagnostics_channel (the way undici does):
// audit, metrics and anyone's own subscriber (an OpenTelemetry exporter, say) listen here, and
// the data path never calls them. Channel names and payload fields are a stable interface,
// documented in docs/events.md. Publishing costs one `hasSubscribers` check when nobody listens.
//
// Subscribe with `diagnostics_channel.subscribe(name, fn)`. Payloads are shared by every
// subscriber: read them, never change them. A subscriber that throws does not disturb the
// data path (Node reports the error on the next tick), but it would crash the process: wrap
// your work in try/catch, as audit.ts and metrics.ts do.

import dc from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';
import { RpcError, type JsonRpcId, type JsonRpcResponse } from '../jsonrpc/message.js';
import { McpError, MuxError } from '../protocol/mcp.js';

/** The channel names (see docs/events.md for each payload). */
export const CHANNEL = {
  sessionOpen: 'mcpmux:session:open',
  sessionClose: 'mcpmux:session:close',
  requestStart: 'mcpmux:request:start',
  requestEnd: 'mcpmux:request:end',
  upstreamRequest: 'mcpmux:upstream:request',
  upstreamState: 'mcpmux:upstream:state',
  upstreamProtocolError: 'mcpmux:upstream:protocol-error',
  toolChanged: 'mcpmux:tools:changed',
  policyDenied: 'mcpmux:policy:denied',
  rateLimited: 'mcpmux:ratelimit:limited',
  auditError: 'mcpmux:audit:error',
  configReload: 'mcpmux:config:reload',
  operatorAction: 'mcpmux:operator:action',
  hostBacklog: 'mcpmux:host:backlog',
} as const;

// Module-level references: a channel nobody holds could be collected along with its subscribers.
const sessionOpen = dc.channel(CHANNEL.sessionOpen);
const sessionClose = dc.channel(CHANNEL.sessionClose);
const requestStart = dc.channel(CHANNEL.requestStart);
const requestEnd = dc.channel(CHANNEL.requestEnd);
const upstreamRequest = dc.channel(CHANNEL.upstreamRequest);
const upstreamState = dc.channel(CHANNEL.upstreamState);
const upstreamProtocolError = dc.channel(CHANNEL.upstreamProtocolError);
const toolChanged = dc.channel(CHANNEL.toolChanged);
const policyDenied = dc.channel(CHANNEL.policyDenied);
const rateLimited = dc.channel(CHANNEL.rateLimited);
const auditError = dc.channel(CHANNEL.auditError);
const configReload = dc.channel(CHANNEL.configReload);
const operatorAction = dc.channel(CHANNEL.operatorAction);
const hostBacklog = dc.channel(CHANNEL.hostBacklog);

/** How a host is connected. `http` is Streamable HTTP; `sse` the legacy HTTP+SSE transport. */
export type HostTransport = 'stdio' | 'http' | 'sse' | 'ws';

/** How a request ended, from the host's point of view. */
export type Outcome = 'ok' | 'error' | 'denied' | 'limited' | 'cancelled' | 'timeout' | 'unavailable';


// ---- sessions ---------------------------------------------------------------------------------

export interface SessionEvent {
  sessionId: string;
  client: string;
  transport: HostTransport;
  /**
   * The id the host knows the session by, where its transport has one: Streamable HTTP's
   * `Mcp-Session-Id`, legacy SSE's `sessionId` of its /messages URL (not `sessionId` above, mcpmux's own id that
   * logs and /status show). Absent for stdio and WebSocket sessions.
   */
  mcpSessionId?: string;
  /** mcpmux:session:close only. */
  durationMs?: number;
  reason?: string;
}

export function publishSessionOpen(ev: SessionEvent): void {
  if (sessionOpen.hasSubscribers) sessionOpen.publish(ev);
}

export function publishSessionClose(ev: SessionEvent): void {
  if (sessionClose.hasSubscribers) sessionClose.publish(ev);
}

// ---- requests ---------------------------------------------------------------------------------

/** A host session as a request's record names it. */
export interface RequestSession {
  readonly id: string;
  readonly client: string;
  readonly transport: HostTransport;
}

/**
 * One request through mcpmux: a host's request (`host-to-server`) or a server-initiated one
 * (`server-to-host`: sampling, elicitation, roots). The same object is published on
 * mcpmux:request:start and, completed, on mcpmux:request:end. (A class, so that observing a
 * request costs one allocation.)
 */
export class RequestEvent {
  /** Epoch milliseconds when it arrived. */
  readonly startTime = Date.now();
  /** performance.now() at the start; for the duration. */
  readonly t0 = performance.now();
  /** The host session (undefined for a server-initiated request no session could take). */
  readonly sessionId: string | undefined;
  /** Its client (bearer-token identity, or `anonymous`). */
  readonly client: string | undefined;
  readonly transport: HostTransport | undefined;
  /** The tool or prompt name, or the resource URI, as the host sees it. */
  name: string | undefined = undefined;
  /** The same as the upstream knows it (its own tool name, its own URI). */
  upstreamName: string | undefined = undefined;
  /** Set on end. */
  outcome: Outcome | undefined = undefined;
  /** JSON-RPC error code, for outcomes that are errors (a tool error has none). */
  code: number | undefined = undefined;
  /** For `limited`: when the caller may try again. */
  retryAfterMs: number | undefined = undefined;
  durationMs = 0;
  /** Host requests only: the answer's size on the host connection (a call's record: every round's). */
  bytesOut = 0;
  /**
   * A 2026-07-28 call that took several requests (mcpmux answered `input_required` and the host
   * retried): on the call's record (its first request's), how many requests it has taken.
   */
  rounds = 1;
  /**
   * The merged lists (tools, prompts, resources, templates): true when the page was answered
   * from mcpmux's catalogue without asking any upstream (its cached pages), false when some
   * upstream was asked; unset for other requests.
   */
  cacheHit: boolean | undefined = undefined;
  /** On a retry's own record: the record of the call it continues (see continueCall). */
  roundOf: RequestEvent | undefined = undefined;
  /**
   * Server-initiated requests: the host request whose upstream call it came with, when mcpmux
   * can tell (an HTTP upstream says which of our requests it belongs to).
   */
  cause: RequestEvent | undefined = undefined;

  constructor(
    readonly direction: 'host-to-server' | 'server-to-host',
    session: RequestSession | undefined,
    readonly method: string,
    /** The id its sender gave it (the host's, or the upstream's for server-initiated requests). */
    readonly requestId: JsonRpcId,
    /**
     * The request's params, as received (read-only). Long string values may be placeholders
     * (see docs/architecture.md, "Long values are never decoded").
     */
    readonly params: Record<string, unknown> | undefined,
    /** The upstream server (config name) it went to or came from, when exactly one. */
    public server: string | undefined,
    /** Host requests only: the request's size on the host connection (a call's record: every round's). */
    public bytesIn: number,
  ) {
    this.sessionId = session?.id;
    this.client = session?.client;
    this.transport = session?.transport;
  }
}

/** Starts observing a host's request; undefined (and nothing to do) when nobody listens. */
export function startHostRequest(session: RequestSession, method: string, id: JsonRpcId, params: Record<string, unknown> | undefined, bytesIn: number): RequestEvent | undefined {
  if (!requestStart.hasSubscribers && !requestEnd.hasSubscribers) return undefined;
  return started(new RequestEvent('host-to-server', session, method, id, params, undefined, bytesIn));
}

/** Starts observing a server-initiated request (`session`: the host it goes to, if any). */
export function startServerRequest(session: RequestSession | undefined, method: string, id: JsonRpcId, params: Record<string, unknown> | undefined, server: string): RequestEvent | undefined {
  if (!requestStart.hasSubscribers && !requestEnd.hasSubscribers) return undefined;
  return started(new RequestEvent('server-to-host', session, method, id, params, server, 0));
}

function started(ev: RequestEvent): RequestEvent {
  if (requestStart.hasSubscribers) requestStart.publish(ev);
  return ev;
}

/**
 * Ends the request with the answer that was written (none: it was cancelled), and its size.
 * An error's code names the outcome; a result is ok unless it is a tool error (`isError`);
 * an outcome set earlier (`limited`) stands.
 *
 * A call that takes several requests (continueCall) is one call: its record (the first
 * request's) stays open while it waits for the host's retry, and ends with the answer of the
 * request that ends the call, its duration from the first arrival; each retry is published as
 * a round of it (`roundOf`), which metrics and audit do not count as a call of its own.
 */
export function endRequest(ev: RequestEvent, response: JsonRpcResponse | undefined, bytesOut: number): void {
  if (waiting.has(ev)) {
    // Answered input_required: the call goes on, and so does its record.
    ev.bytesOut += bytesOut;
    return;
  }
  finish(ev, response, bytesOut);
  const call = ev.roundOf;
  if (!call) return;
  call.bytesIn += ev.bytesIn;
  if (waiting.has(call)) call.bytesOut += bytesOut;
  else finish(call, response, bytesOut);
}

/** `unanswered`: the outcome when no answer was written (default `cancelled`). */
function finish(ev: RequestEvent, response: JsonRpcResponse | undefined, bytesOut: number, unanswered: Outcome = 'cancelled'): void {
  ev.durationMs = performance.now() - ev.t0;
  ev.bytesOut += bytesOut;
  if (response === undefined) {
    ev.outcome = unanswered;
  } else if ('error' in response) {
    ev.code = response.error.code;
    ev.outcome ??= outcomeOfCode(response.error.code);
  } else {
    ev.outcome ??= response.result.isError === true ? 'error' : 'ok';
  }
  if (requestEnd.hasSubscribers) requestEnd.publish(ev);
}

/** Records of calls answered input_required that wait for the host's retry (not ended yet). */
const waiting = new WeakSet<RequestEvent>();

/** `record`'s call was answered input_required and waits for the host's retry: its record stays open. */
export function awaitRetry(record: RequestEvent): void {
  waiting.add(record);
}

/**
 * `retry` resumes the call whose record is `record`: it is a round of that call, not a call of
 * its own. A retry of a call that has already ended (given up while it waited, its record
 * published) counts as its own request: linking it would end that record a second time.
 * Returns whether it was linked.
 */
export function continueCall(retry: RequestEvent, record: RequestEvent): boolean {
  if (!waiting.delete(record)) return false;
  retry.roundOf = record;
  retry.server = record.server;
  retry.name = record.name;
  retry.upstreamName = record.upstreamName;
  record.rounds++;
  return true;
}

/** A call given up while it waited for the host's retry (the host never came back, or went): its record ends so. */
export function endWaiting(record: RequestEvent, outcome: 'cancelled' | 'timeout'): void {
  if (!waiting.delete(record)) return;
  finish(record, undefined, 0, outcome);
}

export function outcomeOfCode(code: number): Outcome {
  switch (code) {
    case MuxError.PolicyDenied:
      return 'denied';
    case MuxError.RateLimited:
      return 'limited';
    case McpError.RequestTimeout:
      return 'timeout';
    case MuxError.UpstreamUnavailable:
    case McpError.ConnectionClosed:
      return 'unavailable';
    case McpError.RequestCancelled:
      return 'cancelled';
    default:
      return 'error';
  }
}

// ---- requests mcpmux sends upstream -----------------------------------------------------------

export interface UpstreamRequestEvent {
  server: string;
  method: string;
  outcome: Outcome;
  code: number | undefined;
  durationMs: number;
  /** The host session the request serves; undefined for mcpmux's own (lists, re-subscribes). */
  sessionId: string | undefined;
  /** The host request it serves (its record); undefined for mcpmux's own. */
  request: RequestEvent | undefined;
}

/** performance.now() if anyone listens to upstream requests, else -1 (then nothing is measured). */
export function upstreamRequestClock(): number {
  return upstreamRequest.hasSubscribers ? performance.now() : -1;
}

/** `t0` from upstreamRequestClock(); `err` when the request failed; `request`: the host request it serves. */
export function publishUpstreamRequest(t0: number, server: string, method: string, sessionId: string | undefined, err?: unknown, request?: RequestEvent): void {
  if (t0 < 0 || !upstreamRequest.hasSubscribers) return;
  const code = err === undefined ? undefined : err instanceof RpcError ? err.code : -32603;
  const ev: UpstreamRequestEvent = { server, method, sessionId, request, outcome: code === undefined ? 'ok' : outcomeOfCode(code), code, durationMs: performance.now() - t0 };
  upstreamRequest.publish(ev);
}

// ---- upstream connections ---------------------------------------------------------------------

/**
 * `starting`: connecting and initializing; `up`: ready; `down`: the connection was lost;
 * `failed`: it could not start (or gave up); `restarting`: a new attempt is scheduled;
 * `closed`: mcpmux closed it (shutdown, or its host session ended).
 */
export type UpstreamStateName = 'starting' | 'up' | 'down' | 'failed' | 'restarting' | 'closed';

export interface UpstreamStateEvent {
  server: string;
  /** Unique per connection in this process: a `sharing: "session"` server has one per host session. */
  connection: number;
  sharing: 'shared' | 'session';
  state: UpstreamStateName;
  reason?: string;
  /** restarting: the attempt number and its delay. */
  attempt?: number;
  delayMs?: number;
}

export function publishUpstreamState(ev: UpstreamStateEvent): void {
  if (upstreamState.hasSubscribers) upstreamState.publish(ev);
}

/** An upstream broke the protocol: a line that is not JSON, an oversized message, a response to no request of ours... */
export interface UpstreamProtocolErrorEvent {
  server: string;
  /** What went wrong, one of a few fixed phrases (bounded: usable as a label). */
  kind: string;
}

export function publishUpstreamProtocolError(ev: UpstreamProtocolErrorEvent): void {
  if (upstreamProtocolError.hasSubscribers) upstreamProtocolError.publish(ev);
}

/** A tool's definition differs from the one approved (or the tool is new to a pinned server). */
export interface ToolChangedEvent {
  server: string;
  /** The upstream's own tool name. */
  tool: string;
  /** Which parts changed: name, title, description, inputSchema, outputSchema, annotations, _meta, or "(new tool)". */
  fields: string[];
  /** Whether it is now held (pinTools) until approved. */
  held: boolean;
}

export function publishToolChanged(ev: ToolChangedEvent): void {
  if (toolChanged.hasSubscribers) toolChanged.publish(ev);
}

// ---- governance -------------------------------------------------------------------------------

export interface DeniedEvent {
  sessionId: string;
  client: string;
  server: string;
  method: string;
  kind: 'tools' | 'prompts' | 'resources';
  /** The name or URI as the host gave it. */
  name: string;
}

export function publishDenied(ev: DeniedEvent): void {
  if (policyDenied.hasSubscribers) policyDenied.publish(ev);
}

export interface LimitedEvent {
  sessionId: string;
  client: string;
  server: string;
  method: string;
  /** The upstream's own tool name, for tools/call. */
  tool: string | undefined;
  retryAfterMs: number;
  /** Index of the rule in `rateLimits` that refused it (the most restrictive one). */
  rule: number;
}

export function publishLimited(ev: LimitedEvent): void {
  if (rateLimited.hasSubscribers) rateLimited.publish(ev);
}

// ---- the audit log's own trouble --------------------------------------------------------------

export interface AuditErrorEvent {
  error: string;
  /** Audit lines lost (0 when none were: a failed reopen keeps writing to the old file). */
  lines: number;
}

export function publishAuditError(ev: AuditErrorEvent): void {
  if (auditError.hasSubscribers) auditError.publish(ev);
}

// ---- reloads ----------------------------------------------------------------------------------

/** A reload was tried (on SIGHUP, or because the file changed): applied, or refused. */
export interface ConfigReloadEvent {
  /** `applied`, or `refused` (the new file is invalid; the running config stays). */
  result: 'applied' | 'refused';
  /** `http`: an admin's POST /status/reload (the web console's reload button). */
  trigger: 'signal' | 'file' | 'http';
  file: string;
  /** Why it was refused: every problem with its JSON path. */
  error?: string;
  /** Server names: started, stopped, restarted, reconfigured in place. */
  added: string[];
  removed: string[];
  restarted: string[];
  updated: string[];
  /** Settings that changed but apply only when mcpmux restarts. */
  needsRestart: string[];
}

export function publishConfigReload(ev: ConfigReloadEvent): void {
  if (configReload.hasSubscribers) configReload.publish(ev);
}

// ---- operator actions -------------------------------------------------------------------------

/**
 * An operator action asked over HTTP (restarting an upstream, reloading the config, approving a
 * held tool), by a caller whose token was good: done, refused (403: the token's client is not
 * `admin`), or failed (no such server or held tool; a refused reload).
 * Requests without a valid token are answered 401 and not published, like every other route.
 */
export interface OperatorActionEvent {
  action: 'restart' | 'reload' | 'approve';
  /** The token's client; undefined when no tokens are configured (everyone is the operator). */
  client: string | undefined;
  /** What it acts on: the server name asked for (as given, when there is no such server). */
  target: string | undefined;
  /** `approve`: the tool approved (its upstream's own name). */
  tool?: string;
  outcome: 'ok' | 'denied' | 'error';
  /** The HTTP status of the answer (202, 403, 404...). */
  status: number;
  /** The peer's address. */
  remote: string | undefined;
}

export function publishOperatorAction(ev: OperatorActionEvent): void {
  if (operatorAction.hasSubscribers) operatorAction.publish(ev);
}

// ---- hosts that do not read -------------------------------------------------------------------

/**
 * A host fell behind reading what mcpmux sends it (transport/backlog.ts): a notification was
 * shed or replaced by a newer one of its kind, or the connection was cut.
 */
export interface HostBacklogEvent {
  transport: HostTransport;
  /**
   * `shed`: a progress or log notification was not sent; `coalesced`: a list_changed or
   * resources/updated was replaced by a newer one of its kind; `closed`: the connection was cut.
   */
  action: 'shed' | 'coalesced' | 'closed';
  /** shed and coalesced: the notification's method. */
  method?: string;
  /** closed: `stuck` (the host took nothing for a while) or `full` (past the hard bound). */
  why?: 'stuck' | 'full';
  /** Bytes waiting for the host at that moment. */
  waiting: number;
}

export function publishHostBacklog(ev: HostBacklogEvent): void {
  if (hostBacklog.hasSubscribers) hostBacklog.publish(ev);
}
