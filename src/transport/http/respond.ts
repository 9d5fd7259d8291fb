// Small HTTP helpers shared by the host-facing endpoints: JSON-RPC error bodies with a status,
// reading a body under a size limit, and single-valued header access.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { encodeChunks, parseBytes, wireBytes, writeWire, type Wire } from '../../jsonrpc/framing.js';
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

/** Ends `res` with a JSON-RPC error response that has no id (the spec's shape for HTTP errors). */
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
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
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

/** The first value of a header, or undefined. */
export function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

export type Body = { ok: true; bytes: Buffer } | { ok: false; tooLarge: true } | { ok: false; tooLarge: false; error: string };

/**
 * Reads the whole request body, at most `limit` bytes. Over the limit (by Content-Length up
 * front, or while streaming) it stops reading: the caller answers 413 and the connection is
 * closed, since the rest of the body will never be read.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Body> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume(); // drain what arrives until the connection closes
    return Promise.resolve({ ok: false, tooLarge: true });
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (b: Body): void => {
      if (done) return;
      done = true;
      req.off('data', onData);
      resolve(b);
    };
    const onData = (c: Buffer): void => {
      size += c.length;
      if (size > limit) {
        chunks.length = 0;
        req.resume();
        finish({ ok: false, tooLarge: true });
        return;
      }
      chunks.push(c);
    };
    req.on('data', onData);
    req.once('end', () => finish({ ok: true, bytes: Buffer.concat(chunks, size) }));
    req.once('error', (e) => finish({ ok: false, tooLarge: false, error: e.message }));
    req.once('close', () => finish({ ok: false, tooLarge: false, error: 'connection closed' }));
  });
}

/**
 * A POST's JSON body, or undefined once `res` is answered: 415 for another content type, 413
 * over the limit, 400 for bad JSON (or nothing, if the peer went away while we read).
 */
export async function readJsonBody(req: IncomingMessage, res: ServerResponse, limit: number): Promise<{ value: unknown; bytes: number } | undefined> {
  if (mediaType(header(req, 'content-type')) !== 'application/json') {
    sendError(res, 415, HttpRpcCode.Transport, 'Unsupported Media Type: Content-Type must be application/json');
    return undefined;
  }
  const body = await readBody(req, limit);
  if (!body.ok) {
    if (body.tooLarge) sendTooLarge(res, limit);
    return undefined;
  }
  const frame = parseBytes(body.bytes);
  if (!frame.ok) {
    sendError(res, 400, HttpRpcCode.ParseError, `Parse error: ${frame.detail}`);
    return undefined;
  }
  return { value: frame.value, bytes: frame.bytes };
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
