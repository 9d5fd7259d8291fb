// Streamable HTTP as 2026-07-28 has it: every POST one self-contained request, no session.
// streamable.ts hands a POST here when it declares a modern version (the MCP-Protocol-Version
// header, or the body's `_meta`); legacy sessions go on beside it on the same endpoint.
//
// What is checked before anything runs (each a 400 with the revision's error code, or 404):
// one request (no batch), a method the revision has, the standard headers matching the body
// (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` with its base64 form), and the `_meta`
// envelope. Then a HostSession of its own (stateless) answers it over a ModernPost: JSON for a
// plain answer, SSE once something else (progress, a listen stream) has to go first. Closing
// the response before the answer cancels the request.
//
// In a cluster, a retry whose parked call another daemon holds goes to that daemon instead,
// once these checks have passed (cluster-forward.ts).

import type { IncomingMessage, ServerResponse } from 'node:http';
import { encodeChunks, type Wire } from '../../jsonrpc/framing.js';
import { classify, ErrorCode, errorResponse, RpcError, type Incoming, type JsonRpcId } from '../../jsonrpc/message.js';
import type { Logger } from '../../observe/logger.js';
import type { Params } from '../../protocol/mcp.js';
import { META, MODERN_METHODS, ModernError, NAMED, readEnvelope } from '../../protocol/modern.js';
import { maxBacklogBytes, queuedLength } from '../backlog.js';
import { watchAnswer } from './answer-watch.js';
import type { FrameError, Transport } from '../transport.js';
import { header, HttpRpcCode, sendError, sendOverloaded, sendWire } from './respond.js';
import { ClientCounts, type OpenSession, type SessionRegistry } from './sessions.js';
import type { Who } from './guard.js';
import { SseWriter } from './sse-writer.js';
import type { ClusterForward } from './cluster-forward.js';

export interface ModernHttpOptions {
  registry: SessionRegistry;
  open: OpenSession;
  maxMessageBytes: number;
  log: Logger;
  /** In a cluster: retries whose call another daemon holds go there (cluster-forward.ts). */
  cluster?: ClusterForward;
}

export class ModernHttp {
  /** Requests being answered now (listen streams included), and how many per token client. */
  private readonly open = new Set<ModernPost>();
  private readonly perClient = new ClientCounts();

  constructor(private readonly opts: ModernHttpOptions) {}

  /** Shutdown: every open answer ends (a listen stream with it). */
  closeAll(): Promise<void> {
    return Promise.all([...this.open].map((p) => p.close())).then(() => undefined);
  }

  /**
   * One POST whose body (`value`, `bytes` long; `raw`: as received) is already read. `who`: its
   * token's client and the toolset its stateless session gets (the URL's `?toolset=`, else the
   * token's), as a session's initialize would: server/discover and tools/list answer for that toolset.
   */
  post(req: IncomingMessage, res: ServerResponse, value: unknown, bytes: number, who: Who, raw: Buffer): void | Promise<void> {
    const { client, toolset } = who;
    if (Array.isArray(value)) return rpcError(res, 400, ErrorCode.InvalidRequest, 'Invalid Request: batches are not part of protocol version 2026-07-28');
    const c = classify(value);
    if (c.kind === 'invalid' || c.kind === 'bad-response') return rpcError(res, 400, ErrorCode.InvalidRequest, `Invalid Request: ${c.reason}`);
    if (c.kind === 'response') return rpcError(res, 400, ErrorCode.InvalidRequest, 'Invalid Request: a client sends no responses in protocol version 2026-07-28');
    if (c.kind === 'notification') {
      // The revision defines none over HTTP (closing a stream cancels); accepted and ignored.
      res.writeHead(202, { 'content-length': '0' }).end();
      return;
    }
    const msg = c.msg;
    const id = msg.id;
    const refuse = (status: number, err: RpcError): void => rpcError(res, status, err.code, err.message, id, err.data);
    if (!MODERN_METHODS.has(msg.method)) return refuse(404, new RpcError(ErrorCode.MethodNotFound, `Method not found: ${msg.method}`));
    const mismatch = headerMismatch(req, msg.method, msg.params);
    if (mismatch) return refuse(400, new RpcError(ModernError.HeaderMismatch, `Header mismatch: ${mismatch}`));
    try {
      readEnvelope(msg.params);
    } catch (err) {
      return refuse(400, err as RpcError);
    }
    // In a cluster: a retry whose call another daemon holds is that daemon's to answer.
    const cluster = this.opts.cluster;
    if (cluster) {
      const via = cluster.arrival(req, raw);
      if (!via.ok) return refuse(403, new RpcError(HttpRpcCode.Transport, `Forbidden: ${via.why}`));
      const owner = cluster.ownerOf(msg);
      if (owner && via.from !== undefined) return cluster.misrouted(res, id, owner);
      if (owner) return cluster.forward(req, res, raw, owner, id);
    }
    const full = this.opts.registry.statelessRefusal(this.open.size, client, this.perClient.get(client));
    if (full) return sendOverloaded(res, full);
    // Keep-alive comments on an open SSE answer, as on sessions' streams: proxies do not time
    // out a quiet listen stream, and a peer gone without a FIN is found.
    const post = new ModernPost(res, id, maxBacklogBytes(this.opts.maxMessageBytes), this.opts.registry.keepaliveMs, this.opts.log);
    this.open.add(post);
    this.perClient.add(client);
    const jwt = who.jwt;
    const hostToken = jwt && ((): string | undefined => (Date.now() < jwt.expiresAt ? jwt.token : undefined));
    this.opts.open(post, { kind: 'streamable', client, ...(toolset !== undefined && { toolset }), stateless: true, ...(hostToken && { hostToken }) });
    const closed = post.onclose;
    post.onclose = (reason) => {
      this.open.delete(post);
      this.perClient.remove(client);
      closed?.(reason);
    };
    post.deliver(value, bytes);
  }
}

