// Minimal keep-alive JSON-RPC clients, so that the client's own cost does not cap what is
// measured (the SDK's client validates every message with zod, and its HTTP transport goes
// through fetch). One parse per incoming message, one JSON.stringify per request, no schema.
//
//   StdioLight  newline JSON over a child's stdin/stdout, id -> resolver map
//   HttpLight   node:http, keep-alive Agent, POST /mcp with Mcp-Session-Id; JSON or SSE bodies
//   WsLight     the `ws` package, subprotocol "mcp", one JSON message per text frame
//
// request() resolves with the whole response object ({result} or {error}); it rejects only on
// transport failures and timeouts. Every request has a deadline; a 250 ms sweeper enforces it.

import http from 'node:http';
import WebSocket from 'ws';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

export const PROTOCOL_VERSION = LATEST_PROTOCOL_VERSION;
export const CLIENT_INFO = { name: 'mcpmux-bench-light', version: '1.0.0' };

class Base {
  constructor(defaultTimeoutMs) {
    this.nextId = 1;
    this.pending = new Map(); // id -> {resolve, reject, deadline, abort?}
    this.timeoutMs = defaultTimeoutMs;
    this.closed = false;
    this.sweeper = setInterval(() => this.sweep(), 250);
    this.sweeper.unref();
  }

  sweep() {
    const now = Date.now();
    for (const [id, p] of this.pending) {
      if (now > p.deadline) {
        this.pending.delete(id);
        p.abort?.();
        p.reject(new Error(`${this.label}: request ${p.method} (id ${id}) timed out after ${p.timeout} ms`));
      }
    }
  }

  /** Settles the pending request a response belongs to; answers server pings. */
  dispatch(msg) {
    if (msg === null || typeof msg !== 'object') return;
    if (Array.isArray(msg)) {
      for (const m of msg) this.dispatch(m);
      return;
    }
    if ('method' in msg) {
      if ('id' in msg) {
        // A request from the server (ping, or something we did not declare support for).
        const reply = msg.method === 'ping' ? { jsonrpc: '2.0', id: msg.id, result: {} } : { jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'not supported by the bench client' } };
        this.sendRaw(reply);
      }
      return; // notifications are ignored
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    p.resolve(msg);
  }

  failAll(err) {
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      p.reject(err);
    }
  }

  request(method, params, timeoutMs = this.timeoutMs) {
    if (this.closed) return Promise.reject(new Error(`${this.label}: closed`));
    const id = this.nextId++;
    const msg = params === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params };
    return new Promise((resolve, reject) => {
      const p = { resolve, reject, deadline: Date.now() + timeoutMs, timeout: timeoutMs, method };
      this.pending.set(id, p);
      this.sendRequest(msg, p);
    });
  }

  notify(method, params) {
    return this.sendRaw(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params });
  }

  /** initialize + notifications/initialized; resolves with the InitializeResult. */
  async initialize(timeoutMs = this.timeoutMs) {
    const r = await this.request('initialize', { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: CLIENT_INFO }, timeoutMs);
    if (r.error) throw new Error(`${this.label}: initialize failed: ${JSON.stringify(r.error)}`);
    this.protocolVersion = r.result.protocolVersion;
    await this.notify('notifications/initialized');
    return r.result;
  }

  stopTimers() {
    clearInterval(this.sweeper);
  }
}

// ---- stdio ------------------------------------------------------------------------------------

export class StdioLight extends Base {
  /** @param child a ChildProcess with piped stdin/stdout */
  constructor(child, { timeoutMs = 30_000, label = 'stdio' } = {}) {
    super(timeoutMs);
    this.label = label;
    this.child = child;
    this.parts = [];
    child.stdout.on('data', (chunk) => this.onData(chunk));
    child.stdout.on('end', () => this.onEnd('its stdout ended'));
    child.once('exit', (code, sig) => this.onEnd(`the process exited (${sig ?? `code ${code}`})`));
  }

  onEnd(why) {
    if (this.closed) return;
    this.closed = true;
    this.stopTimers();
    this.failAll(new Error(`${this.label}: ${why}`));
  }

