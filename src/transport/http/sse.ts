// The legacy HTTP+SSE host endpoint (2024-11-05): GET `/sse` opens the session's only stream
// and names, in an `endpoint` event, where to POST (`/messages?sessionId=...`); every message
// from us is a `message` event on that stream; every POST is answered 202. The session is the
// stream: it ends when the stream's connection closes. The stream's answer also names the
// session in an `X-Mcpmux-Session` header, for load balancers that stick its POSTs to it.

import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { encodeChunks, type Wire } from '../../jsonrpc/framing.js';
import type { Incoming } from '../../jsonrpc/message.js';
import type { Logger } from '../../observe/logger.js';
import type { BodyBudget } from './body-budget.js';
import { HttpRpcCode, readJsonBody, sendBehind, sendError, sendOverloaded } from './respond.js';
import { ConnectionSession, type OpenSession, type SessionRegistry } from './sessions.js';
import type { Who } from './guard.js';
import type { HostJwt } from './oidc.js';
import { SseWriter } from './sse-writer.js';
import { adoptTraceHeaders } from './trace-headers.js';
import { carriesRequest, maxBacklogBytes, UNREAD_ANSWERS_BYTES } from '../backlog.js';

export const MESSAGES_PATH = '/messages';
/** The response header of GET /sse that names the session (`sessionId` of its /messages URL). */
export const SESSION_HEADER = 'x-mcpmux-session';

export interface LegacySseOptions {
  registry: SessionRegistry;
  open: OpenSession;
  maxMessageBytes: number;
  /** Bytes of POST bodies being read at once, all connections together (body-budget.ts). */
  bodies?: BodyBudget;
  log: Logger;
  /** Tracing is on: a POST's traceparent header counts as its requests' context (trace-headers.ts). */
  traceHeaders?: boolean;
}

class LegacySseSession extends ConnectionSession {
  readonly kind = 'sse' as const;

  constructor(
    readonly id: string,
    readonly client: string | undefined,
    private readonly writer: SseWriter,
  ) {
    super();
    writer.onclose = (why) => this.finish(why ?? 'stream closed');
  }

  send(msg: Incoming): Wire | undefined {
    if (this.closed || !this.writer.admit(msg)) return undefined;
    const wire = encodeChunks(msg);
    this.writer.event(wire, undefined, 'message');
    return wire;
  }

  async close(): Promise<void> {
    this.writer.end();
    this.finish('closed');
  }

  /** The latest JWT of the session (its GET's, or a later POST's) has expired: the stream ends. */
  protected expired(): void {
    this.writer.end();
    this.finish('token expired');
  }

  keepalive(): void {
    this.writer.comment('keepalive');
  }

  /** More than UNREAD_ANSWERS_BYTES wait for the host: answers it does not read (backlog.ts). */
  get answersBehind(): boolean {
    return this.writer.waiting > UNREAD_ANSWERS_BYTES;
  }
}

export class LegacySse {
  private readonly sessions = new Map<string, LegacySseSession>();

  constructor(private readonly opts: LegacySseOptions) {}

  /** GET /sse (`who`: its token's client, and the toolset the session gets from this URL or the token). */
  open(req: IncomingMessage, res: ServerResponse, who: Who): void {
    const { client } = who;
    if (req.method !== 'GET') return sendError(res, 405, HttpRpcCode.Transport, 'Method Not Allowed', { allow: 'GET' });
    const full = this.opts.registry.refusal(client);
    if (full) return sendOverloaded(res, full);
    const id = randomBytes(32).toString('base64url');
    // The id in a header too, not only in the endpoint event: a load balancer reads headers, not
    // event bodies, and learns here where this session's POSTs must go (contrib/haproxy).
    const writer: SseWriter = new SseWriter(res, { [SESSION_HEADER]: id }, {
      transport: 'sse',
      log: this.opts.log,
      maxBytes: maxBacklogBytes(this.opts.maxMessageBytes),
      resend: (msg) => session.send(msg),
    });
    const session = new LegacySseSession(id, client, writer);
    this.sessions.set(id, session);
    const host = this.opts.registry.open(session, this.opts.open, who, () => {
      this.sessions.delete(id);
      writer.end();
    });
    // Relative to the stream's URL, as the SDK's SSEClientTransport resolves it.
    writer.event(`${MESSAGES_PATH}?sessionId=${id}`, undefined, 'endpoint');
    this.opts.log.debug({ session: host.id, client, toolset: who.toolset }, 'legacy SSE session opened');
  }

  /** POST /messages?sessionId=... */
  async post(req: IncomingMessage, res: ServerResponse, from: { client: string | undefined; jwt?: HostJwt }, query: string): Promise<void> {
    if (req.method !== 'POST') return sendError(res, 405, HttpRpcCode.Transport, 'Method Not Allowed', { allow: 'POST' });
    const sid = new URLSearchParams(query).get('sessionId');
    if (!sid) return sendError(res, 400, HttpRpcCode.Transport, 'Bad Request: the sessionId query parameter is required');
    const session = this.sessions.get(sid);
    if (!session) return sendError(res, 404, HttpRpcCode.SessionNotFound, 'Session not found');
    if (session.client !== from.client || !session.credential.admits(from.jwt)) return sendError(res, 403, HttpRpcCode.Transport, 'Forbidden: the session belongs to another client');
    session.credential.renew(from.jwt);
    const body = await readJsonBody(req, res, this.opts.maxMessageBytes, this.opts.bodies);
    if (!body) return;
    // A host that does not read its stream gets no more answers queued until it does (backlog.ts).
    if (session.answersBehind && carriesRequest(body.value)) return sendBehind(res);
    res.writeHead(202, { 'content-type': 'text/plain' }).end('Accepted');
    if (this.opts.traceHeaders) adoptTraceHeaders(req, body.value);
    // The endpoint checks the JSON-RPC shape and answers on the stream, as over stdio.
    session.onmessage?.(body.value, undefined, body.bytes);
  }
}
