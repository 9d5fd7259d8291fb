// Hosts that speak the 2026-07-28 revision (stateless, no initialize) through mcpmux to legacy
// upstreams (issue 13, scope 1). The host is the official SDK 2.x client pinned to 2026-07-28,
// a peer nobody here wrote; raw requests check the rules a client library would not break.
// Names read as a matrix: <host era> host over <transport> -> <upstream era> upstream.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyHttp } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { closeAll, fixture, MUX_BIN, readEvents, startRawMux, tempFile, waitFor, writeConfig } from './helpers/harness.js';
import { startHttpFixture } from './helpers/http-fixture.js';

afterEach(closeAll);
afterAll(stopAllDaemons);

const MODERN = '2026-07-28';
const envelope = (caps: object = {}) => ({ 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': caps, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' } });

/** The SDK 2.x client, pinned to 2026-07-28 (no fallback to initialize); list changes re-listed into `changed`. */
function modernClient(changed?: string[][]): Client {
  return new Client(
    { name: 'modern-host', version: '0' },
    {
      versionNegotiation: { mode: { pin: MODERN } },
      capabilities: {},
      ...(changed && { listChanged: { tools: { debounceMs: 0, onChanged: (_err: unknown, tools: { name: string }[] | null) => void (tools && changed.push(tools.map((t) => t.name))) } } }),
    },
  );
}

/** Lists, calls, reads and gets a prompt: what every combination must do. */
async function exercise(c: Client): Promise<void> {
  expect(c.getProtocolEra()).toBe('modern');
  const tools = (await c.listTools()).tools.map((t) => t.name);
  expect(tools).toEqual(expect.arrayContaining(['fx__echo', 'fx__tool_0']));
  expect((await c.callTool({ name: 'fx__echo', arguments: { via: 'modern' } })).structuredContent).toEqual({ via: 'modern' });
  const prompts = (await c.listPrompts()).prompts.map((p) => p.name);
  expect(prompts).toContain('fx__prompt_0');
  expect((await c.getPrompt({ name: 'fx__prompt_0', arguments: {} })).messages.length).toBeGreaterThan(0);
  const resources = (await c.listResources()).resources.map((r) => r.uri);
  expect(resources).toContain('fx+fixture://fx/res/0');
  const read = await c.readResource({ uri: 'fx+fixture://fx/res/0' });
  expect(read.contents[0]).toMatchObject({ uri: 'fx+fixture://fx/res/0' });
  expect(read).toMatchObject({ ttlMs: 0, cacheScope: 'private' });
  const progress: number[] = [];
  const done = await c.callTool({ name: 'fx__progress', arguments: { steps: 3, delayMs: 50 } }, { onprogress: (p) => void progress.push(p.progress) });
  expect(done.content).toEqual([{ type: 'text', text: 'done 3' }]);
  // The SDK 2.4 client over stdio sometimes drops the last notice when the answer right behind
  // it resolves the call first (mcpmux's order on the wire is checked exactly by the raw test).
  await waitFor(() => progress.length >= 2, { what: 'progress notices' });
  expect([1, 2, 3].slice(0, progress.length)).toEqual(progress);
  await expect(c.callTool({ name: 'fx__no_such_tool', arguments: {} })).rejects.toThrow(/Unknown tool: fx__no_such_tool/);
}

/** A tool added upstream reaches the host over its subscriptions/listen stream. */
async function hearsListChanged(c: Client, changed: string[][]): Promise<void> {
  await c.callTool({ name: 'fx__add_tool', arguments: {} });
  await waitFor(() => changed.some((names) => names.includes('fx__added_0')), { what: 'tools/list_changed over subscriptions/listen', timeoutMs: 10_000 });
}

