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
import { fixture, waitFor } from './helpers/harness.js';

const seen: { channel: string; msg: any }[] = [];
const listeners = Object.values(CHANNEL).map((name) => [name, (msg: unknown) => seen.push({ channel: name, msg })] as const);
let runtime: Runtime | undefined;

afterEach(async () => {
  for (const [name, fn] of listeners) dc.unsubscribe(name, fn);
  seen.length = 0;
  await runtime?.router.close();
  runtime = undefined;
});

/** A host on in-memory pipes in front of the real router: send a request, read its answer. */
function host(rt: Runtime) {
  const toMux = new PassThrough();
  const fromMux = new PassThrough();
  const session = rt.openSession(new StreamTransport(toMux, fromMux, 1 << 20), 'stdio');
  const answers = new Map<number, any>();
  let buf = '';
  fromMux.setEncoding('utf8').on('data', (c: string) => {
    buf += c;
    for (let i; (i = buf.indexOf('\n')) >= 0; buf = buf.slice(i + 1)) {
      const m = JSON.parse(buf.slice(0, i));
      if ('id' in m && !('method' in m)) answers.set(m.id, m);
    }
  });
  let id = 0;
  return {
    session,
    async request(method: string, params: object = {}): Promise<any> {
      const mine = ++id;
      toMux.write(JSON.stringify({ jsonrpc: '2.0', id: mine, method, params }) + '\n');
      return waitFor(() => answers.get(mine), { what: `answer ${mine}` });
    },
    end: () => toMux.end(),
  };
}

const on = (channel: string) => seen.filter((e) => e.channel === channel).map((e) => e.msg);

describe('events (node:diagnostics_channel)', () => {
  it('nothing is built when nobody listens', () => {
    expect(startHostRequest({ id: 's', client: 'c', transport: 'stdio' }, 'ping', 1, undefined, 10)).toBeUndefined();
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
      t0: expect.any(Number),
    });
    expect(ends[1].bytesIn).toBeGreaterThan(50);
    expect(ends[1].bytesOut).toBeGreaterThan(50);
    expect(ends[2]).toMatchObject({ code: -31002, server: 'fx', name: 'fx__whoami' });
    expect(ends[4]).toMatchObject({ outcome: 'limited', retryAfterMs: expect.any(Number) });

    const upstream = on(CHANNEL.upstreamRequest);
    expect(upstream.filter((u) => u.method === 'tools/call')).toEqual([
      { server: 'fx', method: 'tools/call', sessionId, outcome: 'ok', code: undefined, durationMs: expect.any(Number) },
      { server: 'fx', method: 'tools/call', sessionId, outcome: 'ok', code: undefined, durationMs: expect.any(Number) },
    ]);
    // Walking the tool list to resolve names is mcpmux's own request: no session.
    expect(upstream.find((u) => u.method === 'tools/list')).toMatchObject({ server: 'fx', sessionId: undefined, outcome: 'ok' });

    expect(on(CHANNEL.policyDenied)).toEqual([{ sessionId, client: 'anonymous', server: 'fx', method: 'tools/call', kind: 'tools', name: 'fx__whoami' }]);
    expect(on(CHANNEL.rateLimited)).toEqual([{ sessionId, client: 'anonymous', server: 'fx', method: 'tools/call', tool: 'tool_0', retryAfterMs: expect.any(Number), rule: 0 }]);
  });
});
