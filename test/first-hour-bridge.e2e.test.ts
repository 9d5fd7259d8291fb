// Issue 19, points 13 and 14: a 2026-07-28 host whose call mcpmux answered `input_required` (a
// legacy upstream asked for input) retries with a new request and a new progressToken. What the
// upstream says after that (progress, log messages) goes with the retry, cancelling the retry
// cancels the upstream's call, and the call is counted once in /metrics and the audit log. An
// upstream's own request with no host to take it is client="none". Raw JSON-RPC hosts over the
// real binary: `mcpmux stdio`, and `mcpmux serve` over Streamable HTTP.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import {
  closeAll,
  exitWithin,
  fixture,
  MUX_BIN,
  readEvents,
  ROOT,
  startRawMux,
  tempFile,
  waitFor,
  waitForEvent,
  WAIT_MS,
  writeConfig,
  type FixtureOptions,
  type ServerEntry,
} from './helpers/harness.js';
import { scrape, total } from './helpers/prom.js';
import { spawn } from 'node:child_process';
import dc from 'node:diagnostics_channel';
import WebSocket from 'ws';
import { awaitRetry, CHANNEL, continueCall, endRequest, endWaiting, startHostRequest, type RequestEvent } from '../src/observe/events.js';

afterEach(closeAll);
afterAll(stopAllDaemons);

const MODERN = '2026-07-28';
const BRIDGE = path.join(ROOT, 'test/fixtures/bridge-upstream.mjs');
const TOOL = 'b__ask_then_work';
const ACCEPT = { q1: { action: 'accept', content: { go: true } } };

const bridge = (events: string): ServerEntry => ({ command: process.execPath, args: [BRIDGE, JSON.stringify({ events })] });

/** A modern request's `_meta`: the envelope, and what this request asks for. */
function meta(extra: { progressToken?: string; logLevel?: string } = {}): object {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } },
    'io.modelcontextprotocol/clientInfo': { name: 'raw-modern', version: '0' },
    ...(extra.progressToken !== undefined && { progressToken: extra.progressToken }),
    ...(extra.logLevel !== undefined && { 'io.modelcontextprotocol/logLevel': extra.logLevel }),
  };
}

const callParams = (args: object, m: Parameters<typeof meta>[0], retry?: { requestState: string }) => ({
  name: TOOL,
  arguments: args,
  _meta: meta(m),
  ...(retry && { requestState: retry.requestState, inputResponses: ACCEPT }),
});

describe('over stdio: what the upstream says after the retry goes with the retry', () => {
  it('progress comes under the retry\'s progressToken (none under the first\'s), log messages at the retry\'s level; the call is answered on the retry', async () => {
    const events = tempFile('bridge.jsonl');
    const peer = startRawMux(await writeConfig({ mcpServers: { b: bridge(events) } }));
    peer.send({ jsonrpc: '2.0', id: 'first', method: 'tools/call', params: callParams({ steps: 2 }, { progressToken: 'old-token' }) });
    const first = await peer.next((m) => m.id === 'first');
    expect(first.result).toMatchObject({ resultType: 'input_required', inputRequests: { q1: { method: 'elicitation/create' } } });

    peer.send({ jsonrpc: '2.0', id: 'retry', method: 'tools/call', params: callParams({ steps: 2 }, { progressToken: 'new-token', logLevel: 'info' }, first.result) });
    const done = await peer.next((m) => m.id === 'retry');
    expect(JSON.parse(done.result.content[0].text)).toEqual({ action: 'accept', content: { go: true } });

    const progress = peer.messages.filter((m) => m.method === 'notifications/progress');
    expect(progress.map((p) => [p.params.progressToken, p.params.progress])).toEqual([
      ['new-token', 1],
      ['new-token', 2],
    ]);
    // The upstream's log messages (over stdio it cannot say which call they belong to; there is
    // one in flight) come because the retry asked for them, though the first request did not.
    const logs = peer.messages.filter((m) => m.method === 'notifications/message');
    expect(logs.map((m) => m.params.data)).toEqual(['step 1', 'step 2']);
    expect(logs[0].params.logger).toBe('b/bridge');
    // Everything came before the answer that ends the call.
    expect(peer.messages.indexOf(progress[1])).toBeLessThan(peer.messages.indexOf(done));
    await peer.close();
  }, 60_000);

  it('cancelling the retry cancels the upstream\'s call: the upstream gets notifications/cancelled', async () => {
    const events = tempFile('bridge.jsonl');
    const peer = startRawMux(await writeConfig({ mcpServers: { b: bridge(events) } }));
    peer.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: callParams({ steps: 1, hold: true }, { progressToken: 'old-token', logLevel: 'debug' }) });
    const first = await peer.next((m) => m.id === 1);
    peer.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: callParams({ steps: 1, hold: true }, { progressToken: 'new-token' }, first.result) });
    // The upstream has its answer and works on (its progress, under the retry's token, says so).
    const step = await peer.next((m) => m.method === 'notifications/progress');
    expect(step.params).toMatchObject({ progressToken: 'new-token', progress: 1 });
    expect(peer.messages.some((m) => m.params?.progressToken === 'old-token')).toBe(false);
    peer.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2, reason: 'the user gave up' } });
    const call = readEvents(events).find((e) => e.type === 'in' && e.method === 'tools/call');
    const cancelled = await waitForEvent(events, (e) => e.type === 'in' && e.method === 'notifications/cancelled');
    expect(cancelled.params.requestId).toBe(call.id);
    await waitForEvent(events, (e) => e.type === 'aborted' && e.id === call.id);
    // A cancelled request gets no answer; the first request's log level went with it (the retry asked for none).
    await peer.request('ping', { _meta: meta() });
    expect(peer.messages.some((m) => m.id === 2)).toBe(false);
    expect(peer.messages.some((m) => m.method === 'notifications/message')).toBe(false);
    await peer.close();
  }, 60_000);
});