describe('modern host over stdio -> legacy stdio upstream', () => {
  it('discovers, lists, calls with progress, reads, gets a prompt, and hears list_changed over subscriptions/listen', async () => {
    const config = await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) } });
    const changed: string[][] = [];
    const c = modernClient(changed);
    await c.connect(new StdioClientTransport({ command: process.execPath, args: [MUX_BIN, 'stdio', '--config', config], stderr: 'ignore' }));
    try {
      expect(c.getNegotiatedProtocolVersion()).toBe(MODERN);
      expect(c.getServerCapabilities()).toMatchObject({ tools: { listChanged: true }, prompts: {}, resources: {} });
      await exercise(c);
      await hearsListChanged(c, changed);
    } finally {
      await c.close();
    }
  }, 60_000);

  it('raw: the first request decides the era; envelopes are checked; the legacy-only methods are gone', async () => {
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) } }));
    const discover = await peer.request('server/discover', { _meta: envelope() });
    expect(discover.result).toMatchObject({
      resultType: 'complete',
      supportedVersions: [MODERN],
      capabilities: { tools: { listChanged: true } },
      ttlMs: 0,
      cacheScope: 'private',
      _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'mcpmux' } },
    });
    expect((await peer.request('tools/list', { _meta: envelope() })).result).toMatchObject({ resultType: 'complete', ttlMs: 0, cacheScope: 'private' });
    expect((await peer.request('tools/list', { _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN } })).error).toMatchObject({ code: -32602 });
    expect((await peer.request('tools/list', { _meta: { ...envelope(), 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } })).error).toEqual({
      code: -32022,
      message: 'Unsupported protocol version: 2099-01-01',
      data: { supported: [MODERN], requested: '2099-01-01' },
    });
    for (const method of ['ping', 'logging/setLevel', 'resources/subscribe', 'initialize']) {
      expect((await peer.request(method, { _meta: envelope() })).error, method).toMatchObject({ code: -32601 });
    }
    // Progress goes out in order, all of it before the answer.
    peer.send({ jsonrpc: '2.0', id: 'p', method: 'tools/call', params: { name: 'fx__progress', arguments: { steps: 3 }, _meta: { ...envelope(), progressToken: 'tok' } } });
    await peer.next((m) => m.id === 'p', 10_000);
    const tail = peer.messages.slice(peer.messages.findIndex((m) => m.params?.progressToken === 'tok'));
    expect(tail.map((m) => m.params?.progress ?? m.id)).toEqual([1, 2, 3, 'p']);
    // A resource that does not exist is invalid params in this revision (-32002 before).
    expect((await peer.request('resources/read', { uri: 'nope+x://y', _meta: envelope() })).error).toMatchObject({ code: -32602 });
    expect(peer.child.exitCode).toBeNull();
  });

  it('raw: the envelope stays between host and mcpmux; the legacy upstream gets its own request', async () => {
    const events = tempFile('fx.jsonl');
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx', events }) } }));
    const r = await peer.request('tools/call', { name: 'fx__echo', arguments: { a: 1 }, _meta: { ...envelope(), trace: 'kept' } });
    expect(r.result).toMatchObject({ resultType: 'complete', structuredContent: { a: 1 } });
    const call = readEvents(events).find((e) => e.type === 'request' && e.method === 'tools/call');
    expect(call.params._meta).toEqual({ trace: 'kept' });
  });
});

