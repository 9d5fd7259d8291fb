// The light client over the older HTTP+SSE transport (protocol 2024-11-05), for peers that serve
// only that (mcp-hub's /mcp): GET the stream, read the `endpoint` event, POST each message to
// that URL (answered 202), and take the responses from the stream. Same request/dispatch/
// deadline code as the other light clients (it extends HttpLight and replaces only the wire).

import http from 'node:http';
import { HttpLight } from '../lib/light-client.mjs';

export class SseLight extends HttpLight {
  constructor(url, { timeoutMs = 30_000, label = 'sse' } = {}) {
    super(url, { timeoutMs, label });
    this.endpoint = undefined; // URL to POST to, from the stream's `endpoint` event
    this.mode = 'sse (2024-11-05 transport)';
  }

  /** Opens the event stream; resolves once the server named its message endpoint. */
  open(timeoutMs = 10_000) {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => fail(new Error(`${this.label}: no endpoint event within ${timeoutMs} ms`)), timeoutMs);
      const fail = (e) => {
        clearTimeout(t);
        this.stream?.destroy();
        reject(e);
      };
      const req = http.get(
        { host: this.url.hostname, port: this.url.port, path: this.url.pathname + this.url.search, agent: false, headers: { accept: 'text/event-stream' } },
        (res) => {
          if (res.statusCode !== 200 || !String(res.headers['content-type']).startsWith('text/event-stream')) {
            res.resume();
            fail(new Error(`${this.label}: GET ${this.url.pathname}: HTTP ${res.statusCode}`));
            return;
          }
          res.setEncoding('utf8');
          this.readEvents(res, (event, data) => {
            if (event === 'endpoint' && !this.endpoint) {
              this.endpoint = new URL(data, this.url);
              clearTimeout(t);
              resolve();
            } else if (data) {
              let msg;
              try {
                msg = JSON.parse(data);
              } catch {
                return;
              }
              this.dispatch(msg);
            }
          });
          res.on('close', () => {
            if (!this.endpoint) fail(new Error(`${this.label}: the event stream closed before the endpoint event`));
            if (!this.closed) {
              this.closed = true;
              this.stopTimers();
              this.failAll(new Error(`${this.label}: the event stream closed`));
            }
          });
        },
      );
      this.stream = req;
      req.on('error', fail);
    });
  }

  /**
   * Calls back (event, data) per complete SSE event. Events end at a blank line; a large event
   * (a 1.4 MB tools/list) arrives in many chunks, which are kept and joined once at its end
   * rather than re-scanned as one growing string on every chunk.
   */
  readEvents(res, onEvent) {
    let parts = []; // chunks of the current, incomplete event
    let carry = ''; // its last 2 characters, to see a blank line split across chunks
    res.on('data', (s) => {
      for (;;) {
        const e = boundary(carry + s);
        if (e === -1) break;
        const cut = e - carry.length; // >= 1: the boundary was not complete within carry
        parts.push(s.slice(0, cut));
        const text = parts.length === 1 ? parts[0] : parts.join('');
        parts = [];
        carry = '';
        s = s.slice(cut);
        const { name, data } = parseEvent(text);
        onEvent(name, data);
      }
      if (s.length) {
        parts.push(s);
        carry = (carry + s).slice(-2);
      }
    });
  }

  sendRequest(msg, p) {
    this.postTo(msg, (err) => {
      if (err && this.pending.has(msg.id)) {
        this.pending.delete(msg.id);
        p.reject(err);
      }
    }, p);
  }

  sendRaw(msg) {
    return new Promise((resolve, reject) => this.postTo(msg, (err) => (err ? reject(err) : resolve())));
  }

  /** POSTs one message to the endpoint; the answer comes on the stream, not in this body. */
  postTo(msg, cb, p) {
    if (!this.endpoint) return cb(new Error(`${this.label}: not open`));
    const body = Buffer.from(JSON.stringify(msg));
    const req = http.request(
      { host: this.endpoint.hostname, port: this.endpoint.port, path: this.endpoint.pathname + this.endpoint.search, method: 'POST', agent: this.agent, headers: { 'content-type': 'application/json', 'content-length': body.length } },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('error', cb);
        res.on('end', () => {
          if (res.statusCode >= 300) cb(new Error(`${this.label}: POST: HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString('utf8').slice(0, 200)}`));
          else cb(null);
        });
      },
    );
    req.on('error', cb);
    if (p) p.abort = () => req.destroy();
    req.end(body);
  }

  async close() {
    this.closed = true;
    this.stopTimers();
    this.failAll(new Error(`${this.label}: closed`));
    this.stream?.destroy();
    this.agent.destroy();
  }
}

/** The index just past the first blank line (the end of an event) in `s`, or -1. */
function boundary(s) {
  for (let i = s.indexOf('\n'); i !== -1; i = s.indexOf('\n', i + 1)) {
    if (s.charCodeAt(i + 1) === 10) return i + 2;
    if (s.charCodeAt(i + 1) === 13 && s.charCodeAt(i + 2) === 10) return i + 3;
  }
  return -1;
}

/** {name, data} of one event's text: `event:` (default "message"), the `data:` lines joined by \n. */
function parseEvent(text) {
  let name = 'message';
  let data = null;
  let pos = 0;
  while (pos < text.length) {
    let eol = text.indexOf('\n', pos);
    if (eol === -1) eol = text.length;
    const end = eol > pos && text.charCodeAt(eol - 1) === 13 ? eol - 1 : eol;
    if (text.startsWith('data:', pos)) {
      const v = text.slice(text.charCodeAt(pos + 5) === 32 ? pos + 6 : pos + 5, end);
      data = data === null ? v : `${data}\n${v}`;
    } else if (text.startsWith('event:', pos)) name = text.slice(pos + 6, end).trim();
    pos = eol + 1;
  }
  return { name, data: data ?? '' };
}
