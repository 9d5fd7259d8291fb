// Traces (issue 24.1): the real mcpmux binary with `telemetry.otlp` pointed at an OTLP/HTTP
// receiver this test runs on loopback, decoding the JSON the real exporter sends. A raw host
// sends `_meta.traceparent`; upstreams record the `_meta` (and, over HTTP, the headers) they
// receive. One traced mcpmux serves every traced test; tracing off and an unreachable
// collector get one mcpmux each.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, closeAll, fixture, freePort, readEvents, startRawMux, tempFile, waitFor, writeConfig, type RawPeer } from './helpers/harness.js';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { startHttpFixture, type Fixture } from './helpers/http-fixture.js';
import { openLegacySse } from './helpers/legacy-sse.js';

/** A span as the receiver decoded it (OTLP JSON: ids in hex, attributes flattened). */
interface Span {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** 2 SERVER, 3 CLIENT */
  kind: number;
  status: number;
  attrs: Record<string, unknown>;
}

interface Receiver {
  url: string;
  spans: Span[];
  /** Content types of the exports received. */
  types: string[];
  close(): Promise<void>;
}

function value(v: Record<string, unknown>): unknown {
  if ('stringValue' in v) return v.stringValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('boolValue' in v) return v.boolValue;
  if ('doubleValue' in v) return v.doubleValue;
  return v;
}

