// The event bus as a user's own subscriber sees it (docs/events.md): the real router and host
// session in this process, a real fixture upstream as a child, the host on in-memory pipes,
// and diagnostics_channel subscribers on every channel.

import dc from 'node:diagnostics_channel';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createRuntime, type Runtime } from '../src/cli/runtime.js';
import { parseConfig } from '../src/config/load.js';
import { CHANNEL, startHostRequest } from '../src/observe/events.js';
import { StreamTransport } from '../src/transport/stream.js';
import { fixture, waitFor, type FixtureOptions } from './helpers/harness.js';

const seen: { channel: string; msg: any }[] = [];
const listeners = Object.values(CHANNEL).map((name) => [name, (msg: unknown) => seen.push({ channel: name, msg })] as const);
let runtime: Runtime | undefined;

afterEach(async () => {
  for (const [name, fn] of listeners) dc.unsubscribe(name, fn);
  seen.length = 0;
  await runtime?.router.close();
  runtime = undefined;
});

/**
 * A host on in-memory pipes in front of the real router: send a request, read its answer.
 * `answer` answers the requests mcpmux sends the host (sampling, roots...): a result, or an
 * `{ error }` to answer with an error.
 */
function host(rt: Runtime, answer: (method: string, params: any) => object = () => ({ error: { code: -32601, message: 'not here' } })) {
  const toMux = new PassThrough();
  const fromMux = new PassThrough();
  const session = rt.openSession(new StreamTransport(toMux, fromMux, 1 << 20), 'stdio');
  const answers = new Map<number, any>();
  /** What mcpmux asked this host. */
  const asked: any[] = [];
  let buf = '';
  fromMux.setEncoding('utf8').on('data', (c: string) => {
    buf += c;
    for (let i; (i = buf.indexOf('\n')) >= 0; buf = buf.slice(i + 1)) {
      const m = JSON.parse(buf.slice(0, i));
      if ('id' in m && !('method' in m)) answers.set(m.id, m);
      else if ('id' in m) {
        asked.push(m);
        const a: any = answer(m.method, m.params);
        toMux.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, ...('error' in a ? { error: a.error } : { result: a }) }) + '\n');
      }
    }
  });
  let id = 0;
  return {
    session,
    asked,
    async request(method: string, params: object = {}): Promise<any> {
      const mine = ++id;
      toMux.write(JSON.stringify({ jsonrpc: '2.0', id: mine, method, params }) + '\n');
      return waitFor(() => answers.get(mine), { what: `answer ${mine} (${method})` });
    },
    /** initialize (declaring `capabilities`) and notifications/initialized. */
    async init(capabilities: object = {}): Promise<any> {
      const r = await this.request('initialize', { protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 't', version: '0' } });
      toMux.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
      return r;
    },
    end: () => toMux.end(),
    /** What mcpmux writes to this host (to see when an answer was handed over). */
    out: fromMux,
  };
}

const on = (channel: string) => seen.filter((e) => e.channel === channel).map((e) => e.msg);

/** Waits (bounded) for a message on `channel` matching `pred`, and returns it. */
const next = (channel: string, pred: (m: any) => boolean, what: string, timeoutMs = 10_000): Promise<any> =>
  waitFor(() => on(channel).find(pred), { what, timeoutMs });

/** Where in `seen` a message is (to check the order things happened in). */
const at = (msg: unknown) => seen.findIndex((e) => e.msg === msg);

/** Subscribes on every channel, then builds and starts the real runtime for `config`. */
function run(config: object): Runtime {
  for (const [name, fn] of listeners) dc.subscribe(name, fn);
  runtime = createRuntime(parseConfig(JSON.stringify(config), '/tmp/events-test.json', process.env), { logLevel: 'silent' });
  runtime.router.start();
  return runtime;
}

/** Upstream requests mcpmux made to `server` with `method`. */
const upstreamRequests = (server: string, method: string) => on(CHANNEL.upstreamRequest).filter((u) => u.server === server && u.method === method);

/** The states one upstream went through, in order. */
const statesOf = (server: string) => on(CHANNEL.upstreamState).filter((s) => s.server === server);