/**
 * A stdio server that says a log line (logger "chatty") every 50 ms once initialized, noting each
 * in `file`, unrelated to any request (over stdio it could not say one); tool `poke` answers at once.
 */
const CHATTY = String.raw`
const fs = require('node:fs');
const file = process.argv[1];
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
let buf = '';
process.stdin.setEncoding('utf8').on('data', (c) => {
  buf += c;
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const m = JSON.parse(buf.slice(0, i));
    buf = buf.slice(i + 1);
    if (m.method === 'notifications/initialized') setInterval(() => { send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'tick' } }); fs.appendFileSync(file, 'tick\n'); }, 50);
    if (m.id === undefined) continue;
    if (m.method === 'initialize') send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {}, logging: {} }, serverInfo: { name: 'chatty', version: '0' } } });
    else if (m.method === 'tools/list') send({ jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'poke', inputSchema: { type: 'object' } }] } });
    else if (m.method === 'tools/call') send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'poked' }] } });
    else if (m.method === 'logging/setLevel') send({ jsonrpc: '2.0', id: m.id, result: {} });
    else send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found' } });
  }
});
process.stdin.on('end', () => process.exit(0));
`;

describe('over stdio: another server\'s log messages are not the call\'s', () => {
  it('while one bridged call runs on b, a log line from another stdio server (no request named) does not go to the host as that call\'s', async () => {
    const ticks = tempFile('ticks.txt');
    const count = () => (existsSync(ticks) ? readFileSync(ticks, 'utf8').split('\n').filter(Boolean).length : 0);
    const peer = startRawMux(await writeConfig({ mcpServers: { b: bridge(tempFile('bridge.jsonl')), chatty: { command: process.execPath, args: ['-e', CHATTY, ticks] } } }));
    peer.send({ jsonrpc: '2.0', id: 'first', method: 'tools/call', params: callParams({ steps: 1, hold: true }, { logLevel: 'info' }) });
    const first = await peer.next((m) => m.id === 'first');
    peer.send({ jsonrpc: '2.0', id: 'retry', method: 'tools/call', params: callParams({ steps: 1, hold: true }, { logLevel: 'info' }, first.result) });
    // b's own log line comes with the retry: the call runs, the only one in flight.
    const own = await peer.next((m) => m.method === 'notifications/message' && m.params.data === 'step 1');
    expect(own.params.logger).toBe('b/bridge');
    // chatty speaks meanwhile...
    const seen = count();
    await waitFor(() => count() >= seen + 3 || undefined, { what: 'three more log lines from chatty' });
    // ...and its answer to a call after those lines comes after mcpmux handled them.
    const poked = await peer.request('tools/call', { name: 'chatty__poke', arguments: {}, _meta: meta() });
    expect(poked.result.content).toEqual([{ type: 'text', text: 'poked' }]);
    expect(peer.messages.filter((m) => m.method === 'notifications/message' && m.params.logger === 'chatty')).toEqual([]);
    await peer.close();
  }, 60_000);
});