/** What disagrees between the standard headers and the body, or undefined. */
function headerMismatch(req: IncomingMessage, method: string, params: Params | undefined): string | undefined {
  const version = header(req, 'mcp-protocol-version');
  const declared = (params?._meta as Params | undefined)?.[META.protocolVersion];
  if (version === undefined) return 'the MCP-Protocol-Version header is required';
  if (version !== declared) return `MCP-Protocol-Version header ${JSON.stringify(version)} does not match the body's ${JSON.stringify(declared)}`;
  const m = header(req, 'mcp-method');
  if (m === undefined) return 'the Mcp-Method header is required';
  if (m !== method) return `Mcp-Method header ${JSON.stringify(m)} does not match the body's method ${JSON.stringify(method)}`;
  const field = NAMED[method];
  if (!field) return undefined;
  const raw = header(req, 'mcp-name');
  if (raw === undefined) return `the Mcp-Name header is required for ${method}`;
  const name = decodeHeaderValue(raw);
  if (name === undefined) return 'the Mcp-Name header is not valid base64 in its =?base64?...?= form';
  if (name !== params?.[field]) return `Mcp-Name header ${JSON.stringify(name)} does not match the body's params.${field}`;
  return undefined;
}

/** `=?base64?...?=` is the UTF-8 of the base64 inside; anything else is the value as it is. */
export function decodeHeaderValue(v: string): string | undefined {
  if (!v.startsWith('=?base64?') || !v.endsWith('?=') || v.length < 11) return v;
  const b64 = v.slice(9, -2);
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64)) return undefined;
  return Buffer.from(b64, 'base64').toString('utf8');
}

function rpcError(res: ServerResponse, status: number, code: number, message: string, id: JsonRpcId | null = null, data?: unknown): void {
  if (id === null && data === undefined) return sendError(res, status, code === ErrorCode.InvalidRequest ? HttpRpcCode.InvalidRequest : code, message);
  sendWire(res, status, encodeChunks(errorResponse(id, { code, message, ...(data !== undefined && { data }) })));
}

/**
 * The transport under one modern request: its answer, and whatever goes before it. Plain JSON
 * when the answer comes first (most calls); an SSE stream from the first message that is not
 * the answer (progress, a log message asked for, a listen stream's notices).
 */
export class ModernPost implements Transport {
  onmessage?: Transport['onmessage'];
  onframeerror?: (err: FrameError) => void;
  onclose?: (reason: string) => void;
  private writer: SseWriter | undefined;
  private keepalive: NodeJS.Timeout | undefined;
  private done = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly id: JsonRpcId,
    private readonly maxBacklog: number,
    private readonly keepaliveMs: number,
    private readonly log: Logger,
  ) {
    // The host closing the response before the answer is how it cancels (2026-07-28).
    res.on('close', () => this.finish('the host closed the response stream'));
  }

  deliver(value: unknown, bytes: number): void {
    this.onmessage?.(value, undefined, bytes);
  }

  send(msg: Incoming, _related?: JsonRpcId): Wire | void {
    if (this.done || Array.isArray(msg)) return;
    const wire = encodeChunks(msg);
    const m = msg as { id?: JsonRpcId; method?: string; error?: { code: number } };
    if (m.method === undefined && m.id === this.id) {
      if (this.writer) {
        this.writer.event(wire);
        this.writer.end();
      } else {
        // 200 even for an error: the revision's 400s and 404s (envelope, headers, unknown
        // method) are answered before a request gets here; an error from further on (an
        // upstream's own -32601, say) is an answer, not a refusal of this request.
        sendWire(this.res, 200, wire);
        // A host that never reads it is cut once stuck (answer-watch.ts).
        watchAnswer(this.res, queuedLength(wire), { transport: 'http', log: this.log });
      }
      this.finish('answered');
      return wire;
    }
    // Only messages tied to this request reach this transport (HostSession sees to it).
    if (this.writer && !this.writer.admit(msg)) return; // shed for a host that is behind (backlog.ts)
    if (!this.writer) {
      this.writer = new SseWriter(this.res, {}, { transport: 'http', log: this.log, maxBytes: this.maxBacklog, resend: (m) => this.send(m) });
      this.keepalive = setInterval(() => this.writer?.comment('keep-alive'), this.keepaliveMs);
      this.keepalive.unref();
    }
    return this.writer.event(wire) ? wire : undefined;
  }

  close(): Promise<void> {
    if (!this.done) {
      this.writer?.end();
      if (!this.res.headersSent) this.res.writeHead(204).end();
      else if (!this.res.writableEnded) this.res.end();
    }
    this.finish('closed by mcpmux');
    return Promise.resolve();
  }

  private finish(reason: string): void {
    if (this.done) return;
    this.done = true;
    clearInterval(this.keepalive);
    // Not from inside send(): the endpoint is still writing the answer.
    queueMicrotask(() => this.onclose?.(reason));
  }
}
