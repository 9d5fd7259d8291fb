// A 2026-07-28 host's retry that lands on a daemon other than the one holding its call. Modern
// requests need no affinity at the balancer; a call the era bridge parked (a legacy upstream
// asked the host something mid-call) does: it lives in the memory of the daemon that parked it,
// holding that daemon's upstream call open. Its requestState names that daemon (session/parked.ts,
// signed with the cluster's shared key), so any daemon can check the token and send the retry
// on to the owner, where it resumes the call as if it had come there directly.
//
// Decided here, in the HTTP layer, once the body is parsed and the standard checks passed and
// before any session sees the request: a forged or altered token is never forwarded (the local
// session refuses it as usual, -32602), nor a token of this daemon's own. The host's request is
// relayed as received (body bytes, Authorization, the MCP headers) to the owner's
// cluster.advertiseUrl, stamped with `X-Mcpmux-Forwarded`: this daemon's id, a time and an
// HMAC (the cluster's forwarding key) over both, the method, the target and the body's digest.
// The owner checks the stamp (a bad one is a 403), authenticates the host's token as for any
// request, and never forwards a stamped request again: no loops. Its answer (JSON, or an SSE
// stream with progress before the result) is relayed back as it comes; the host closing its
// response closes the owner's, which cancels there.
//
// An owner that is gone (not in Redis any more, or not answering, or shutting down) cannot
// resume anything: the host gets -32602 "Invalid requestState: the daemon that held this call is
// gone; ..." and calls again. The retry always goes to the address signed into the token, never
// to one read from Redis (whoever can write Redis must not be able to draw hosts' tokens to
// itself): Redis only says whether the owner is alive, and a record whose address differs from
// the token's is a warning and "gone". While Redis is down the token's address is used as is.

import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import http, { type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import https from 'node:https';
import { pipeline } from 'node:stream';
import type { ClusterIdentity } from '../../cluster/identity.js';
import { encodeChunks } from '../../jsonrpc/framing.js';
import { ErrorCode, errorResponse, type JsonRpcId, type JsonRpcRequest } from '../../jsonrpc/message.js';
import type { Logger } from '../../observe/logger.js';
import type { Params } from '../../protocol/mcp.js';
import { openToken, type Payload } from '../../session/parked.js';
import { sendWire } from './respond.js';
import { splitTarget } from './url.js';

/** The stamp on a request one daemon forwards to another. */
export const FORWARDED_HEADER = 'x-mcpmux-forwarded';
/** On a relayed answer: the daemon that answered it (the call's owner). */
export const ANSWERED_BY_HEADER = 'x-mcpmux-answered-by';
/** How far a stamp's time may be from this daemon's clock (both ways: clocks of machines differ a little). */
const STAMP_WINDOW_MS = 30_000;
/** How long reaching the owner may take before it counts as gone. */
const CONNECT_TIMEOUT_MS = 5_000;
/** How long the owner may take to start its answer when the caller sets no bound (answerWithinMs). */
const ANSWER_TIMEOUT_MS = 30_000;
/** The largest 403 body read to tell a refused stamp from another refusal. */
const REFUSAL_BYTES = 64 * 1024;
/** The requests whose requestState may name a parked call (modern.ts withInput). */
const RESUMABLE = new Set(['tools/call', 'prompts/get', 'resources/read']);

/** Headers that belong to one connection, not to the request: never relayed. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'content-length', 'expect', FORWARDED_HEADER]);

export interface ClusterForwardOptions {
  self: ClusterIdentity;
  /** The daemon `id` as Redis knows it: its address, null when it is gone, undefined when Redis cannot say. */
  lookup(id: string): Promise<{ advertiseUrl: string } | null | undefined>;
  /**
   * How long the owner may take to start its answer (headers) once connected: a JSON answer
   * starts only when the call ends, so this is the longest a call may run (timeouts.maxMs) and
   * a little; past it the owner is stuck and counts as gone. Default ANSWER_TIMEOUT_MS.
   */
  answerWithinMs?: () => number;
  log: Logger;
}

/** Who sent a request: a host (`from` undefined) or the daemon `from` (its stamp checked out). */
export type Arrival = { ok: true; from: string | undefined } | { ok: false; why: string };

/** A verified token of another daemon's: whom to forward to. */
export type Owner = Required<Pick<Payload, 'o'>> & Pick<Payload, 'u'>;

export class ClusterForward {
  constructor(private readonly opts: ClusterForwardOptions) {}