  onData(chunk) {
    let start = 0;
    let nl;
    while ((nl = chunk.indexOf(10, start)) !== -1) {
      // When the last byte of the newest message arrived, before we join and parse it (bench:
      // how long the server took to deliver a large answer, net of this client's own work).
      this.lineDoneAt = performance.now();
      let line;
      if (this.parts.length) {
        this.parts.push(chunk.subarray(start, nl));
        line = Buffer.concat(this.parts).toString('utf8');
        this.parts = [];
      } else {
        line = chunk.toString('utf8', start, nl);
      }
      start = nl + 1;
      if (line.length === 0 || (line.length === 1 && line === '\r')) continue;
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        continue; // not ours to judge here; tests cover framing
      }
      this.dispatch(msg);
    }
    if (start < chunk.length) this.parts.push(start === 0 ? chunk : chunk.subarray(start));
  }

  sendRequest(msg) {
    this.child.stdin.write(JSON.stringify(msg) + '\n');
  }

  sendRaw(msg) {
    if (!this.closed) this.child.stdin.write(JSON.stringify(msg) + '\n');
  }

  async close() {
    this.closed = true;
    this.stopTimers();
    this.failAll(new Error(`${this.label}: closed`));
  }
}

// ---- Streamable HTTP --------------------------------------------------------------------------

export class HttpLight extends Base {
  constructor(url, { timeoutMs = 30_000, label = 'http', maxSockets = 256 } = {}) {
    super(timeoutMs);
    this.label = label;
    this.url = new URL(url);
    this.agent = new http.Agent({ keepAlive: true, maxSockets, keepAliveMsecs: 10_000 });
    this.sessionId = undefined;
    this.protocolVersion = undefined;
    this.mode = undefined; // 'json' | 'sse' as answered by the server (last seen)
  }

  headers(len) {
    const h = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'content-length': len,
    };
    if (this.sessionId) h['mcp-session-id'] = this.sessionId;
    if (this.protocolVersion) h['mcp-protocol-version'] = this.protocolVersion;
    return h;
  }

  sendRequest(msg, p) {
    this.post(msg, (err, res, bodies) => {
      if (!this.pending.has(msg.id)) return; // timed out already
      if (err) {
        this.pending.delete(msg.id);
        p.reject(err);
        return;
      }
      if (msg.method === 'initialize' && res.headers['mcp-session-id']) this.sessionId = res.headers['mcp-session-id'];
      for (const m of bodies) this.dispatch(m);
      if (this.pending.has(msg.id)) {
        this.pending.delete(msg.id);
        p.reject(new Error(`${this.label}: HTTP ${res.statusCode} without a response for id ${msg.id}${bodies.length ? '' : `: ${res.rawText?.slice(0, 200)}`}`));
      }
    }, p);
  }

  sendRaw(msg) {
    return new Promise((resolve, reject) =>
      this.post(msg, (err, res) => {
        if (err) reject(err);
        else if (res.statusCode >= 300) reject(new Error(`${this.label}: HTTP ${res.statusCode} for ${msg.method ?? 'a response'}`));
        else resolve();
      }),
    );
  }

  /** POSTs one message; calls back with (err, res, parsedMessages). */
  post(msg, cb, p) {
    const body = Buffer.from(JSON.stringify(msg));
    const req = http.request(
      { host: this.url.hostname, port: this.url.port, path: this.url.pathname + this.url.search, method: 'POST', agent: this.agent, headers: this.headers(body.length) },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('error', (e) => cb(e));
        res.on('end', () => {
          const text = chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8');
          const ct = res.headers['content-type'] ?? '';
          let bodies = [];
          try {
            if (ct.startsWith('text/event-stream')) {
              this.mode = 'sse';
              bodies = parseSse(text);
            } else if (ct.startsWith('application/json') && text.length) {
              this.mode = 'json';
              const v = JSON.parse(text);
              bodies = Array.isArray(v) ? v : [v];
            }
          } catch (e) {
            cb(new Error(`${this.label}: unparsable ${ct} body (HTTP ${res.statusCode}): ${e.message}`));
            return;
          }
          if (res.statusCode >= 400 && bodies.length === 0) {
            cb(new Error(`${this.label}: HTTP ${res.statusCode}${text ? `: ${text.slice(0, 200)}` : ''}`));
            return;
          }
          res.rawText = text;
          cb(null, res, bodies);
        });
      },
    );
    req.on('error', (e) => cb(e));
    if (p) p.abort = () => req.destroy();
    req.end(body);
  }

  async close() {
    if (this.sessionId && !this.closed) {
      // End the session (DELETE), best effort, bounded.
      await new Promise((resolve) => {
        const req = http.request(
          { host: this.url.hostname, port: this.url.port, path: this.url.pathname, method: 'DELETE', agent: this.agent, headers: { 'mcp-session-id': this.sessionId, ...(this.protocolVersion && { 'mcp-protocol-version': this.protocolVersion }) }, timeout: 2000 },
          (res) => {
            res.resume();
            res.on('end', resolve);
            res.on('error', resolve);
          },
        );
        req.on('error', resolve);
        req.on('timeout', () => {
          req.destroy();
          resolve();
        });
        req.end();
      });
    }
    this.closed = true;
    this.stopTimers();
    this.failAll(new Error(`${this.label}: closed`));
    this.agent.destroy();
  }
}