describe('with the official SDK 2.x client (it retries on a fresh id, with a fresh progressToken)', () => {
  /** A 2026-07-28 host that answers elicitations. */
  function sdkHost(): Client {
    const c = new Client({ name: 'modern-host', version: '0' }, { versionNegotiation: { mode: { pin: MODERN } }, capabilities: { elicitation: { form: {} } } });
    c.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { go: true } }));
    return c;
  }
  const hearsProgress = async (c: Client) => {
    const heard: { progress: number; message?: string }[] = [];
    // (pauseMs: see the fixture; the SDK 2.x client would drop progress read together with the answer.)
    const result = await c.callTool({ name: TOOL, arguments: { steps: 3, pauseMs: 300 } }, { onprogress: (p: { progress: number; message?: string }) => heard.push(p) });
    expect(JSON.parse((result.content as any)[0].text)).toEqual({ action: 'accept', content: { go: true } });
    // The client reports each round it fulfils as progress of its own; the upstream's steps follow.
    expect(heard.filter((p) => p.message?.startsWith('Fulfilling input required'))).toHaveLength(1);
    expect(heard.filter((p) => p.message?.startsWith('step')).map((p) => p.progress)).toEqual([1, 2, 3]);
  };

  it('over stdio: the progress the upstream sends after the retry reaches the client', async () => {
    const c = sdkHost();
    const config = await writeConfig({ mcpServers: { b: bridge(tempFile('bridge.jsonl')) } });
    await c.connect(new StdioClientTransport({ command: process.execPath, args: [MUX_BIN, 'stdio', '--config', config], stderr: 'ignore' }));
    try {
      await hearsProgress(c);
    } finally {
      await c.close();
    }
  }, 60_000);

  it('over Streamable HTTP: the same, on the retry\'s own response stream', async () => {
    const d = await startDaemon({ mcpServers: { b: bridge(tempFile('bridge.jsonl')) } });
    const c = sdkHost();
    await c.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    try {
      await hearsProgress(c);
    } finally {
      await c.close();
    }
  }, 60_000);
});

// ---- over Streamable HTTP (mcpmux serve), raw: each request a POST of its own --------------------

async function post(d: Daemon, id: number | string, params: object, signal?: AbortSignal): Promise<Response> {
  return fetch(d.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': TOOL },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params }),
    signal,
  });
}

/** The JSON-RPC messages of an answer: a JSON body, or an SSE stream's events. */
async function messagesOf(res: Response): Promise<any[]> {
  const text = await res.text();
  if (res.headers.get('content-type')?.startsWith('application/json')) return [JSON.parse(text)];
  return text
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .map((l) => JSON.parse(l.slice(5)));
}

/** Every line of an audit file, parsed. */
const auditLines = (file: string): any[] => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []);
const calls = (file: string) => auditLines(file).filter((l) => l.method === 'tools/call');

