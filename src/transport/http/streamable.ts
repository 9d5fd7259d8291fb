// The host side of Streamable HTTP (2025-11-25 transports page) at `/mcp`: POST delivers
// messages and answers with JSON or an SSE stream, GET opens the standalone stream or resumes
// one with Last-Event-ID, DELETE ends the session. Stream bookkeeping lives in
// streamable-session.ts; this file is the HTTP surface: validation, status codes, sessions.

import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { jsonText } from '../../jsonrpc/big-numbers.js';
import { classify, type JsonRpcId, type JsonRpcRequest } from '../../jsonrpc/message.js';
import type { Logger } from '../../observe/logger.js';
import { isSupportedVersion, negotiateVersion, SUPPORTED_VERSIONS, versionAtLeast } from '../../protocol/versions.js';
import { cancelProtocol, type Params } from '../../protocol/mcp.js';
import { declaredVersion, isModernVersion } from '../../protocol/modern.js';
import { ModernHttp } from './modern-http.js';
import { acceptQuality } from './media.js';
import { header, HttpRpcCode, readJsonBody, sendBehind, sendError, sendOverloaded } from './respond.js';
import type { OpenSession, SessionRegistry } from './sessions.js';
import type { Who } from './guard.js';
import { StreamableSession } from './streamable-session.js';
import { ReplayBudget } from './replay-budget.js';
import { maxBacklogBytes } from '../backlog.js';
import type { BodyBudget } from './body-budget.js';
import type { ClusterForward } from './cluster-forward.js';
import { adoptTraceHeaders } from './trace-headers.js';

export interface StreamableOptions {
  registry: SessionRegistry;
  open: OpenSession;
  maxMessageBytes: number;
  /** Bytes of POST bodies being read at once, all connections together (body-budget.ts). */
  bodies?: BodyBudget;
  log: Logger;
  /** In a cluster: forwarding of 2026-07-28 retries to the daemon that holds their call. */
  cluster?: ClusterForward;
  /** Tracing is on: a POST's traceparent header counts as its requests' context (trace-headers.ts). */
  traceHeaders?: boolean;
}

/** Priming events carry empty data, which clients before 2025-11-25 may try to parse. */
const PRIMING_SINCE = '2025-11-25';
const VERSIONS_TEXT = SUPPORTED_VERSIONS.join(', ');

export class StreamableHttp {
  private readonly sessions = new Map<string, StreamableSession>();
  private readonly modern: ModernHttp;
  /** One budget for the replay buffers of all sessions (replay-budget.ts). */
  private readonly replay: ReplayBudget;

  constructor(private readonly opts: StreamableOptions) {
    this.modern = new ModernHttp(opts);
    this.replay = new ReplayBudget(opts.log);
  }

  /** Shutdown: the open 2026-07-28 requests end too (they are in no session registry). */
  closeStateless(): Promise<void> {
    return this.modern.closeAll();
  }

  /** `who`: the token's client, and the toolset a session this request opens gets (guard.ts). */
  handle(req: IncomingMessage, res: ServerResponse, who: Who): Promise<void> | void {
    switch (req.method) {
      case 'POST':
        return this.post(req, res, who);
      case 'GET':
        return this.get(req, res, who);
      case 'DELETE':
        return this.delete(req, res, who);
      default:
        sendError(res, 405, HttpRpcCode.Transport, 'Method Not Allowed', { allow: 'GET, POST, DELETE' });
    }
  }

  // ---- POST ----------------------------------------------------------------------------------