const SAMPLED = { role: 'assistant', content: { type: 'text', text: 'sampled by the host' }, model: 'test-model', stopReason: 'endTurn' };

describe('events (node:diagnostics_channel)', () => {
  it('nothing is built when nobody listens', () => {
    expect(startHostRequest({ id: 's', client: 'c', transport: 'stdio' }, 'ping', 1, undefined, 10)).toBeUndefined();
  });

  it('a request ends on the bus once its answer is written to the host, not before: observers stay off the call\'s path', async () => {
    const rt = run({ mcpServers: { fx: fixture({ name: 'fx' }) } });
    const h = host(rt);
    await h.init();
    // On a busy machine the upstream may start after initialize's wait: its tool is then listed later.
    await waitFor(async () => (await h.request('tools/list')).result.tools.some((t: { name: string }) => t.name === 'fx__echo') || undefined, { what: 'fx__echo listed' });
    const order: string[] = [];
    const write = h.out.write.bind(h.out) as (chunk: unknown, ...rest: unknown[]) => boolean;
    h.out.write = ((chunk: unknown, ...rest: unknown[]) => {
      // The one tools/call's answer (echo's result has structuredContent).
      if (String(chunk).includes('"structuredContent"')) order.push('answer written');
      return write(chunk, ...rest);
    }) as typeof h.out.write;
    const ended = (msg: unknown) => {
      if ((msg as { method?: unknown }).method === 'tools/call') order.push('request:end published');
    };
    dc.subscribe(CHANNEL.requestEnd, ended);
    try {
      expect((await h.request('tools/call', { name: 'fx__echo', arguments: { a: 1 } })).result.structuredContent).toEqual({ a: 1 });
      await waitFor(() => order.length === 2, { what: 'the answer written and the end published' });
    } finally {
      dc.unsubscribe(CHANNEL.requestEnd, ended);
    }
    expect(order).toEqual(['answer written', 'request:end published']);
  });

  it('publishes sessions, requests, upstream requests and states, denials and limitings, with the documented fields', async () => {
    for (const [name, fn] of listeners) dc.subscribe(name, fn);
    const config = parseConfig(
      JSON.stringify({
        mcpServers: { fx: fixture({ name: 'fx' }) },
        policy: { tools: { deny: ['fx__whoami'] } },
        rateLimits: [{ tool: 'tool_0', perMinute: 1, burst: 1 }],
      }),
      '/tmp/events-test.json',
      process.env,
    );
    runtime = createRuntime(config, { logLevel: 'silent' });
    runtime.router.start();
    const h = host(runtime);
    await h.request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '0' } });
    expect((await h.request('tools/call', { name: 'fx__echo', arguments: { a: 1 } })).result.structuredContent).toEqual({ a: 1 });
    expect((await h.request('tools/call', { name: 'fx__whoami' })).error.code).toBe(-31002);
    await h.request('tools/call', { name: 'fx__tool_0' });
    expect((await h.request('tools/call', { name: 'fx__tool_0' })).result.isError).toBe(true);
    h.end();
    await waitFor(() => on(CHANNEL.sessionClose).length === 1, { what: 'session close' });
    await runtime.router.close();

    const sessionId = h.session.id;
    expect(on(CHANNEL.sessionOpen)).toEqual([{ sessionId, client: 'anonymous', transport: 'stdio' }]);
    expect(on(CHANNEL.sessionClose)).toEqual([{ sessionId, client: 'anonymous', transport: 'stdio', durationMs: expect.any(Number), reason: 'input ended' }]);

    const states = on(CHANNEL.upstreamState);
    expect(states.map((s) => s.state)).toEqual(['starting', 'up', 'closed']);
    expect(states[0]).toEqual({ server: 'fx', connection: expect.any(Number), sharing: 'shared', state: 'starting' });

    const starts = on(CHANNEL.requestStart);
    const ends = on(CHANNEL.requestEnd);
    expect(ends.map((e) => [e.method, e.outcome])).toEqual([
      ['initialize', 'ok'],
      ['tools/call', 'ok'],
      ['tools/call', 'denied'],
      ['tools/call', 'ok'],
      ['tools/call', 'limited'],
    ]);
    // The same object opens and closes a request.
    expect(starts).toHaveLength(5);
    starts.forEach((s, i) => expect(s).toBe(ends[i]));
    expect(ends[1]).toEqual({
      direction: 'host-to-server',
      startTime: expect.any(Number),
      sessionId,
      client: 'anonymous',
      transport: 'stdio',
      method: 'tools/call',
      requestId: 2,
      params: expect.objectContaining({ arguments: { a: 1 } }),
      server: 'fx',
      name: 'fx__echo',
      upstreamName: 'echo',
      outcome: 'ok',
      code: undefined,
      retryAfterMs: undefined,
      durationMs: expect.any(Number),
      bytesIn: expect.any(Number),
      bytesOut: expect.any(Number),
      rounds: 1,
      roundOf: undefined,
      t0: expect.any(Number),
    });
    expect(ends[1].bytesIn).toBeGreaterThan(50);
    expect(ends[1].bytesOut).toBeGreaterThan(50);
    expect(ends[2]).toMatchObject({ code: -31002, server: 'fx', name: 'fx__whoami' });
    expect(ends[4]).toMatchObject({ outcome: 'limited', retryAfterMs: expect.any(Number) });

    const upstream = on(CHANNEL.upstreamRequest);
    expect(upstream.filter((u) => u.method === 'tools/call')).toEqual([
      // The host request each serves (its record), which traces hang their CLIENT spans under.
      { server: 'fx', method: 'tools/call', sessionId, outcome: 'ok', code: undefined, durationMs: expect.any(Number), request: expect.objectContaining({ method: 'tools/call', sessionId }) },
      { server: 'fx', method: 'tools/call', sessionId, outcome: 'ok', code: undefined, durationMs: expect.any(Number), request: expect.objectContaining({ method: 'tools/call', sessionId }) },
    ]);
    // Walking the tool list to resolve names is mcpmux's own request: no session.
    expect(upstream.find((u) => u.method === 'tools/list')).toMatchObject({ server: 'fx', sessionId: undefined, outcome: 'ok' });

    expect(on(CHANNEL.policyDenied)).toEqual([{ sessionId, client: 'anonymous', server: 'fx', method: 'tools/call', kind: 'tools', name: 'fx__whoami' }]);
    expect(on(CHANNEL.rateLimited)).toEqual([{ sessionId, client: 'anonymous', server: 'fx', method: 'tools/call', tool: 'tool_0', retryAfterMs: expect.any(Number), rule: 0 }]);
  });
  it('list pages, logging/setLevel, resources/subscribe and unsubscribe each reach the upstream through the observed forward step', async () => {
    // 3 generated tools + the special ones, two per upstream page: many pages.
    const rt = run({ mcpServers: { fx: fixture({ name: 'fx', pageSize: 2 }) } });
    const h = host(rt);
    await h.init();
    const sessionId = h.session.id;

    // The host walks the whole tool list; every upstream page the catalogue needs is a request of mcpmux's own.
    let cursor: string | undefined;
    let hostPages = 0;
    let tools = 0;
    do {
      const r = (await h.request('tools/list', cursor === undefined ? {} : { cursor })).result;
      hostPages++;
      tools += r.tools.length;
      cursor = r.nextCursor;
    } while (cursor !== undefined);
    expect(hostPages).toBe(Math.ceil(tools / 2));
    const pages = upstreamRequests('fx', 'tools/list');
    expect(pages).toHaveLength(hostPages);
    for (const p of pages) expect(p).toEqual({ server: 'fx', method: 'tools/list', sessionId: undefined, outcome: 'ok', code: undefined, durationMs: expect.any(Number) });
    // The host's list requests are host requests, with no one server.
    expect(on(CHANNEL.requestEnd).filter((e) => e.method === 'tools/list')).toHaveLength(hostPages);
    expect(on(CHANNEL.requestEnd).find((e) => e.method === 'tools/list')).toMatchObject({ direction: 'host-to-server', sessionId, server: undefined, outcome: 'ok' });
    // Each list says whether the cache answered it (the fixture announces listChanged, so its
    // pages are cached); once walked, the first page again asks the upstream nothing.
    for (const e of on(CHANNEL.requestEnd).filter((e) => e.method === 'tools/list')) expect(typeof e.cacheHit).toBe('boolean');
    await h.request('tools/list', {});
    expect(on(CHANNEL.requestEnd).filter((e) => e.method === 'tools/list').at(-1)).toMatchObject({ cacheHit: true });
    expect(upstreamRequests('fx', 'tools/list')).toHaveLength(hostPages);

    // logging/setLevel: the host's request ends ok; the level goes upstream as mcpmux's own request.
    expect((await h.request('logging/setLevel', { level: 'warning' })).result).toEqual({});
    expect(upstreamRequests('fx', 'logging/setLevel')).toEqual([
      { server: 'fx', method: 'logging/setLevel', sessionId: undefined, outcome: 'ok', code: undefined, durationMs: expect.any(Number) },
    ]);
    expect(on(CHANNEL.requestEnd).find((e) => e.method === 'logging/setLevel')).toMatchObject({ direction: 'host-to-server', sessionId, outcome: 'ok' });
    // Requests other than the merged lists say nothing of the cache.
    expect(on(CHANNEL.requestEnd).find((e) => e.method === 'logging/setLevel')!.cacheHit).toBeUndefined();

    // resources/subscribe and resources/unsubscribe serve this host's requests: its session.
    const uri = (await h.request('resources/list')).result.resources[0].uri as string;
    expect((await h.request('resources/subscribe', { uri })).result).toEqual({});
    expect((await h.request('resources/unsubscribe', { uri })).result).toEqual({});
    for (const method of ['resources/subscribe', 'resources/unsubscribe']) {
      expect(upstreamRequests('fx', method)).toEqual([{ server: 'fx', method, sessionId, outcome: 'ok', code: undefined, durationMs: expect.any(Number), request: expect.objectContaining({ method }) }]);
      expect(on(CHANNEL.requestEnd).find((e) => e.method === method)).toMatchObject({
        direction: 'host-to-server',
        sessionId,
        server: 'fx',
        name: uri,
        upstreamName: 'fixture://fx/res/0',
        outcome: 'ok',
      });
    }

    // An upstream's error answer is published with its code.
    expect((await h.request('resources/read', { uri: uri.replace('res/0', 'res/404') })).error.code).toBe(-32002);
    expect(upstreamRequests('fx', 'resources/read')).toEqual([
      { server: 'fx', method: 'resources/read', sessionId, outcome: 'error', code: -32002, durationMs: expect.any(Number), request: expect.objectContaining({ method: 'resources/read' }) },
    ]);
  });

  it('the unsubscribe sent when the last subscribed host session detaches is an observed request of mcpmux\'s own', async () => {
    const rt = run({ mcpServers: { fx: fixture({ name: 'fx' }) } });
    const [h1, h2] = [host(rt), host(rt)];
    await h1.init();
    await h2.init();
    const uri = (await h1.request('resources/list')).result.resources[0].uri as string;
    await h1.request('resources/subscribe', { uri });
    await h2.request('resources/subscribe', { uri });
    // The first subscriber subscribes upstream; the second only joins.
    expect(upstreamRequests('fx', 'resources/subscribe')).toEqual([expect.objectContaining({ sessionId: h1.session.id, outcome: 'ok' })]);

    // h1 leaves: h2 is still subscribed, so nothing goes upstream. (Detach runs before the
    // close event; an unsubscribe sent then would be answered before h2's call below.)
    h1.end();
    await next(CHANNEL.sessionClose, (s) => s.sessionId === h1.session.id, 'h1 closed');
    expect((await h2.request('tools/call', { name: 'fx__echo', arguments: {} })).result).toBeDefined();
    expect(upstreamRequests('fx', 'resources/unsubscribe')).toEqual([]);

    // The last subscriber leaves: mcpmux unsubscribes on its own behalf.
    h2.end();
    const unsub = await next(CHANNEL.upstreamRequest, (u) => u.method === 'resources/unsubscribe', 'the unsubscribe on detach');
    expect(unsub).toEqual({ server: 'fx', method: 'resources/unsubscribe', sessionId: undefined, outcome: 'ok', code: undefined, durationMs: expect.any(Number) });
    expect(upstreamRequests('fx', 'resources/unsubscribe')).toHaveLength(1);
    // No host request was behind it.
    expect(on(CHANNEL.requestStart).filter((e) => e.method === 'resources/unsubscribe')).toEqual([]);
  });

  it('a crash: down, restarting, up again; the re-subscribe and the log level go back upstream as observed requests', async () => {
    const rt = run({ mcpServers: { fx: { ...fixture({ name: 'fx' }), restart: { maxRetries: 5, backoffMs: 20 } } } });
    const h = host(rt);
    await h.init();
    const sessionId = h.session.id;
    const uri = (await h.request('resources/list')).result.resources[0].uri as string;
    await h.request('logging/setLevel', { level: 'info' });
    await h.request('resources/subscribe', { uri });
    expect(upstreamRequests('fx', 'resources/subscribe')).toEqual([expect.objectContaining({ sessionId })]);

    // The call that crashes it fails: its connection closed while it was in flight.
    const crashed = await h.request('tools/call', { name: 'fx__crash' });
    expect(crashed.error.code).toBe(-32000);
    expect(upstreamRequests('fx', 'tools/call')).toEqual([expect.objectContaining({ sessionId, outcome: 'unavailable', code: -32000 })]);
    expect(on(CHANNEL.requestEnd).find((e) => e.name === 'fx__crash')).toMatchObject({ outcome: 'unavailable', code: -32000, server: 'fx' });

    const resubscribe = await next(CHANNEL.upstreamRequest, (u) => u.method === 'resources/subscribe' && u.sessionId === undefined, 'the re-subscribe after the restart');
    expect(resubscribe).toEqual({ server: 'fx', method: 'resources/subscribe', sessionId: undefined, outcome: 'ok', code: undefined, durationMs: expect.any(Number) });
    await waitFor(() => upstreamRequests('fx', 'logging/setLevel').length === 2, { what: 'the log level sent again', timeoutMs: 10_000 });
    const relevel = upstreamRequests('fx', 'logging/setLevel')[1];
    expect(relevel).toEqual({ server: 'fx', method: 'logging/setLevel', sessionId: undefined, outcome: 'ok', code: undefined, durationMs: expect.any(Number) });

    const states = statesOf('fx');
    expect(states.map((s) => s.state)).toEqual(['starting', 'up', 'down', 'restarting', 'starting', 'up']);
    const connection = states[0].connection;
    expect(states[2]).toEqual({ server: 'fx', connection, sharing: 'shared', state: 'down', reason: expect.stringMatching(/exited with code 1/) });
    expect(states[3]).toEqual({ server: 'fx', connection, sharing: 'shared', state: 'restarting', attempt: 1, delayMs: expect.any(Number) });
    expect(states[5]).toEqual({ server: 'fx', connection, sharing: 'shared', state: 'up' });
    // Things are restored once it is up again, not before.
    expect(at(resubscribe)).toBeGreaterThan(at(states[5]));
    expect(at(relevel)).toBeGreaterThan(at(states[5]));
    // Only one re-subscribe, and the host's subscription works: it is still usable.
    expect(upstreamRequests('fx', 'resources/subscribe')).toHaveLength(2);
    expect((await h.request('tools/call', { name: 'fx__echo', arguments: { back: true } })).result.structuredContent).toEqual({ back: true });
  });

  it('server-initiated requests appear on the request channels as server-to-host, whatever becomes of them', async () => {
    const rt = run({
      mcpServers: {
        // Asks for roots the moment it is initialized: before any host session exists.
        early: fixture({ name: 'early', rootsOnInit: true } as FixtureOptions),
        fx: fixture({ name: 'fx' }),
        cfg: { ...fixture({ name: 'cfg' }), roots: [{ uri: 'file:///from-config', name: 'config' }] },
      },
    });
    // No session could take it: refused, and observed without a session.
    const orphan = await next(CHANNEL.requestEnd, (e) => e.server === 'early' && e.method === 'roots/list', 'the roots/list no session could take');
    expect(orphan).toMatchObject({ direction: 'server-to-host', sessionId: undefined, client: undefined, transport: undefined, outcome: 'error', code: -32601, bytesIn: 0, bytesOut: 0 });
    await rt.router.ready();

    const h = host(rt, (method) => (method === 'sampling/createMessage' ? SAMPLED : method === 'roots/list' ? { roots: [{ uri: 'file:///from-host' }] } : { error: { code: -32603, message: 'no' } }));
    await h.init({ sampling: {}, roots: {} });
    const sessionId = h.session.id;
    const mark = seen.length;

    // sampling/createMessage: the host answers.
    const sampled = await h.request('tools/call', { name: 'fx__sample', arguments: { text: 'hello' } });
    expect(sampled.result.content[0].text).toContain('sampled by the host');
    const hostCall = on(CHANNEL.requestEnd).find((e) => e.name === 'fx__sample');
    const sample = on(CHANNEL.requestEnd).find((e) => e.method === 'sampling/createMessage');
    const asked = h.asked.find((m) => m.method === 'sampling/createMessage');
    expect(sample).toEqual({
      direction: 'server-to-host',
      startTime: expect.any(Number),
      sessionId,
      client: 'anonymous',
      transport: 'stdio',
      method: 'sampling/createMessage',
      // The upstream's id, not the one mcpmux gave the host.
      requestId: expect.anything(),
      params: expect.objectContaining({ maxTokens: 64, messages: [expect.objectContaining({ role: 'user' })] }),
      server: 'fx',
      name: undefined,
      upstreamName: undefined,
      outcome: 'ok',
      code: undefined,
      retryAfterMs: undefined,
      durationMs: expect.any(Number),
      bytesIn: 0,
      bytesOut: 0,
      rounds: 1,
      roundOf: undefined,
      t0: expect.any(Number),
    });
    expect(asked).toBeDefined();
    // The same object opened and closed it, inside the host's tools/call that caused it.
    const sampleStart = on(CHANNEL.requestStart).find((e) => e.method === 'sampling/createMessage');
    expect(sampleStart).toBe(sample);
    const startAt = seen.findIndex((e) => e.channel === CHANNEL.requestStart && e.msg === sample);
    const endAt = seen.findIndex((e) => e.channel === CHANNEL.requestEnd && e.msg === sample);
    const callStartAt = seen.findIndex((e) => e.channel === CHANNEL.requestStart && e.msg === hostCall);
    const callEndAt = seen.findIndex((e) => e.channel === CHANNEL.requestEnd && e.msg === hostCall);
    expect(startAt).toBeGreaterThan(mark);
    expect([callStartAt < startAt, startAt < endAt, endAt < callEndAt]).toEqual([true, true, true]);
    expect(hostCall).toMatchObject({ direction: 'host-to-server', sessionId, server: 'fx', outcome: 'ok' });
    // A request to the host is not a request to an upstream.
    expect(on(CHANNEL.upstreamRequest).filter((u) => u.method === 'sampling/createMessage')).toEqual([]);

    // roots/list answered by the host, and by the config (the host is never asked).
    expect((await h.request('tools/call', { name: 'fx__roots' })).result.content[0].text).toContain('file:///from-host');
    expect((await h.request('tools/call', { name: 'cfg__roots' })).result.content[0].text).toContain('file:///from-config');
    const roots = on(CHANNEL.requestEnd).filter((e) => e.method === 'roots/list' && e.sessionId === sessionId);
    expect(roots.map((e) => [e.server, e.direction, e.outcome])).toEqual([
      ['fx', 'server-to-host', 'ok'],
      ['cfg', 'server-to-host', 'ok'],
    ]);
    expect(h.asked.filter((m) => m.method === 'roots/list')).toHaveLength(1);

    // elicitation/create to a host that did not declare elicitation: refused, still observed.
    const elicited = await h.request('tools/call', { name: 'fx__elicit' });
    expect(elicited.result.isError).toBe(true);
    expect(on(CHANNEL.requestEnd).find((e) => e.method === 'elicitation/create')).toMatchObject({ direction: 'server-to-host', sessionId, server: 'fx', outcome: 'error', code: -32601 });
    expect(h.asked.filter((m) => m.method === 'elicitation/create')).toEqual([]);

    // The host's error answer to a server-initiated request is its outcome.
    const h2 = host(rt, () => ({ error: { code: -32603, message: 'the host refuses' } }));
    await h2.init({ sampling: {} });
    // Two greeted sessions share fx: only the one with the call in flight takes the request.
    const refused = await h2.request('tools/call', { name: 'fx__sample' });
    expect(refused.result.isError).toBe(true);
    expect(on(CHANNEL.requestEnd).find((e) => e.method === 'sampling/createMessage' && e.sessionId === h2.session.id)).toMatchObject({ direction: 'server-to-host', server: 'fx', outcome: 'error', code: -32603 });
  });

  it('upstream states: failed (then restarting, then given up) for a command that keeps failing, closed on close and when a session\'s own upstream ends', async () => {
    const rt = run({
      mcpServers: {
        // Exits at once, every time (a command that does not exist is not retried at all).
        ghost: { command: '/bin/sh', args: ['-c', 'exit 1'], restart: { maxRetries: 1, backoffMs: 20 } },
        fx: fixture({ name: 'fx' }),
        mine: { ...fixture({ name: 'mine' }), sharing: 'session' },
      },
    });
    await waitFor(() => statesOf('ghost').length >= 6, { what: 'ghost failing twice, then given up', timeoutMs: 10_000 });
    const ghost = statesOf('ghost');
    expect(ghost.map((s) => s.state)).toEqual(['starting', 'failed', 'restarting', 'starting', 'failed', 'failed']);
    // The last one: mcpmux gives up (more than restart.maxRetries failures in a minute).
    expect(ghost[5].reason).toBe('given up after 2 failure(s) within 60 s');
    expect(ghost[1]).toEqual({ server: 'ghost', connection: ghost[0].connection, sharing: 'shared', state: 'failed', reason: 'exited with code 1' });
    expect(ghost[2]).toEqual({ server: 'ghost', connection: ghost[0].connection, sharing: 'shared', state: 'restarting', attempt: 1, delayMs: expect.any(Number) });
    expect(ghost[4].reason).toEqual(expect.any(String));

    // A `sharing: "session"` server: one connection per host session, closed when it ends.
    const [h1, h2] = [host(rt), host(rt)];
    await h1.init();
    await h2.init();
    await waitFor(() => statesOf('mine').filter((s) => s.state === 'up').length === 2, { what: 'two connections of mine up' });
    const mine = statesOf('mine');
    const connections = [...new Set(mine.map((s) => s.connection))];
    expect(connections).toHaveLength(2);
    for (const s of mine) expect(s.sharing).toBe('session');
    h1.end();
    const closed = await next(CHANNEL.upstreamState, (s) => s.server === 'mine' && s.state === 'closed', 'mine closed with its session');
    expect(closed).toEqual({ server: 'mine', connection: expect.any(Number), sharing: 'session', state: 'closed' });
    expect(statesOf('mine').filter((s) => s.state === 'closed')).toHaveLength(1);
    // fx is shared: it stays up.
    expect(statesOf('fx').map((s) => s.state)).toEqual(['starting', 'up']);

    await rt.router.close();
    expect(statesOf('fx').map((s) => s.state)).toEqual(['starting', 'up', 'closed']);
    expect(statesOf('fx')[2]).toEqual({ server: 'fx', connection: statesOf('fx')[0].connection, sharing: 'shared', state: 'closed' });
    expect(statesOf('ghost').at(-1)).toMatchObject({ state: 'closed' });
    expect(statesOf('mine').filter((s) => s.state === 'closed').map((s) => s.connection).sort()).toEqual([...connections].sort());
  });
});