describe('over Streamable HTTP: the retry\'s own response carries the progress; one call is counted once', () => {
  let d: Daemon;
  let events: string;
  let audit: string;
  beforeAll(async () => {
    events = tempFile('bridge.jsonl');
    audit = tempFile('audit.jsonl');
    d = await startDaemon({ mcpServers: { b: bridge(events) }, audit: { path: audit } });
  });

  it('progress under the retry\'s token and log messages on the retry\'s stream; /metrics and the audit log count one tools/call', async () => {
    const before = (await scrape(`${d.base}/metrics`)).samples;
    const [first] = await messagesOf(await post(d, 1, callParams({ steps: 2 }, { progressToken: 'old-token', logLevel: 'info' })));
    expect(first.result).toMatchObject({ resultType: 'input_required', inputRequests: { q1: { method: 'elicitation/create' } } });

    const retry = await post(d, 2, callParams({ steps: 2 }, { progressToken: 'new-token', logLevel: 'info' }, first.result));
    expect(retry.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const messages = await messagesOf(retry);
    const progress = messages.filter((m) => m.method === 'notifications/progress');
    expect(progress.map((p) => [p.params.progressToken, p.params.progress])).toEqual([
      ['new-token', 1],
      ['new-token', 2],
    ]);
    expect(messages.filter((m) => m.method === 'notifications/message').map((m) => m.params.data)).toEqual(['step 1', 'step 2']);
    const answer = messages.at(-1);
    expect(answer.id).toBe(2);
    expect(JSON.parse(answer.result.content[0].text)).toEqual({ action: 'accept', content: { go: true } });

    // Once in /metrics: one tools/call (two requests on the wire), one duration, nothing left in flight.
    const after = (await scrape(`${d.base}/metrics`)).samples;
    const delta = (name: string, match: Record<string, string>) => total(after, name, match) - total(before, name, match);
    expect(delta('mcpmux_requests_total', { method: 'tools/call' })).toBe(1);
    expect(delta('mcpmux_requests_total', { method: 'tools/call', server: 'b', outcome: 'ok', client: 'anonymous' })).toBe(1);
    expect(delta('mcpmux_request_duration_seconds_count', { method: 'tools/call' })).toBe(1);
    expect(delta('mcpmux_requests_total', { method: 'elicitation/create', client: 'anonymous' })).toBe(1);
    expect(total(after, 'mcpmux_requests_in_flight')).toBe(0);
    // Once in the audit log: one line for the call (its first id, both requests' bytes), one for the question.
    const [line] = await waitFor(() => (calls(audit).length > 0 ? calls(audit) : undefined), { what: 'the tools/call audit line' });
    expect(line).toMatchObject({ direction: 'host-to-server', client: 'anonymous', id: 1, server: 'b', name: TOOL, upstreamName: 'ask_then_work', outcome: 'ok', rounds: 2 });
    expect(line.bytesOut).toBeGreaterThan(JSON.stringify(first).length);
    await waitFor(() => auditLines(audit).some((l) => l.method === 'elicitation/create' && l.direction === 'server-to-host'), { what: 'the elicitation line' });
    expect(calls(audit)).toHaveLength(1);
  }, 60_000);

  it('closing the retry\'s response cancels the upstream\'s call; the call is counted once, cancelled', async () => {
    const [first] = await messagesOf(await post(d, 3, callParams({ steps: 1, hold: true }, { progressToken: 'old-token' })));
    const ac = new AbortController();
    const retry = await post(d, 4, callParams({ steps: 1, hold: true }, { progressToken: 'new-token' }, first.result), ac.signal);
    // Read the stream until the upstream's progress (it has its answer and works on), then hang up.
    const reader = retry.body!.getReader();
    let seen = '';
    const deadline = setTimeout(() => void reader.cancel('no progress on the retry\'s stream in time'), WAIT_MS);
    try {
      while (!seen.includes('"notifications/progress"')) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`the retry's stream ended without the upstream's progress: ${seen}`);
        seen += new TextDecoder().decode(value);
      }
    } finally {
      clearTimeout(deadline);
    }
    expect(seen).toContain('"progressToken":"new-token"');
    ac.abort();
    const call = readEvents(events).filter((e) => e.type === 'in' && e.method === 'tools/call').at(-1);
    const cancelled = await waitForEvent(events, (e) => e.type === 'in' && e.method === 'notifications/cancelled' && e.params.requestId === call.id);
    expect(cancelled.params.requestId).toBe(call.id);
    await waitForEvent(events, (e) => e.type === 'aborted' && e.id === call.id);
    const line = await waitFor(() => calls(audit).find((l) => l.id === 3), { what: 'the cancelled call\'s audit line' });
    expect(line).toMatchObject({ outcome: 'cancelled', rounds: 2 });
    expect(calls(audit).filter((l) => l.id === 4)).toEqual([]);
    const samples = (await scrape(`${d.base}/metrics`)).samples;
    expect(total(samples, 'mcpmux_requests_total', { method: 'tools/call', outcome: 'cancelled' })).toBe(1);
    expect(total(samples, 'mcpmux_requests_in_flight')).toBe(0);
  }, 60_000);
});