  /** Whether `req` came from a host or from another daemon of this cluster; a stamp that does not check out is refused. */
  arrival(req: IncomingMessage, body: Buffer): Arrival {
    const raw = req.headers[FORWARDED_HEADER];
    if (raw === undefined) return { ok: true, from: undefined };
    const [version, from, ts, sig, extra] = (Array.isArray(raw) ? raw.join(' ') : raw).split(' ');
    if (version !== 'v1' || !from || !ts || !sig || extra !== undefined) return { ok: false, why: `${FORWARDED_HEADER} is malformed` };
    const at = Number(ts);
    if (!Number.isSafeInteger(at) || Math.abs(Date.now() - at) > STAMP_WINDOW_MS) return { ok: false, why: `${FORWARDED_HEADER} is stale (or the daemons' clocks disagree by more than ${STAMP_WINDOW_MS / 1000} s)` };
    const want = Buffer.from(this.stamp(from, ts, req.method ?? '', req.url ?? '', body));
    const got = Buffer.from(sig);
    if (got.length !== want.length || !timingSafeEqual(got, want)) return { ok: false, why: `${FORWARDED_HEADER} is not signed with this cluster's secret` };
    return { ok: true, from };
  }

  /**
   * The daemon a request's requestState names, when it is a genuine token (MAC checked) of
   * another daemon of this cluster; else undefined: the request is this daemon's to answer
   * (and a forged, altered or foreign token is refused by the session, never forwarded).
   */
  ownerOf(msg: JsonRpcRequest): Owner | undefined {
    if (!RESUMABLE.has(msg.method)) return undefined;
    const state = (msg.params as Params | undefined)?.requestState;
    if (typeof state !== 'string') return undefined;
    const opened = openToken(state, this.opts.self.stateKey);
    if (!opened.ok) return undefined;
    // Expired: no daemon can resume it; refused here (the session says "expired"), no lookup, no hop.
    if (!(opened.payload.exp > Date.now())) return undefined;
    const { o, u } = opened.payload;
    return typeof o === 'string' && o !== this.opts.self.id ? { o, ...(typeof u === 'string' && { u }) } : undefined;
  }

  /**
   * A retry stamped by another daemon whose token names neither this daemon: the daemon it
   * names has restarted (a new id at the same address) and its call is gone with the old one.
   * Never forwarded again.
   */
  misrouted(res: ServerResponse, id: JsonRpcId, owner: Owner): void {
    gone(res, id, owner, 'the daemon at its address is another one now (it restarted)');
  }