/** An OTLP/HTTP traces receiver on 127.0.0.1 (JSON encoding: what exporter-trace-otlp-http sends). */
async function startReceiver(): Promise<Receiver> {
  const spans: Span[] = [];
  const types: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      types.push(String(req.headers['content-type']));
      if (req.method !== 'POST' || req.url !== '/v1/traces') return void res.writeHead(404).end();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      for (const rs of body.resourceSpans ?? []) {
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            const attrs: Record<string, unknown> = {};
            for (const a of s.attributes ?? []) attrs[a.key] = value(a.value);
            spans.push({ traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId ?? '', name: s.name, kind: s.kind, status: s.status?.code ?? 0, attrs });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    types,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const HOST_SPAN = '00f067aa0ba902b7';
const HOST_PARENT = `00-${TRACE}-${HOST_SPAN}-01`;
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/;
/** Export every 50 ms: nothing waits long for its spans. */
const FAST_EXPORT = { OTEL_BSP_SCHEDULE_DELAY: '50' };

const MODERN = path.join(ROOT, 'test/fixtures/modern-upstream.mjs');

/** A host that takes sampling and elicitation requests (the tests answer them). */
async function host(peer: RawPeer): Promise<void> {
  // initialize waits for the upstreams to start: generous on a loaded machine.
  const r = await peer.request('initialize', { protocolVersion: '2025-11-25', capabilities: { sampling: {}, elicitation: {} }, clientInfo: { name: 'trace-host', version: '1' } }, 60_000);
  expect(r.result).toBeDefined();
  peer.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
}

function answerSampling(peer: RawPeer): Promise<void> {
  return peer.next((m) => m.method === 'sampling/createMessage').then((req) => {
    peer.send({ jsonrpc: '2.0', id: req.id, result: { role: 'assistant', content: { type: 'text', text: 'sampled' }, model: 'test' } });
  });
}

function call(peer: RawPeer, name: string, meta?: object, args: object = {}): Promise<any> {
  return peer.request('tools/call', { name, arguments: args, ...(meta && { _meta: meta }) });
}

describe('traces over OTLP/HTTP', () => {
  let receiver: Receiver;
  let web: Fixture;
  let mux: RawPeer;
  let alphaEvents: string;
  let modernEvents: string;

  beforeAll(async () => {
    receiver = await startReceiver();
    web = await startHttpFixture({ name: 'web', tools: 2 });
    alphaEvents = tempFile('alpha-events.jsonl');
    modernEvents = tempFile('modern-events.jsonl');
    const config = await writeConfig({
      mcpServers: {
        alpha: fixture({ name: 'alpha', tools: 2, events: alphaEvents }),
        web: { url: `${web.url}/mcp` },
        // The same fixture over WebSocket and legacy HTTP+SSE, and a 2026-07-28 upstream.
        sock: { url: `${web.url.replace(/^http/, 'ws')}/ws` },
        old: { url: `${web.url}/sse` },
        mo: { command: process.execPath, args: [MODERN, 'stdio', JSON.stringify({ events: modernEvents })] },
      },
      // Every tool listed as it is (no search surface), whatever their count.
      surface: { mode: 'all' },
      // A denied tool and a limited one, for mcpmux's own refusals on spans.
      policy: { tools: { deny: ['alpha__tool_1'] } },
      rateLimits: [{ server: 'alpha', tool: 'tool_0', perMinute: 1, burst: 1 }],
      telemetry: { otlp: { endpoint: receiver.url, headers: { 'x-api-key': 'otlp-secret-value' } }, sampleRatio: 1 },
    });
    mux = startRawMux(config, { env: FAST_EXPORT });
    await host(mux);
    // Both upstreams listed: they are up.
    let names: string[] = [];
    await waitFor(
      async () => {
        const r = await mux.request('tools/list');
        names = (r.result?.tools ?? []).map((t: { name: string }) => t.name);
        return ['alpha__echo', 'web__echo', 'sock__echo', 'old__echo', 'mo__echo'].every((n) => names.includes(n)) ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200, what: 'every upstream listed' },
    ).catch((err: Error) => {
      throw new Error(`${err.message} (listed: ${names.join()}); stderr: ${mux.stderr()}`);
    });
  }, 150_000);

  afterAll(async () => {
    await mux?.close();
    await web?.close();
    await stopAllDaemons();
    await receiver?.close();
    await closeAll();
  });

  /** The spans of a trace once `n` of them (matching `pred`) arrived. */
  async function spansOf(traceId: string, pred: (s: Span[]) => boolean): Promise<Span[]> {
    return waitFor(() => {
      const s = receiver.spans.filter((x) => x.traceId === traceId);
      return pred(s) ? s : undefined;
    }, { what: `the spans of trace ${traceId}` });
  }

  function received(method: string, pred: (e: any) => boolean = () => true): any {
    return readEvents(alphaEvents).find((e) => e.type === 'request' && e.method === method && pred(e));
  }

  it('chains host traceparent -> SERVER span -> CLIENT span -> the traceparent a stdio upstream receives, with the attributes', async () => {
    const r = await call(mux, 'alpha__echo', { traceparent: HOST_PARENT, tracestate: 'congo=t61rcWkgMzE' }, { text: 'secret argument value' });
    expect(r.result).toBeDefined();
    const got = await waitFor(() => received('tools/call', (e) => e.params?._meta?.traceparent?.includes(TRACE)));
    const [, upTrace, upParent] = TRACEPARENT.exec(got.params._meta.traceparent)!;
    expect(upTrace).toBe(TRACE);
    expect(got.params._meta.tracestate).toBe('congo=t61rcWkgMzE');

    const spans = await spansOf(TRACE, (s) => s.some((x) => x.kind === 2) && s.some((x) => x.kind === 3));
    const server = spans.find((s) => s.kind === 2 && s.name === 'tools/call alpha__echo')!;
    const client = spans.find((s) => s.kind === 3 && s.name === 'tools/call echo')!;
    expect(server.parentSpanId).toBe(HOST_SPAN);
    expect(client.parentSpanId).toBe(server.spanId);
    // The upstream's parent is mcpmux's CLIENT span.
    expect(upParent).toBe(client.spanId);

    expect(server.attrs).toMatchObject({
      'mcp.method.name': 'tools/call',
      'gen_ai.tool.name': 'alpha__echo',
      'gen_ai.operation.name': 'execute_tool',
      'jsonrpc.request.id': String(r.id),
      'network.transport': 'pipe',
      'mcp.protocol.version': '2025-11-25',
      'mcpmux.upstream': 'alpha',
      'mcpmux.upstream.name': 'echo',
      'mcpmux.outcome': 'ok',
      'mcpmux.client': 'anonymous',
    });
    // A stdio session has no id on the wire: mcp.session.id is mcpmux's own (as logs and /status say it).
    expect(typeof server.attrs['mcp.session.id']).toBe('string');
    expect(server.attrs['mcp.session.id']).toBe(server.attrs['mcpmux.session.id']);
    expect(client.attrs).toMatchObject({ 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'echo', 'network.transport': 'pipe', 'mcpmux.upstream': 'alpha' });
    expect(client.attrs['jsonrpc.request.id']).toBe(String(got.id));
    // audit.arguments is not "full": argument values stay out of every span.
    expect(JSON.stringify(receiver.spans)).not.toContain('secret argument value');
    expect(server.attrs['gen_ai.tool.call.arguments']).toBeUndefined();
    // Exports are OTLP/HTTP JSON, and the collector's headers are secrets: never in the log.
    expect(receiver.types.every((t) => t.startsWith('application/json'))).toBe(true);
    expect(mux.stderr()).not.toContain('otlp-secret-value');
  });

  it('marks an error span with error.type (an upstream JSON-RPC error, and one mcpmux answers itself)', async () => {
    const trace = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1';
    const r = await call(mux, 'alpha__fail', { traceparent: `00-${trace}-${HOST_SPAN}-01` });
    expect(r.error?.code).toBe(-32603);
    const spans = await spansOf(trace, (s) => s.some((x) => x.kind === 2) && s.some((x) => x.kind === 3));
    const server = spans.find((s) => s.kind === 2)!;
    const client = spans.find((s) => s.kind === 3)!;
    expect(server.attrs['error.type']).toBe('-32603');
    expect(server.status).toBe(2);
    expect(client.attrs['error.type']).toBe('-32603');
    expect(client.status).toBe(2);

    const unknown = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2';
    const u = await call(mux, 'alpha__no_such_tool', { traceparent: `00-${unknown}-${HOST_SPAN}-01` });
    expect(u.error).toBeDefined();
    const [refused] = await spansOf(unknown, (s) => s.length >= 1);
    expect(refused!.kind).toBe(2);
    expect(refused!.attrs['error.type']).toBe(String(u.error.code));
  });

  it('says on the span when policy denied a call, and when a rate limit refused one (with its retry time)', async () => {
    const denied = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa3';
    const d = await call(mux, 'alpha__tool_1', { traceparent: `00-${denied}-${HOST_SPAN}-01` });
    expect(d.error?.message).toMatch(/denied by policy/);
    const [deny] = await spansOf(denied, (s) => s.length >= 1);
    expect(deny!.attrs).toMatchObject({ 'mcpmux.policy.denied': true, 'mcpmux.outcome': 'denied', 'error.type': String(d.error.code), 'gen_ai.tool.name': 'alpha__tool_1' });
    expect(deny!.status).toBe(2);

    // Burst 1: the first call passes, the next is refused until the bucket refills (a minute).
    expect((await call(mux, 'alpha__tool_0')).result?.isError).toBeUndefined();
    const limited = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa4';
    const l = await call(mux, 'alpha__tool_0', { traceparent: `00-${limited}-${HOST_SPAN}-01` });
    expect(l.result?.isError).toBe(true);
    const spans = await spansOf(limited, (s) => s.length >= 1);
    // Refused before it went upstream: no CLIENT span.
    expect(spans.map((s) => s.kind)).toEqual([2]);
    expect(spans[0]!.attrs).toMatchObject({ 'mcpmux.ratelimit.limited': true, 'mcpmux.outcome': 'limited', 'error.type': 'rate_limited' });
    expect(spans[0]!.attrs['mcpmux.ratelimit.retry_after_ms']).toBe(l.result._meta.retryAfterMs);
  });

  it('carries the context to an HTTP upstream in _meta and in the traceparent header', async () => {
    const trace = 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb1';
    const r = await call(mux, 'web__echo', { traceparent: `00-${trace}-${HOST_SPAN}-01` }, { text: 'hi' });
    expect(r.result).toBeDefined();
    const spans = await spansOf(trace, (s) => s.some((x) => x.kind === 3));
    const client = spans.find((s) => s.kind === 3)!;
    expect(client.attrs['network.transport']).toBe('tcp');
    const ours = `00-${trace}-${client.spanId}-01`;
    const events = readEvents(web.events);
    const request = events.find((e) => e.type === 'request' && e.method === 'tools/call' && e.meta?.traceparent === ours);
    expect(request, JSON.stringify(events.filter((e) => e.method === 'tools/call'))).toBeDefined();
    const post = events.find((e) => e.type === 'http' && e.method === 'POST' && e.headers?.traceparent === ours);
    expect(post).toBeDefined();
  });

  /** The CLIENT span of a call traced under `trace`, and the traceparent it gives (a sampled child of it). */
  async function clientOf(trace: string): Promise<{ client: Span; ours: string }> {
    const spans = await spansOf(trace, (s) => s.some((x) => x.kind === 3));
    const client = spans.find((s) => s.kind === 3)!;
    return { client, ours: `00-${trace}-${client.spanId}-01` };
  }

  it('carries the context to a WebSocket upstream in _meta', async () => {
    const trace = 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2';
    expect((await call(mux, 'sock__echo', { traceparent: `00-${trace}-${HOST_SPAN}-01` }, { text: 'ws' })).result).toBeDefined();
    const { client, ours } = await clientOf(trace);
    expect(client.attrs).toMatchObject({ 'mcpmux.upstream': 'sock', 'network.transport': 'tcp' });
    const events = readEvents(web.events);
    expect(events.find((e) => e.type === 'request' && e.transport === 'ws' && e.method === 'tools/call' && e.meta?.traceparent === ours)).toBeDefined();
  });

  it('carries the context to a legacy HTTP+SSE upstream in _meta and in the traceparent header of its POST', async () => {
    const trace = 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb3';
    expect((await call(mux, 'old__echo', { traceparent: `00-${trace}-${HOST_SPAN}-01` }, { text: 'sse' })).result).toBeDefined();
    const { client, ours } = await clientOf(trace);
    expect(client.attrs['mcpmux.upstream']).toBe('old');
    const events = readEvents(web.events);
    expect(events.find((e) => e.type === 'request' && e.transport === 'sse' && e.method === 'tools/call' && e.meta?.traceparent === ours)).toBeDefined();
    expect(events.find((e) => e.type === 'http' && e.method === 'POST' && e.path === '/messages' && e.headers?.traceparent === ours)).toBeDefined();
  });

  it('carries the context to a 2026-07-28 upstream in _meta, beside its envelope', async () => {
    const trace = 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb4';
    expect((await call(mux, 'mo__echo', { traceparent: `00-${trace}-${HOST_SPAN}-01` }, { text: 'modern' })).result).toBeDefined();
    const { client, ours } = await clientOf(trace);
    expect(client.attrs).toMatchObject({ 'mcpmux.upstream': 'mo', 'mcp.protocol.version': '2026-07-28', 'network.transport': 'pipe' });
    const got = await waitFor(() => readEvents(modernEvents).find((e) => e.tool === 'echo' && e._meta?.traceparent === ours), { what: 'the modern upstream got our traceparent' });
    expect(got.meta['io.modelcontextprotocol/protocolVersion']).toBe('2026-07-28');
  });

  it('puts a sampling request from a stdio upstream in the trace of the call it came with', async () => {
    const trace = 'ccccccccccccccccccccccccccccccc1';
    const answered = answerSampling(mux);
    const r = await call(mux, 'alpha__sample', { traceparent: `00-${trace}-${HOST_SPAN}-01` });
    await answered;
    expect(JSON.stringify(r.result)).toContain('sampled');
    const spans = await spansOf(trace, (s) => s.some((x) => x.name === 'sampling/createMessage') && s.some((x) => x.kind === 3));
    const client = spans.find((s) => s.kind === 3)!;
    const sampling = spans.find((s) => s.name === 'sampling/createMessage')!;
    expect(sampling.parentSpanId).toBe(client.spanId);
    expect(sampling.attrs).toMatchObject({ 'mcp.method.name': 'sampling/createMessage', 'mcpmux.direction': 'server-to-host', 'mcpmux.upstream': 'alpha' });
  });

  it('puts the era bridge\'s rounds and the elicitation it asks the host in the trace of the call (2026-07-28 upstream, 2025 host)', async () => {
    const trace = 'ccccccccccccccccccccccccccccccc2';
    const answered = mux.next((m) => m.method === 'elicitation/create').then((req) => {
      mux.send({ jsonrpc: '2.0', id: req.id, result: { action: 'accept', content: { name: 'Ada' } } });
    });
    const r = await call(mux, 'mo__greet', { traceparent: `00-${trace}-${HOST_SPAN}-01` }, { greeting: 'Hi' });
    await answered;
    expect(JSON.stringify(r.result)).toContain('Hi, Ada!');
    const spans = await spansOf(trace, (s) => s.some((x) => x.name === 'elicitation/create') && s.filter((x) => x.kind === 3).length === 2 && s.some((x) => x.name === 'tools/call mo__greet'));
    const server = spans.find((s) => s.name === 'tools/call mo__greet')!;
    const clients = spans.filter((s) => s.kind === 3);
    const elicit = spans.find((s) => s.name === 'elicitation/create')!;
    // Both rounds to the upstream are children of the host's call; the question hangs in it too.
    expect(clients.map((c) => c.parentSpanId)).toEqual([server.spanId, server.spanId]);
    expect(elicit.parentSpanId).toBe(server.spanId);
    expect(elicit.attrs).toMatchObject({ 'mcpmux.direction': 'server-to-host', 'mcpmux.upstream': 'mo' });
    // Each round reached the upstream with its own CLIENT span's context.
    const rounds = readEvents(modernEvents).filter((e) => e.tool === 'greet' && e._meta?.traceparent?.includes(trace));
    expect(rounds.map((e) => e.round)).toEqual([1, 2]);
    expect(new Set(rounds.map((e) => TRACEPARENT.exec(e._meta.traceparent)![2]))).toEqual(new Set(clients.map((c) => c.spanId)));
  });

  /** One traced `mcpmux serve` for the tests of HTTP hosts, started by the first that needs it. */
  let served: Promise<{ url: string; events: string }> | undefined;
  function serve(): Promise<{ url: string; events: string }> {
    return (served ??= (async () => {
      const events = tempFile('serve-events.jsonl');
      const d = await startDaemon(
        { mcpServers: { alpha: fixture({ name: 'alpha', tools: 2, events }) }, surface: { mode: 'all' }, telemetry: { otlp: { endpoint: receiver.url } } },
        FAST_EXPORT,
      );
      return { url: d.url, events };
    })());
  }

  it('says on a list\'s span whether mcpmux answered it from its cache (mcpmux.cache.hit)', async () => {
    // Every upstream's tools announce listChanged, so a list asked twice is answered from the cache the second time.
    await mux.request('tools/list');
    const hit = 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeee1';
    expect((await mux.request('tools/list', { _meta: { traceparent: `00-${hit}-${HOST_SPAN}-01` } })).result?.tools.length).toBeGreaterThan(0);
    // The HTTP fixture's prompts do not: their page is asked of it every time.
    const miss = 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeee2';
    expect((await mux.request('prompts/list', { _meta: { traceparent: `00-${miss}-${HOST_SPAN}-01` } })).result).toBeDefined();
    const [list] = await spansOf(hit, (s) => s.length >= 1);
    expect(list!.attrs).toMatchObject({ 'mcp.method.name': 'tools/list', 'mcpmux.cache.hit': true });
    const [prompts] = await spansOf(miss, (s) => s.length >= 1);
    expect(prompts!.attrs).toMatchObject({ 'mcp.method.name': 'prompts/list', 'mcpmux.cache.hit': false });
  });

  it('names the resource a read is for (mcp.resource.uri) and the session\'s tool surface (mcpmux.surface.mode)', async () => {
    const listed = (await mux.request('resources/list')).result?.resources as { uri: string }[];
    const readme = listed.find((r) => r.uri.includes('readme.txt'))!;
    expect(readme).toBeDefined();
    const read = 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeee3';
    expect((await mux.request('resources/read', { uri: readme.uri, _meta: { traceparent: `00-${read}-${HOST_SPAN}-01` } })).result?.contents).toBeDefined();
    const server = (await spansOf(read, (s) => s.some((x) => x.kind === 2))).find((x) => x.kind === 2)!;
    expect(server.attrs).toMatchObject({ 'mcp.method.name': 'resources/read', 'mcp.resource.uri': readme.uri, 'mcpmux.upstream': 'mo' });
    // The config's surface is "all": a tools/* span says so.
    const tools = 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeee4';
    await mux.request('tools/list', { _meta: { traceparent: `00-${tools}-${HOST_SPAN}-01` } });
    const [list] = await spansOf(tools, (s) => s.length >= 1);
    expect(list!.attrs).toMatchObject({ 'mcp.method.name': 'tools/list', 'mcpmux.surface.mode': 'all' });
  });

  it('takes a Streamable HTTP host\'s traceparent header as the context of its request (mcpmux serve)', async () => {
    const d = await serve();
    const events = d.events;
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await fetch(d.url, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'http-host', version: '0' } } }),
    });
    const sid = init.headers.get('mcp-session-id')!;
    await init.text();
    const session = { ...headers, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
    await (await fetch(d.url, { method: 'POST', headers: session, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).text();
    const trace = 'ddddddddddddddddddddddddddddddd1';
    const answer = await fetch(d.url, {
      method: 'POST',
      headers: { ...session, traceparent: `00-${trace}-${HOST_SPAN}-01` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'alpha__echo', arguments: { text: 'over http' } } }),
    });
    expect(await answer.text()).toContain('over http');
    const got = await waitFor(() => readEvents(events).find((e) => e.type === 'request' && e.method === 'tools/call'));
    const spans = await spansOf(trace, (s) => s.some((x) => x.kind === 2) && s.some((x) => x.kind === 3));
    const server = spans.find((s) => s.kind === 2)!;
    expect(server.parentSpanId).toBe(HOST_SPAN);
    expect(server.attrs).toMatchObject({ 'network.transport': 'tcp', 'network.protocol.name': 'http' });
    // mcp.session.id is the Mcp-Session-Id the host sees; mcpmux's own id (logs, /status) is another.
    expect(server.attrs['mcp.session.id']).toBe(sid);
    expect(typeof server.attrs['mcpmux.session.id']).toBe('string');
    expect(server.attrs['mcpmux.session.id']).not.toBe(sid);
    expect(got.params._meta.traceparent).toBe(`00-${trace}-${spans.find((s) => s.kind === 3)!.spanId}-01`);
  });

  it('takes a legacy HTTP+SSE host\'s traceparent header on POST /messages as the context of its request', async () => {
    const d = await serve();
    const answers: any[] = [];
    const sse = await openLegacySse(new URL(d.url).origin, (data) => answers.push(JSON.parse(data)));
    try {
      const answer = (id: number): Promise<any> => waitFor(() => answers.find((m) => m.id === id), { what: `answer ${id} on the SSE stream` });
      await sse.post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'sse-host', version: '0' } } }));
      expect((await answer(1)).result).toBeDefined();
      await sse.post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      const trace = 'ddddddddddddddddddddddddddddddd2';
      const posted = await sse.post(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'alpha__echo', arguments: { text: 'over sse' } } }), {
        traceparent: `00-${trace}-${HOST_SPAN}-01`,
      });
      expect(posted.status).toBe(202);
      expect(JSON.stringify((await answer(2)).result)).toContain('over sse');
      const spans = await spansOf(trace, (s) => s.some((x) => x.kind === 2) && s.some((x) => x.kind === 3));
      const server = spans.find((s) => s.kind === 2)!;
      expect(server.parentSpanId).toBe(HOST_SPAN);
      // Its session id is the one in the host's /messages URL.
      expect(server.attrs['mcp.session.id']).toBe(sse.endpoint.searchParams.get('sessionId'));
      const got = await waitFor(() => readEvents(d.events).find((e) => e.type === 'request' && e.method === 'tools/call' && e.params?.arguments?.text === 'over sse'));
      expect(got.params._meta.traceparent).toBe(`00-${trace}-${spans.find((s) => s.kind === 3)!.spanId}-01`);
    } finally {
      await sse.close();
    }
  });

  it('puts a parked call\'s retry and the sampling it bridged in the trace of the call (2026-07-28 host, 2025 upstream)', async () => {
    const d = await serve();
    const trace = 'ccccccccccccccccccccccccccccccc3';
    const envelope = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': { sampling: {} },
      'io.modelcontextprotocol/clientInfo': { name: 'modern-host', version: '0' },
    };
    const post = async (id: number, params: object): Promise<any> => {
      const res = await fetch(d.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'alpha__sample' },
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'alpha__sample', arguments: {}, _meta: { ...envelope, traceparent: `00-${trace}-${HOST_SPAN}-01` }, ...params } }),
      });
      const text = await res.text();
      // JSON or one SSE event, as mcpmux chose.
      return JSON.parse(text.startsWith('{') ? text : text.split('\n').find((l) => l.startsWith('data: '))!.slice(6));
    };
    const first = await post(10, {});
    expect(first.result, JSON.stringify(first)).toMatchObject({ resultType: 'input_required' });
    const [key, ask] = Object.entries(first.result.inputRequests as Record<string, { method: string }>)[0]!;
    expect(ask.method).toBe('sampling/createMessage');
    const inputResponses = { [key]: { role: 'assistant', content: { type: 'text', text: 'sampled' }, model: 'test' } };
    const retry = await post(11, { inputResponses, requestState: first.result.requestState });
    expect(JSON.stringify(retry.result)).toContain('sampled');
    const spans = await spansOf(trace, (s) => s.filter((x) => x.name === 'tools/call alpha__sample').length === 2 && s.some((x) => x.name === 'sampling/createMessage') && s.some((x) => x.kind === 3));
    const [call, again] = spans.filter((s) => s.name === 'tools/call alpha__sample').sort((a, b) => (a.parentSpanId === HOST_SPAN ? -1 : b.parentSpanId === HOST_SPAN ? 1 : 0));
    const client = spans.find((s) => s.kind === 3)!;
    const sampling = spans.find((s) => s.name === 'sampling/createMessage')!;
    expect(call!.parentSpanId).toBe(HOST_SPAN);
    // The retry is a child of the call it resumed; the one upstream call and its question hang under the first.
    expect(again!.parentSpanId).toBe(call!.spanId);
    expect(client.parentSpanId).toBe(call!.spanId);
    expect(sampling.parentSpanId).toBe(client.spanId);
  });

  it('ignores a malformed traceparent (a new trace) and never forwards it', async () => {
    const bad = '00-zzzz-not-a-trace-01';
    await call(mux, 'alpha__echo', { traceparent: bad, tracestate: 'evil=1' }, { text: 'malformed' });
    const got = await waitFor(() => received('tools/call', (e) => e.params?.arguments?.text === 'malformed'));
    const tp = got.params._meta.traceparent;
    expect(tp).not.toBe(bad);
    const [, upTrace, upParent] = TRACEPARENT.exec(tp)!;
    // Its tracestate went with the malformed context.
    expect(got.params._meta.tracestate).toBeUndefined();
    const spans = await spansOf(upTrace!, (s) => s.some((x) => x.kind === 2) && s.some((x) => x.kind === 3));
    const server = spans.find((s) => s.kind === 2)!;
    expect(server.parentSpanId).toBe('');
    expect(spans.find((s) => s.kind === 3)!.spanId).toBe(upParent);
  });
});