/**
 * The JSON messages in a complete SSE body (the data lines of each event, joined by \n).
 * Scans with indexOf (no regex over the body), so a 10 MB event costs about one JSON.parse.
 */
export function parseSse(text) {
  const out = [];
  const n = text.length;
  let pos = 0;
  let data = null;
  const flush = () => {
    if (data !== null && data.length > 0) out.push(JSON.parse(data));
    data = null;
  };
  while (pos < n) {
    let eol = text.indexOf('\n', pos);
    if (eol === -1) eol = n;
    const end = eol > pos && text.charCodeAt(eol - 1) === 13 ? eol - 1 : eol;
    if (end === pos) flush(); // blank line: end of event
    else if (text.startsWith('data:', pos)) {
      const v = text.slice(text.charCodeAt(pos + 5) === 32 ? pos + 6 : pos + 5, end);
      data = data === null ? v : `${data}\n${v}`;
    }
    pos = eol + 1;
  }
  flush();
  return out;
}

// ---- WebSocket --------------------------------------------------------------------------------

export class WsLight extends Base {
  constructor(url, { timeoutMs = 30_000, label = 'ws' } = {}) {
    super(timeoutMs);
    this.label = label;
    this.url = url;
  }

  open(timeoutMs = 10_000) {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(this.url, 'mcp', { maxPayload: 64 * 1024 * 1024, perMessageDeflate: false, handshakeTimeout: timeoutMs });
      this.ws = ws;
      ws.on('open', () => {
        if (ws.protocol !== 'mcp') {
          reject(new Error(`${this.label}: server did not accept subprotocol "mcp" (got "${ws.protocol}")`));
          ws.terminate();
          return;
        }
        resolve();
      });
      ws.on('unexpected-response', (_req, res) => reject(new Error(`${this.label}: upgrade refused: HTTP ${res.statusCode}`)));
      ws.on('error', (e) => {
        reject(e);
        this.failAll(e);
      });
      ws.on('close', (code, reason) => {
        this.closed = true;
        this.stopTimers();
        this.failAll(new Error(`${this.label}: socket closed (${code} ${reason})`));
      });
      ws.on('message', (data, isBinary) => {
        let msg;
        try {
          msg = JSON.parse(isBinary ? Buffer.from(data).toString('utf8') : data.toString('utf8'));
        } catch {
          return;
        }
        this.dispatch(msg);
      });
    });
  }

  sendRequest(msg) {
    this.ws.send(JSON.stringify(msg));
  }

  sendRaw(msg) {
    if (!this.closed) this.ws.send(JSON.stringify(msg));
  }

  async close() {
    this.closed = true;
    this.stopTimers();
    this.failAll(new Error(`${this.label}: closed`));
    if (this.ws && this.ws.readyState !== WebSocket.CLOSED) {
      const done = new Promise((r) => this.ws.once('close', r));
      this.ws.close();
      const t = setTimeout(() => this.ws.terminate(), 2000);
      await done;
      clearTimeout(t);
    }
  }
}

// ---- helpers ----------------------------------------------------------------------------------

/** How many tools a light client's server lists, every page walked (nextCursor followed). */
export async function countTools(c, timeoutMs = 60_000) {
  let cursor;
  let n = 0;
  do {
    const r = await c.request('tools/list', cursor === undefined ? {} : { cursor }, timeoutMs);
    if (r.error) throw new Error(`tools/list failed: ${JSON.stringify(r.error)}`);
    n += r.result.tools.length;
    cursor = r.result.nextCursor;
  } while (cursor !== undefined && cursor !== null);
  return n;
}