describe('calls nobody came back for, and upstream requests nobody could take', () => {
  it('a call whose host never retried is counted once, as timeout; an upstream\'s roots/list with no host is client="none" in /metrics and the audit log', async () => {
    const audit = tempFile('audit.jsonl');
    const d = await startDaemon(
      { mcpServers: { b: bridge(tempFile('bridge.jsonl')), fx: fixture({ name: 'fx', rootsOnInit: true } as FixtureOptions) }, audit: { path: audit } },
      { MCPMUX_INPUT_TTL_MS: '1500' },
    );
    // fx asked for roots as it started, before any host was there.
    const roots = await waitFor(() => auditLines(audit).find((l) => l.method === 'roots/list'), { what: 'the roots/list audit line' });
    expect(roots).toMatchObject({ direction: 'server-to-host', client: 'none', server: 'fx', outcome: 'error' });

    const [first] = await messagesOf(await post(d, 'never-retried', callParams({ steps: 1 }, {})));
    expect(first.result.resultType).toBe('input_required');
    const [line] = await waitFor(() => (calls(audit).length > 0 ? calls(audit) : undefined), { what: 'the given-up call\'s audit line' });
    expect(line).toMatchObject({ id: 'never-retried', outcome: 'timeout', server: 'b' });
    expect(line.rounds).toBeUndefined();

    const { samples } = await scrape(`${d.base}/metrics`);
    expect(total(samples, 'mcpmux_requests_total', { method: 'tools/call' })).toBe(1);
    expect(total(samples, 'mcpmux_requests_total', { method: 'tools/call', outcome: 'timeout' })).toBe(1);
    expect(total(samples, 'mcpmux_requests_total', { method: 'roots/list', client: 'none' })).toBe(1);
    expect(samples.filter((s) => s.name === 'mcpmux_requests_total' && s.labels.client === '')).toEqual([]);
    expect(total(samples, 'mcpmux_requests_in_flight')).toBe(0);
  }, 60_000);

  it('"none" cannot be a token\'s client name: it is what metrics call no host', async () => {
    const config = await writeConfig({ mcpServers: {}, listen: { auth: { tokens: [{ client: 'none', tokenEnv: 'MUX_NONE_TOKEN' }] } } });
    const child = spawn(process.execPath, [MUX_BIN, 'check', '--config', config], { env: { ...process.env, MUX_NONE_TOKEN: 'a-token-long-enough-0123' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (out += c));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const { code } = await exitWithin(child, exited, 15_000);
    expect(code).not.toBe(0);
    expect(out).toContain('"none" is the name of no host session');
  }, 30_000);
});

describe('a 2026-07-28 upstream\'s own input_required, passed through', () => {
  it('is counted once too: the host cannot tell it from the bridge, and neither can the counts', async () => {
    const audit = tempFile('audit.jsonl');
    const modern: ServerEntry = { command: process.execPath, args: [path.join(ROOT, 'test/fixtures/modern-upstream.mjs'), 'stdio', '{}'] };
    const d = await startDaemon({ mcpServers: { mo: modern }, audit: { path: audit } });
    const c = new Client({ name: 'modern-host', version: '0' }, { versionNegotiation: { mode: { pin: MODERN } }, capabilities: { elicitation: { form: {} } } });
    c.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'Ada' } }));
    await c.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    try {
      expect((await c.callTool({ name: 'mo__greet', arguments: { greeting: 'Hi' } })).content).toEqual([{ type: 'text', text: 'Hi, Ada!' }]);
    } finally {
      await c.close();
    }
    const line = await waitFor(() => calls(audit).find((l) => l.name === 'mo__greet'), { what: 'the greet call\'s audit line' });
    expect(line).toMatchObject({ outcome: 'ok', rounds: 2 });
    expect(calls(audit).filter((l) => l.name === 'mo__greet')).toHaveLength(1);
    const { samples } = await scrape(`${d.base}/metrics`);
    expect(total(samples, 'mcpmux_requests_total', { method: 'tools/call', server: 'mo' })).toBe(1);
    // mcpmux as the upstream's client made two requests, and says so.
    expect(total(samples, 'mcpmux_upstream_request_duration_seconds_count', { method: 'tools/call', server: 'mo' })).toBe(2);
  }, 60_000);
});

