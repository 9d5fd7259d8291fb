// Small HTTP helpers shared by the host-facing endpoints: JSON-RPC error bodies with a status,
// reading a body under a size limit, and single-valued header access.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { encodeChunks, parseBytes, wireBytes, writeWire, type Wire } from '../../jsonrpc/framing.js';
import { BODY_BUDGET_MESSAGES, type BodyBudget } from './body-budget.js';
import { mediaType } from './media.js';

/** Codes for errors that happen at the HTTP level, before any JSON-RPC peer is involved. */
export const HttpRpcCode = {
  /** The SDK's generic transport-level code (used for 400/403/404/405/406/415 bodies). */
  Transport: -32000,
  SessionNotFound: -32001,
  ParseError: -32700,
  InvalidRequest: -32600,
  /** mcpmux's own: too many sessions (outside JSON-RPC's reserved range, like MuxError). */
  Overloaded: -31004,
} as const;

/**
 * Ends `res` with a JSON-RPC error response that has no id (the spec's shape for HTTP errors).
 * A refusal of a request whose body was not read closes the connection (after LINGER_MS):
 * keeping it would mean reading (and throwing away) whatever the client still sends, up to
 * any length it declared, before the next request.
 */
export function sendError(
  res: ServerResponse,
  status: number,
  code: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const body = JSON.stringify({ jsonrpc: '2.0', id: null, error: { code, message } });
  const unread = res.req !== undefined && hasBody(res.req) && !res.req.complete;
  if (unread) lingerThenClose(res.req.socket);
  res.writeHead(status, { ...headers, ...(unread && { connection: 'close' }), 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Ends `res` with a JSON body (a JSON-RPC message or batch, or any JSON value). */
export function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  sendWire(res, status, encodeChunks(value), headers);
}

/** Ends `res` with a JSON body that is already encoded. */
export function sendWire(res: ServerResponse, status: number, body: Wire, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': wireBytes(body) });
  writeWire(res, body);
  res.end();
}

/**
 * How long a connection refused before its body was read stays open after the answer (what
 * still arrives is thrown away) before it is reset.
 */
const LINGER_MS = 500;

/**
 * Node ends the socket of a `connection: close` answer with destroySoon(): end, then destroy as
 * soon as the answer is flushed. A client still sending its body then gets a reset, and one
 * busy writing loses the answer it has not read yet. This socket is ended the same way but
 * destroyed LINGER_MS later, which lets the answer (and the end) reach the client first.
 */
function lingerThenClose(socket: Socket): void {
  socket.destroySoon = function (this: Socket): void {
    this.end();
    const timer = setTimeout(() => this.destroy(), LINGER_MS);
    timer.unref();
    this.once('close', () => clearTimeout(timer));
  };
}

/** A request that comes with a body (a length other than 0, or chunks). */
function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');
}

/** The first value of a header, or undefined. */
export function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

export type Body = { ok: true; bytes: Buffer } | { ok: false; refused: 'too-large' | 'busy' } | { ok: false; refused?: undefined; error: string };

/** The Content-Length a request declares, if it declares one. */
function declaredLength(req: IncomingMessage): number | undefined {
  const v = req.headers['content-length'];
  if (v === undefined) return undefined;
  const n = Number(v);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

/**
 * Reads the whole request body, at most `limit` bytes, holding its bytes against `budget` (the
 * declared length up front, else each chunk as it arrives). Refused without reading it when
 * the declared length is over the limit or does not fit the budget, and cut when the bytes
 * that arrive are: the caller answers (413, 503) and the connection is closed (sendError), so
 * the rest of the body is never read. A client that asked `Expect: 100-continue` is told to
 * go on only once its body is going to be read.
 */
export function readBody(req: IncomingMessage, res: ServerResponse, limit: number, budget?: BodyBudget): Promise<Body> {
  const declared = declaredLength(req);
  if (declared !== undefined && declared > limit) return Promise.resolve({ ok: false, refused: 'too-large' });
  let held = 0;
  if (budget && declared !== undefined) {
    if (!budget.take(declared)) return Promise.resolve({ ok: false, refused: 'busy' });
    held = declared;
  }
  if (header(req, 'expect')?.toLowerCase() === '100-continue' && !res.headersSent) res.writeContinue();
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (b: Body): void => {
      if (done) return;
      done = true;
      req.off('data', onData);
      budget?.give(held);
      held = 0;
      resolve(b);
    };
    const onData = (c: Buffer): void => {
      size += c.length;
      if (size > limit) {
        chunks.length = 0;
        return finish({ ok: false, refused: 'too-large' });
      }
      // A body of no declared length holds what has arrived so far.
      if (budget && declared === undefined) {
        if (!budget.take(c.length)) {
          chunks.length = 0;
          return finish({ ok: false, refused: 'busy' });
        }
        held += c.length;
      }
      chunks.push(c);
    };
    req.on('data', onData);
    req.once('end', () => finish({ ok: true, bytes: Buffer.concat(chunks, size) }));
    req.once('error', (e) => finish({ ok: false, error: e.message }));
    req.once('close', () => finish({ ok: false, error: 'connection closed' }));
  });
}

/**
 * A POST's JSON body, or undefined once `res` is answered: 415 for another content type, 413
 * over the limit, 503 past the budget of bodies being read, 400 for bad JSON (or nothing, if
 * the peer went away while we read).
 */
export async function readJsonBody(req: IncomingMessage, res: ServerResponse, limit: number, budget?: BodyBudget): Promise<{ value: unknown; bytes: number; raw: Buffer } | undefined> {
  if (mediaType(header(req, 'content-type')) !== 'application/json') {
    sendError(res, 415, HttpRpcCode.Transport, 'Unsupported Media Type: Content-Type must be application/json');
    return undefined;
  }
  const body = await readBody(req, res, limit, budget);
  if (!body.ok) {
    if (body.refused === 'too-large') sendTooLarge(res, limit);
    else if (body.refused === 'busy') {
      sendError(res, 503, HttpRpcCode.Overloaded, `Service Unavailable: request bodies being read already hold ${budget!.max} bytes (${BODY_BUDGET_MESSAGES} x limits.maxMessageBytes); try again`, { 'retry-after': '1' });
    }
    return undefined;
  }
  const frame = parseBytes(body.bytes);
  if (!frame.ok) {
    sendError(res, 400, HttpRpcCode.ParseError, `Parse error: ${frame.detail}`);
    return undefined;
  }
  // `raw`: the bytes as received (a request forwarded to another daemon goes on unchanged).
  return { value: frame.value, bytes: frame.bytes, raw: body.bytes };
}

/** Answers 413 and closes the connection (the unread rest of the body must not be parsed as a request). */
export function sendTooLarge(res: ServerResponse, limit: number): void {
  sendError(res, 413, HttpRpcCode.InvalidRequest, `Payload Too Large: the body exceeds ${limit} bytes (limits.maxMessageBytes)`, {
    connection: 'close',
  });
}

/** 503 when a session limit is reached (the message says which: SessionRegistry.refusal). */
export function sendOverloaded(res: ServerResponse, message: string): void {
  sendError(res, 503, HttpRpcCode.Overloaded, message, { 'retry-after': '5' });
}

/**
 * 503 for a request from a host that is not reading what it was already sent (backlog.ts): it
 * is taken again once the host has caught up.
 */
export function sendBehind(res: ServerResponse): void {
  sendError(res, 503, HttpRpcCode.Overloaded, 'Service Unavailable: this session is not reading its answers; send requests again once it has read them', {
    'retry-after': '1',
  });
}