describe('modern host over Streamable HTTP -> legacy stdio upstream', () => {
  let d: Daemon;
  let events: string;
  beforeAll(async () => {
    events = tempFile('fx.jsonl');
    d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx', events }) } });
  });

  it('lists, calls with progress, reads, gets a prompt, hears list_changed; a legacy host on the same endpoint is unaffected', async () => {
    const changed: string[][] = [];
    const c = modernClient(changed);
    await c.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    const legacy = new LegacyClient({ name: 'legacy-host', version: '0' });
    await legacy.connect(new LegacyHttp(new URL(d.url)));
    try {
      await exercise(c);
      expect((await legacy.callTool({ name: 'fx__echo', arguments: { era: 'legacy' } })).structuredContent).toEqual({ era: 'legacy' });
      await hearsListChanged(c, changed);
      // The legacy host hears of it its own way.
      expect((await legacy.listTools()).tools.map((t) => t.name)).toContain('fx__added_0');
      // Stateless requests are no sessions: the legacy host's is the only one (the modern
      // host's listen stream is open right now, and still not a session).
      const status = await (await fetch(`${d.base}/status`)).json();
      expect(status.sessions).toMatchObject({ total: 1, byTransport: { http: 1 }, statelessOpen: 1 });
    } finally {
      await c.close();
      await legacy.close();
    }
  }, 60_000);

  it('modern host over `mcpmux connect` (stdio to the daemon): the bridge sends each message as 2026-07-28 wants it', async () => {
    const changed: string[][] = [];
    const c = modernClient(changed);
    await c.connect(new StdioClientTransport({ command: process.execPath, args: [MUX_BIN, 'connect', d.url], stderr: 'ignore' }));
    try {
      expect(c.getProtocolEra()).toBe('modern');
      expect((await c.callTool({ name: 'fx__echo', arguments: { via: 'connect' } })).structuredContent).toEqual({ via: 'connect' });
      await c.callTool({ name: 'fx__add_tool', arguments: {} });
      await waitFor(() => changed.length > 0, { what: 'list_changed through connect', timeoutMs: 10_000 });
      // Requests are independent: a slow one holds back nothing, and cancelling it reaches the upstream.
      const abortedBefore = readEvents(events).filter((e) => e.type === 'aborted').length;
      const ac = new AbortController();
      let slowDone = false;
      const slow = c.callTool({ name: 'fx__slow', arguments: { ms: 30_000 } }, { signal: ac.signal }).then(
        () => (slowDone = true),
        () => (slowDone = true),
      );
      await waitFor(() => readEvents(events).filter((e) => e.type === 'request' && e.params?.name === 'slow').length > 0, { what: 'the slow call upstream' });
      expect((await c.callTool({ name: 'fx__echo', arguments: { meanwhile: true } })).structuredContent).toEqual({ meanwhile: true });
      expect(slowDone).toBe(false);
      ac.abort();
      await slow;
      await waitFor(() => readEvents(events).filter((e) => e.type === 'aborted').length > abortedBefore, { what: 'the upstream told to stop', timeoutMs: 10_000 });
    } finally {
      await c.close();
    }
  });

  it('closing the response stream cancels the request upstream', async () => {
    const c = modernClient();
    await c.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    const ac = new AbortController();
    const slow = c.callTool({ name: 'fx__slow', arguments: { ms: 30_000 } }, { signal: ac.signal }).catch((e: Error) => e);
    await waitFor(() => readEvents(events).some((e) => e.type === 'request' && e.params?.name === 'slow'), { what: 'the slow call upstream' });
    ac.abort();
    expect(await slow).toBeInstanceOf(Error);
    await waitFor(() => readEvents(events).some((e) => e.type === 'aborted' && e.tool === 'slow'), { what: 'the upstream told to stop', timeoutMs: 10_000 });
    await c.close();
  });

  describe('raw POSTs: the transport rules, each refused before anything runs', () => {
    const post = (body: unknown, headers: Record<string, string> = {}) =>
      fetch(d.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: JSON.stringify(body) });
    const call = (name: string, extra: Record<string, string> = {}) =>
      post(
        { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name, arguments: { x: 1 }, _meta: envelope() } },
        { 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': name, ...extra },
      );
    const answer = async (res: Response) => ({ status: res.status, body: await res.json() });

    it('a well-formed request is answered as plain JSON, with no session id', async () => {
      const res = await call('fx__echo');
      expect(res.headers.get('mcp-session-id')).toBeNull();
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(await answer(res)).toMatchObject({ status: 200, body: { id: 7, result: { resultType: 'complete', structuredContent: { x: 1 } } } });
    });

    it('Mcp-Name in its base64 form is decoded before it is compared', async () => {
      const res = await call('fx__echo', { 'mcp-name': `=?base64?${Buffer.from('fx__echo').toString('base64')}?=` });
      expect(res.status).toBe(200);
    });

    it('headers that disagree with the body, or are missing: 400 with -32020', async () => {
      const cases: Record<string, string>[] = [{ 'mcp-name': 'fx__other' }, { 'mcp-method': 'tools/list' }, { 'mcp-protocol-version': '2099-01-01' }, { 'mcp-name': '=?base64?!!!?=' }];
      for (const h of cases) expect(await answer(await call('fx__echo', h)), JSON.stringify(h)).toMatchObject({ status: 400, body: { id: 7, error: { code: -32020 } } });
      const noMethod = await post({ jsonrpc: '2.0', id: 8, method: 'tools/list', params: { _meta: envelope() } }, { 'mcp-protocol-version': MODERN });
      expect(await answer(noMethod)).toMatchObject({ status: 400, body: { error: { code: -32020, message: expect.stringContaining('Mcp-Method') } } });
    });

    it('an unsupported version: 400 with -32022 and what is supported; a missing envelope key: 400 with -32602', async () => {
      const future = await post(
        { jsonrpc: '2.0', id: 9, method: 'tools/list', params: { _meta: { ...envelope(), 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } } },
        { 'mcp-protocol-version': '2099-01-01', 'mcp-method': 'tools/list' },
      );
      expect(await answer(future)).toMatchObject({ status: 400, body: { error: { code: -32022, data: { supported: [MODERN], requested: '2099-01-01' } } } });
      const bare = await post({ jsonrpc: '2.0', id: 10, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN } } }, { 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/list' });
      expect(await answer(bare)).toMatchObject({ status: 400, body: { error: { code: -32602 } } });
    });

    it('a method this revision does not have: 404 with -32601; a batch: 400; a notification: 202', async () => {
      const ping = await post({ jsonrpc: '2.0', id: 11, method: 'ping', params: { _meta: envelope() } }, { 'mcp-protocol-version': MODERN, 'mcp-method': 'ping' });
      expect(await answer(ping)).toMatchObject({ status: 404, body: { id: 11, error: { code: -32601 } } });
      const batch = await post([{ jsonrpc: '2.0', id: 12, method: 'tools/list', params: { _meta: envelope() } }], { 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/list' });
      expect(batch.status).toBe(400);
      const note = await post({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, _meta: envelope() } }, { 'mcp-protocol-version': MODERN });
      expect(note.status).toBe(202);
    });
  });
});