describe('traces off, and a collector that is down', () => {
  afterAll(closeAll);

  it('with tracing off, a host _meta.traceparent reaches the upstream untouched', async () => {
    const events = tempFile('off-events.jsonl');
    const mux = startRawMux(await writeConfig({ mcpServers: { alpha: fixture({ name: 'alpha', events }) } }));
    try {
      await host(mux);
      const bad = 'not-even-a-traceparent';
      await call(mux, 'alpha__echo', { traceparent: HOST_PARENT, tracestate: 'k=v' }, { text: 'one' });
      await call(mux, 'alpha__echo', { traceparent: bad }, { text: 'two' });
      const calls = readEvents(events).filter((e) => e.type === 'request' && e.method === 'tools/call');
      expect(calls.map((e) => e.params._meta)).toEqual([
        { traceparent: HOST_PARENT, tracestate: 'k=v' },
        { traceparent: bad },
      ]);
    } finally {
      await mux.close();
    }
  });

  it('with the collector unreachable, calls are answered and the log says so once', async () => {
    const port = await freePort();
    const mux = startRawMux(await writeConfig({ mcpServers: { alpha: fixture({ name: 'alpha' }) }, telemetry: { otlp: { endpoint: `http://127.0.0.1:${port}` } } }), {
      env: FAST_EXPORT,
    });
    try {
      await host(mux);
      const said = (): number => mux.stderr().split('\n').filter((l) => l.includes('cannot export spans')).length;
      for (let i = 0; i < 3; i++) {
        const r = await call(mux, 'alpha__echo', { traceparent: HOST_PARENT }, { text: `n${i}` });
        expect(r.result).toBeDefined();
        await waitFor(() => (said() >= 1 ? true : undefined));
      }
      // More batches fail (one every 50 ms with spans queued); the log still has one line.
      for (let i = 0; i < 3; i++) {
        await call(mux, 'alpha__echo', {}, { text: `m${i}` });
        await new Promise((r) => setTimeout(r, 120));
      }
      expect(said()).toBe(1);
    } finally {
      await mux.close();
    }
  });
});