  private async post(req: IncomingMessage, res: ServerResponse, who: Who): Promise<void> {
    const { client } = who;
    // The client must take both answer forms (MCP's Streamable HTTP transport); refused before
    // the body is read. Equal preference means SSE, which can carry progress and requests.
    const accept = header(req, 'accept');
    const json = acceptQuality(accept, 'application/json');
    const sse = acceptQuality(accept, 'text/event-stream');
    if (json === 0 || sse === 0) {
      return sendError(res, 406, HttpRpcCode.Transport, 'Not Acceptable: a POST must accept both application/json and text/event-stream');
    }
    const body = await readJsonBody(req, res, this.opts.maxMessageBytes, this.opts.bodies);
    if (!body) return;
    const value = body.value;
    if (this.opts.traceHeaders) adoptTraceHeaders(req, value);
    // A POST without a session that declares 2026-07-28 (header or body) is a stateless request.
    if (header(req, 'mcp-session-id') === undefined && isModernPost(req, value)) return this.modern.post(req, res, value, body.bytes, who, body.raw);
    const batch = Array.isArray(value);
    const items: unknown[] = batch ? (value as unknown[]) : [value];
    if (items.length === 0) return sendError(res, 400, HttpRpcCode.InvalidRequest, 'Invalid Request: empty batch');

    // Validated here rather than by the endpoint: an invalid message gets no id-bearing answer
    // that could close this POST, so it is refused at the HTTP level (400).
    const requests: JsonRpcRequest[] = [];
    const cancels: JsonRpcId[] = [];
    let init: JsonRpcRequest | undefined;
    for (const item of items) {
      const c = classify(item);
      if (c.kind === 'invalid' || c.kind === 'bad-response') return sendError(res, 400, HttpRpcCode.InvalidRequest, `Invalid Request: ${c.reason}`);
      if (c.kind === 'request') {
        requests.push(c.msg);
        if (c.msg.method === 'initialize') init = c.msg;
      } else if (c.kind === 'notification' && c.msg.method === cancelProtocol.method) {
        const id = cancelProtocol.requestId(c.msg.params);
        if (id !== undefined) cancels.push(id);
      }
    }
    if (init && items.length > 1) {
      return sendError(res, 400, HttpRpcCode.InvalidRequest, 'Invalid Request: initialize must be sent alone, not in a batch');
    }

    const sid = header(req, 'mcp-session-id');
    let session: StreamableSession;
    if (sid === undefined) {
      if (!init) return sendError(res, 400, HttpRpcCode.Transport, 'Bad Request: Mcp-Session-Id header is required');
      const full = this.opts.registry.refusal(client);
      if (full) return sendOverloaded(res, full);
      session = this.create(who);
    } else {
      const found = this.lookup(req, res, sid, who, !init);
      if (!found) return;
      session = found;
      if (batch && !this.batchAllowed(session)) {
        return sendError(
          res,
          400,
          HttpRpcCode.InvalidRequest,
          `Invalid Request: batches are not part of protocol version ${session.host.protocolVersion}`,
        );
      }
    }

    // A reused id would be answered by the endpoint with an error that this POST's stream
    // cannot tell apart from the real answer on the earlier stream.
    const seen = new Set<JsonRpcId>();
    for (const r of requests) {
      if (seen.has(r.id) || session.isPending(r.id)) {
        return sendError(res, 400, HttpRpcCode.InvalidRequest, `Invalid Request: request id ${jsonText(r.id)} is already in use`);
      }
      seen.add(r.id);
    }

    if (requests.length === 0) {
      session.deliver(value, body.bytes);
      for (const id of cancels) session.cancelled(id);
      res.writeHead(202, { 'mcp-session-id': session.id, 'content-length': '0' }).end();
      return;
    }
    // A host that does not read its answers gets no more of them queued until it does (backlog.ts).
    if (session.answersBehind()) return sendBehind(res);
    const version = init ? negotiateVersion(init.params?.protocolVersion) : session.host.protocolVersion;
    session.openPost(res, [...seen], {
      // Equal preference means SSE, except for a lone list request without a progress token:
      // nothing but its answer can come on that stream, and one JSON body with a length is
      // cheaper for the host to read than an event stream (docs/performance.md, issue 23).
      sse: sse > json || (sse === json && !answerOnly(value)),
      batch,
      prime: versionAtLeast(version, PRIMING_SINCE),
    });
    session.deliver(value, body.bytes);
    for (const id of cancels) session.cancelled(id);
  }

  /**
   * Batches are JSON-RPC for 2024-11-05 and 2025-03-26 hosts only. A session exists only once
   * its initialize arrived, so its version is known even while initialize is being answered
   * (the batch's requests then wait for it, as single ones do).
   */
  private batchAllowed(session: StreamableSession): boolean {
    return !versionAtLeast(session.host.protocolVersion, '2025-06-18');
  }

  // ---- GET -----------------------------------------------------------------------------------

  private get(req: IncomingMessage, res: ServerResponse, who: Who): void {
    if (!acceptsEventStream(req)) {
      return sendError(res, 406, HttpRpcCode.Transport, 'Not Acceptable: the GET stream needs Accept: text/event-stream');
    }
    const sid = header(req, 'mcp-session-id');
    if (sid === undefined) return sendError(res, 400, HttpRpcCode.Transport, 'Bad Request: Mcp-Session-Id header is required');
    const session = this.lookup(req, res, sid, who, true);
    if (!session) return;
    const last = header(req, 'last-event-id');
    if (last !== undefined) {
      const r = session.resume(res, last);
      if (r === 'unknown') return sendError(res, 400, HttpRpcCode.Transport, 'Bad Request: unknown or expired Last-Event-ID');
      if (r === 'conflict') return sendError(res, 409, HttpRpcCode.Transport, 'Conflict: that stream is already connected');
      return;
    }
    if (!session.openGet(res, versionAtLeast(session.host.protocolVersion, PRIMING_SINCE))) {
      sendError(res, 409, HttpRpcCode.Transport, 'Conflict: only one GET stream per session');
    }
  }