  /** Relays the host's request (`body`: its bytes as received) to `owner` and its answer back. */
  async forward(req: IncomingMessage, res: ServerResponse, body: Buffer, owner: Owner, id: JsonRpcId): Promise<void> {
    // Redis says only whether the owner is alive; the address is the token's (signed).
    const known = await this.opts.lookup(owner.o);
    if (known === null) return gone(res, id, owner, 'it is no longer in the cluster');
    if (known && known.advertiseUrl !== owner.u) {
      this.opts.log.warn({ owner: owner.o, signed: owner.u, inStore: known.advertiseUrl }, 'the shared store gives a daemon another address than its signed requestState does; not forwarding there (check who writes to the store)');
      return gone(res, id, owner, 'its address in the shared store is not the one it signed');
    }
    let target: URL;
    try {
      // The owner's origin with this request's path and query only (routed here, the path is /mcp).
      const { path, query } = splitTarget(req.url ?? '/mcp');
      target = new URL(owner.u ?? '');
      target.pathname = path;
      target.search = query;
    } catch {
      return gone(res, id, owner, 'its address is unknown');
    }
    // The host gave up while the owner was looked up: nothing to resume for it.
    if (res.destroyed) return;
    const ts = String(Date.now());
    // Signed as the owner will see it (the URL parser may have normalised the host's target).
    const path = target.pathname + target.search;
    const headers: OutgoingHttpHeaders = {
      ...relayed(req.headers),
      'content-length': body.length,
      [FORWARDED_HEADER]: `v1 ${this.opts.self.id} ${ts} ${this.stamp(this.opts.self.id, ts, 'POST', path, body)}`,
    };
    this.opts.log.debug({ owner: owner.o, url: target.origin }, 'forwarding a retry to the daemon that holds its call');
    const answerWithinMs = this.opts.answerWithinMs?.() ?? ANSWER_TIMEOUT_MS;
    await new Promise<void>((resolve) => {
      const out = (target.protocol === 'https:' ? https : http).request(target, { method: 'POST', headers });
      let answered = false;
      // Settled once the exchange with the owner is over, whichever way (answered, failed, cancelled).
      out.once('close', () => {
        clearTimeout(connecting);
        clearTimeout(answering);
        resolve();
      });
      const connecting = setTimeout(() => out.destroy(new Error(`no connection within ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS);
      // Connected but silent (a stuck owner): the call cannot be waited for longer than any call may run.
      const answering = setTimeout(() => out.destroy(new Error(`no answer within ${answerWithinMs} ms`)), answerWithinMs);
      out.on('socket', (s) => (s.connecting ? s.once('connect', () => clearTimeout(connecting)) : clearTimeout(connecting)));
      out.on('response', (up) => {
        clearTimeout(connecting);
        clearTimeout(answering);
        answered = true;
        // An owner shutting down (close()) refuses with 503 before anything ran: gone, call again.
        // Never relayed: a balancer would replay a 503 and the host would see it in the end.
        if (up.statusCode === 503) {
          up.resume();
          return gone(res, id, owner, 'it is shutting down');
        }
        if (up.statusCode === 403) return void this.refused(up, res, id, owner);
        res.writeHead(up.statusCode ?? 502, { ...relayed(up.headers), ...(up.headers['content-length'] !== undefined && { 'content-length': up.headers['content-length'] }), [ANSWERED_BY_HEADER]: owner.o });
        // SSE events go on as they arrive; either side ending early ends the other (the host
        // closing its response cancels on the owner; the owner cut mid-answer ends the host's).
        pipeline(up, res, () => {});
      });
      out.on('error', (err) => {
        // Nothing came back: the owner is gone (refused, reset, unreachable, stuck). Cut mid-answer: the host sees the stream end.
        if (!answered) {
          this.opts.log.debug({ owner: owner.o, err: describe(err) }, 'the daemon holding a retry\'s call does not answer');
          gone(res, id, owner, `it does not answer: ${describe(err)}`);
        } else res.destroy();
      });
      // The host closing its response before the answer is how it cancels: the owner's closes too.
      res.once('close', () => {
        if (!res.writableFinished) out.destroy();
      });
      out.end(body);
    });
  }

  /**
   * The owner's 403. A refused stamp (the daemons' cluster.secret differ, or their clocks) is
   * this cluster's fault, not the host's: logged here, and an internal error for the host.
   * Any other 403 (the host's own, e.g. its Origin) is relayed.
   */
  private refused(up: IncomingMessage, res: ServerResponse, id: JsonRpcId, owner: Owner): void {
    const chunks: Buffer[] = [];
    let size = 0;
    up.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= REFUSAL_BYTES) chunks.push(c);
    });
    up.once('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let why: string | undefined;
      try {
        const message = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
        if (typeof message === 'string' && message.startsWith(`Forbidden: ${FORWARDED_HEADER} `)) why = message.slice('Forbidden: '.length);
      } catch {
        // Not mcpmux's JSON: relayed as it came.
      }
      if (res.destroyed) return;
      if (why === undefined) {
        res.writeHead(403, { ...relayed(up.headers), 'content-length': Buffer.byteLength(text), [ANSWERED_BY_HEADER]: owner.o });
        return void res.end(text);
      }
      this.opts.log.warn({ owner: owner.o, url: owner.u, why }, 'the daemon holding a retry\'s call refused this daemon\'s forwarding stamp: the daemons disagree on cluster.secret or their clocks');
      const message = "Internal error: the cluster's daemons disagree on cluster.secret or their clocks; the call could not be resumed";
      sendWire(res, 200, encodeChunks(errorResponse(id, { code: ErrorCode.InternalError, message, data: { daemon: owner.o } })));
    });
    up.once('error', () => res.destroy());
  }

  private stamp(from: string, ts: string, method: string, url: string, body: Buffer): string {
    const digest = createHash('sha256').update(body).digest('base64url');
    return createHmac('sha256', this.opts.self.forwardKey).update(`v1\n${from}\n${ts}\n${method}\n${url}\n${digest}`).digest('base64url');
  }
}

/** The headers of a request or answer worth relaying: all but those of the connection. */
function relayed(h: IncomingHttpHeaders): OutgoingHttpHeaders {
  // ...and those the sender named in its Connection header (RFC 9110 7.6.1).
  const named = new Set(
    String(h.connection ?? '')
      .split(',')
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  );
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined && !HOP_BY_HOP.has(k) && !named.has(k)) out[k] = v;
  return out;
}

/** The owner cannot resume the call: the host must make it again. -32602 like every other unusable requestState. */
function gone(res: ServerResponse, id: JsonRpcId, owner: Owner, why: string): void {
  if (res.headersSent) return void res.end();
  const message = 'Invalid requestState: the daemon that held this call is gone; make the call again (without requestState)';
  sendWire(res, 200, encodeChunks(errorResponse(id, { code: ErrorCode.InvalidParams, message, data: { daemon: owner.o, reason: why } })));
}

function describe(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code ?? err.message;
}