// ---- a call given up with its connection, and the host that comes back with its token ----------

/** Opens a WebSocket to the daemon (subprotocol mcp); resolves once open. */
function openWs(d: Daemon): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${d.port}/ws`, 'mcp');
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

/** Sends one request on `ws` and resolves with its answer (notifications skipped), bounded. */
function askWs(ws: WebSocket, id: number | string, params: object): Promise<any> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer to request ${id} in time`)), WAIT_MS);
    const onMessage = (data: WebSocket.RawData): void => {
      const msg = JSON.parse(data.toString());
      if (msg.id !== id) return;
      clearTimeout(timer);
      ws.off('message', onMessage);
      resolve(msg);
    };
    ws.on('message', onMessage);
    ws.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params }));
  });
}

describe('a bridged call parked on a WebSocket that closes', () => {
  it('is counted once (cancelled); the host\'s retry with its token on a new connection is refused and counted as its own request; nothing stays in flight', async () => {
    const audit = tempFile('audit.jsonl');
    const events = tempFile('bridge.jsonl');
    const d = await startDaemon({ mcpServers: { b: bridge(events) }, audit: { path: audit } });
    const first = await openWs(d);
    const asked = await askWs(first, 1, callParams({ steps: 1 }, {}));
    expect(asked.result.resultType).toBe('input_required');
    first.close();
    // The connection's end gives the parked call up: cancelled upstream, its record ended once.
    const call = await waitForEvent(events, (e) => e.type === 'in' && e.method === 'tools/call');
    await waitForEvent(events, (e) => e.type === 'in' && e.method === 'notifications/cancelled' && e.params.requestId === call.id);
    const line = await waitFor(() => calls(audit).find((l) => l.id === 1), { what: 'the given-up call\'s audit line' });
    expect(line).toMatchObject({ outcome: 'cancelled', server: 'b' });

    // The token is the client's, not the connection's: the host comes back with it.
    const second = await openWs(d);
    try {
      const retried = await askWs(second, 2, callParams({ steps: 1 }, {}, asked.result));
      expect(retried.error).toMatchObject({ code: -32602 });
      expect(retried.error.message).toContain('Invalid requestState');
    } finally {
      second.close();
    }
    await waitFor(() => calls(audit).find((l) => l.id === 2), { what: 'the retry\'s audit line' });
    // One line per request: the call once (cancelled), the refused retry once, as its own.
    expect(calls(audit).map((l) => [l.id, l.outcome])).toEqual([
      [1, 'cancelled'],
      [2, 'error'],
    ]);
    const { samples } = await scrape(`${d.base}/metrics`);
    expect(total(samples, 'mcpmux_requests_total', { method: 'tools/call' })).toBe(2);
    expect(total(samples, 'mcpmux_requests_total', { method: 'tools/call', outcome: 'cancelled' })).toBe(1);
    expect(total(samples, 'mcpmux_requests_in_flight')).toBe(0);
  }, 60_000);
});

describe('continueCall (real events, a real subscriber)', () => {
  it('a retry of a call that already ended is a request of its own: the call\'s record is not ended twice', () => {
    const ended: RequestEvent[] = [];
    const onEnd = (ev: unknown): void => void ended.push(ev as RequestEvent);
    dc.subscribe(CHANNEL.requestEnd, onEnd);
    try {
      const session = { id: 's', client: 'c', transport: 'ws' as const };
      const call = startHostRequest(session, 'tools/call', 1, {}, 10)!;
      awaitRetry(call);
      endRequest(call, { jsonrpc: '2.0', id: 1, result: { resultType: 'input_required' } }, 5);
      endWaiting(call, 'cancelled');
      const retry = startHostRequest(session, 'tools/call', 2, {}, 10)!;
      expect(continueCall(retry, call)).toBe(false);
      endRequest(retry, { jsonrpc: '2.0', id: 2, error: { code: -32602, message: 'x' } }, 5);
      expect(ended.map((e) => [e.requestId, e.outcome])).toEqual([
        [1, 'cancelled'],
        [2, 'error'],
      ]);
      expect(retry.roundOf).toBeUndefined();
    } finally {
      dc.unsubscribe(CHANNEL.requestEnd, onEnd);
    }
  });
});