  // ---- DELETE --------------------------------------------------------------------------------

  private async delete(req: IncomingMessage, res: ServerResponse, who: Who): Promise<void> {
    const sid = header(req, 'mcp-session-id');
    if (sid === undefined) return sendError(res, 400, HttpRpcCode.Transport, 'Bad Request: Mcp-Session-Id header is required');
    const session = this.lookup(req, res, sid, who, true);
    if (!session) return;
    await session.end('deleted by the host');
    res.writeHead(200, { 'content-length': '0' }).end();
  }

  // ---- sessions ------------------------------------------------------------------------------

  /** A session for `who`: its toolset is chosen here, at initialize, for the session's whole life. */
  private create(who: Who): StreamableSession {
    const { client } = who;
    // 32 random bytes, base64url: visible ASCII as the spec asks, and unguessable.
    const id = randomBytes(32).toString('base64url');
    const session = new StreamableSession(id, client, this.opts.log, maxBacklogBytes(this.opts.maxMessageBytes), this.replay);
    this.sessions.set(id, session);
    const host = this.opts.registry.open(session, this.opts.open, who, () => this.sessions.delete(id));
    this.opts.log.debug({ session: host.id, client, toolset: who.toolset }, 'streamable HTTP session opened');
    return session;
  }

  /**
   * The session a request names, or undefined after answering: 404 for an unknown or ended
   * id, 403 when another client's token opened it, 400 for an unsupported protocol version or
   * a `?toolset=` other than the session's (a session keeps the toolset it was opened with:
   * answering as if the host had switched would hand it a list its URL does not describe).
   */
  private lookup(
    req: IncomingMessage,
    res: ServerResponse,
    sid: string,
    who: Who,
    checkVersion: boolean,
  ): StreamableSession | undefined {
    const { client } = who;
    const session = this.sessions.get(sid);
    if (!session || session.isClosed) {
      sendError(res, 404, HttpRpcCode.SessionNotFound, 'Session not found');
      return undefined;
    }
    // Another client's token, or (OIDC) another person's JWT, or a JWT where a static token opened it.
    if (session.client !== client || !session.credential.admits(who.jwt)) {
      sendError(res, 403, HttpRpcCode.Transport, 'Forbidden: the session belongs to another client');
      return undefined;
    }
    if (who.asked !== undefined && who.asked !== session.host.toolset) {
      const has = session.host.toolset === undefined ? 'no toolset' : `toolset ${JSON.stringify(session.host.toolset)}`;
      sendError(res, 400, HttpRpcCode.Transport, `Bad Request: this session was opened with ${has}, not ${JSON.stringify(who.asked)}; a session keeps its toolset (initialize a new one for another)`);
      return undefined;
    }
    if (checkVersion) {
      // A missing header means 2025-03-26 by the spec; we already know the negotiated version.
      const v = header(req, 'mcp-protocol-version');
      if (v !== undefined && !isSupportedVersion(v)) {
        sendError(res, 400, HttpRpcCode.Transport, `Bad Request: unsupported MCP-Protocol-Version ${JSON.stringify(v)} (supported: ${VERSIONS_TEXT})`);
        return undefined;
      }
    }
    session.credential.renew(who.jwt);
    return session;
  }
}

/**
 * Whether a POST without a session is a modern request: its MCP-Protocol-Version header names
 * a modern version, or a version that is no legacy one while the body declares a version in
 * its `_meta` (a future revision gets -32022 rather than "initialize first"), or there is no
 * header and the body declares a modern version.
 */
function isModernPost(req: IncomingMessage, value: unknown): boolean {
  const declared = Array.isArray(value) ? undefined : declaredVersion((value as Params | undefined)?.params);
  const v = header(req, 'mcp-protocol-version');
  if (v !== undefined) return isModernVersion(v) || (!isSupportedVersion(v) && declared !== undefined);
  return isModernVersion(declared);
}

/** Requests whose POST can carry nothing but their answer: the lists (no progress, no questions). */
const ANSWER_ONLY: ReadonlySet<string> = new Set(['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list']);

/** A single list request that asks for no progress: its stream would carry its answer alone. */
function answerOnly(value: unknown): boolean {
  if (Array.isArray(value)) return false;
  const msg = value as { method?: unknown; params?: { _meta?: Params } };
  return typeof msg.method === 'string' && ANSWER_ONLY.has(msg.method) && msg.params?._meta?.progressToken === undefined;
}

function acceptsEventStream(req: IncomingMessage): boolean {
  return acceptQuality(header(req, 'accept'), 'text/event-stream') > 0;
}