describe('legacy upstream asks, modern host answers: the input_required bridge', () => {
  /** An SDK 2.x host that answers elicitations and samplings. */
  function answering(): Client {
    const c = new Client({ name: 'modern-host', version: '0' }, { versionNegotiation: { mode: { pin: MODERN } }, capabilities: { elicitation: { form: {} }, sampling: {} } });
    c.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { answer: 'yes' } }));
    c.setRequestHandler('sampling/createMessage', async () => ({ role: 'assistant', content: { type: 'text', text: 'sampled' }, model: 'm' }));
    return c;
  }
  const answered = async (c: Client) => {
    expect(JSON.parse(((await c.callTool({ name: 'fx__elicit', arguments: {} })).content as any)[0].text)).toEqual({ action: 'accept', content: { answer: 'yes' } });
    expect(JSON.parse(((await c.callTool({ name: 'fx__sample', arguments: { text: 'hi' } })).content as any)[0].text)).toMatchObject({ content: { text: 'sampled' } });
  };

  it('modern host over stdio -> legacy stdio upstream: elicitation and sampling come back as input_required, answered on the retry', async () => {
    const c = answering();
    await c.connect(new StdioClientTransport({ command: process.execPath, args: [MUX_BIN, 'stdio', '--config', await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) } })], stderr: 'ignore' }));
    try {
      await answered(c);
    } finally {
      await c.close();
    }
  }, 60_000);

  describe('over Streamable HTTP', () => {
    const tokens = { MUX_A: 'token-a-0123456789', MUX_B: 'token-b-0123456789' };
    let d: Daemon;
    let events: string;
    beforeAll(async () => {
      events = tempFile('fx.jsonl');
      d = await startDaemon(
        { mcpServers: { fx: fixture({ name: 'fx', events }) }, listen: { auth: { tokens: [{ client: 'a', tokenEnv: 'MUX_A' }, { client: 'b', tokenEnv: 'MUX_B' }] } } },
        // Long enough for the refusals and the retry below on a busy machine; the expiry is waited for.
        { ...tokens, MCPMUX_INPUT_TTL_MS: '10000' },
      );
    });
    const call = async (token: string, name: string, extra: object = {}) => {
      const res = await fetch(d.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}`, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': name },
        body: JSON.stringify({ jsonrpc: '2.0', id: Math.random(), method: 'tools/call', params: { name, arguments: {}, _meta: envelope({ elicitation: { form: {} } }), ...extra } }),
      });
      return (await res.json()) as any;
    };
    const elicitAnswered = () => readEvents(events).filter((e) => e.type === 'response' && e.result?.action === 'accept').length;

    it('modern host over Streamable HTTP -> legacy stdio upstream: the same, with the SDK 2.x client', async () => {
      const c = answering();
      await c.connect(new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: { authorization: `Bearer ${tokens.MUX_A}` } } }));
      try {
        await answered(c);
      } finally {
        await c.close();
      }
    }, 60_000);

    it('a requestState altered, for another call, from another client, used twice or expired is refused with -32602', async () => {
      const answeredBefore = elicitAnswered();
      const failedBefore = readEvents(events).filter((e) => e.type === 'response' && e.error).length;
      const first = (await call(tokens.MUX_A, 'fx__elicit')).result;
      expect(first).toMatchObject({ resultType: 'input_required', inputRequests: { q1: { method: 'elicitation/create' } }, requestState: expect.stringMatching(/^mcpmux1\./) });
      expect(first.ttlMs).toBeUndefined();
      const state: string = first.requestState;
      const answer = { inputResponses: { q1: { action: 'accept', content: { answer: 'yes' } } } };
      const refusal = async (token: string, name: string, requestState: string) => (await call(token, name, { ...answer, requestState })).error;
      const altered = state.slice(0, 12) + (state[12] === 'A' ? 'B' : 'A') + state.slice(13);
      expect(await refusal(tokens.MUX_A, 'fx__elicit', altered)).toEqual({ code: -32602, message: 'Invalid requestState: not issued by this mcpmux, or altered' });
      expect(await refusal(tokens.MUX_A, 'fx__echo', state)).toEqual({ code: -32602, message: 'Invalid requestState: issued for another request than this tools/call' });
      expect(await refusal(tokens.MUX_B, 'fx__elicit', state)).toEqual({ code: -32602, message: 'Invalid requestState: issued to another client' });
      // None of those reached the waiting upstream; the right retry does, once.
      expect(elicitAnswered()).toBe(answeredBefore);
      const done = await call(tokens.MUX_A, 'fx__elicit', { ...answer, requestState: state });
      expect(JSON.parse(done.result.content[0].text)).toEqual({ action: 'accept', content: { answer: 'yes' } });
      expect(elicitAnswered()).toBe(answeredBefore + 1);
      expect(await refusal(tokens.MUX_A, 'fx__elicit', state)).toEqual({ code: -32602, message: 'Invalid requestState: already used, or its call has ended' });

      // Not coming back in time (10 s here): the upstream's question fails, and the token is spent.
      const late = (await call(tokens.MUX_A, 'fx__elicit')).result.requestState as string;
      const failed = () => readEvents(events).filter((e) => e.type === 'response' && e.error).length;
      await waitFor(() => failed() === failedBefore + 1, { what: 'the question failed upstream after the wait', timeoutMs: 30_000 });
      expect(await refusal(tokens.MUX_A, 'fx__elicit', late)).toEqual({ code: -32602, message: 'Invalid requestState: expired' });
    }, 60_000);
  });
});

describe('modern host -> legacy HTTP upstream: log messages', () => {
  it('reach the host on the request that asked for them (io.modelcontextprotocol/logLevel), from that level up', async () => {
    const web = await startHttpFixture({ name: 'web' });
    try {
      const d = await startDaemon({ mcpServers: { web: { url: `${web.url}/mcp` } } });
      const ask = async (level?: string) => {
        const res = await fetch(d.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'web__log' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'web__log', arguments: {}, _meta: { ...envelope(), ...(level && { 'io.modelcontextprotocol/logLevel': level }) } } }),
        });
        return res.text();
      };
      const asked = await ask('warning');
      expect(asked).toContain('"method":"notifications/message"');
      expect(asked).toContain('warning from web');
      expect(asked).not.toContain('info from web');
      // Without the key, none: the revision forbids log messages for requests that did not ask.
      expect(await ask()).not.toContain('notifications/message');
      await d.stop();
    } finally {
      await web.close();
    }
  });
});

describe('modern host over Streamable HTTP: open requests are bounded', () => {
  it('past limits.maxSessions open requests (a listen stream holds one) a request gets 503; once it closes, requests pass again', async () => {
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) }, limits: { maxSessions: 1 } });
    const headers = (method: string) => ({ 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN, 'mcp-method': method });
    const ac = new AbortController();
    const listen = await fetch(d.url, {
      method: 'POST',
      headers: headers('subscriptions/listen'),
      body: JSON.stringify({ jsonrpc: '2.0', id: 'l', method: 'subscriptions/listen', params: { notifications: { toolsListChanged: true }, _meta: envelope() } }),
      signal: ac.signal,
    });
    expect(listen.headers.get('content-type')).toBe('text/event-stream');
    const reader = listen.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toContain('notifications/subscriptions/acknowledged');
    expect(first).toContain('"io.modelcontextprotocol/subscriptionId":"l"');
    const list = () => fetch(d.url, { method: 'POST', headers: headers('tools/list'), body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: envelope() } }) });
    const refused = await list();
    expect(refused.status).toBe(503);
    expect((await refused.json()).error.message).toMatch(/too many open requests without a session/);
    ac.abort();
    await waitFor(async () => (await list()).status === 200, { what: 'requests accepted again' });
    await d.stop();
  });
});

describe('legacy host -> mcpmux stdio still starts with initialize', () => {
  it('a host whose first request is initialize gets the legacy handshake, as before', async () => {
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) } }));
    const init = await peer.initialize();
    expect(init.result.protocolVersion).toBe('2025-11-25');
    const list = await peer.request('tools/list');
    expect(list.result.resultType).toBeUndefined();
    expect(list.result.tools.length).toBeGreaterThan(0);
  });
});

describe('the SDK 2.x stdio client probes with a throw-away copy first', () => {
  it('that copy and its upstreams are gone once the client is connected (no process left behind)', async () => {
    const events = tempFile('fx.jsonl');
    const config = await writeConfig({ mcpServers: { fx: fixture({ name: 'fx', events }) } });
    const c = modernClient();
    await c.connect(new StdioClientTransport({ command: process.execPath, args: [MUX_BIN, 'stdio', '--config', config], stderr: 'ignore' }));
    try {
      await c.listTools();
      // Two fixtures were started (the probe's copy and the real one); one is left running.
      await waitFor(() => {
        const pids = new Set(readEvents(events).filter((e) => e.type === 'start').map((e) => e.pid as number));
        const alive = [...pids].filter((pid) => {
          try {
            process.kill(pid, 0);
            return true;
          } catch {
            return false;
          }
        });
        return alive.length === 1;
      }, { what: 'one fixture left running', timeoutMs: 15_000 });
    } finally {
      await c.close();
    }
  }, 60_000);
});

