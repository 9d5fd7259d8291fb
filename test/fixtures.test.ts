// Tests the upstream fixture (test/fixtures/upstream.mjs) DIRECTLY, without mcpmux: an SDK
// client over stdio and a raw JSON-RPC pipe. They pin down what the fixture does, so that the
// mcpmux end-to-end tests can rely on it (and read here how to drive it).
import { afterEach, describe, expect, it } from 'vitest';
import {
  CreateMessageRequestSchema,
  ElicitationCompleteNotificationSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import {
  closeAll,
  connectStdio,
  fixture,
  looseSchema,
  readEvents,
  startRaw,
  tempFile,
  waitFor,
  waitForEvent,
} from './helpers/harness.js';
import { generatedPrompt, generatedResource, generatedTemplate, generatedTool } from './fixtures/upstream-items.mjs';

afterEach(closeAll);

const SPECIAL = [
  'echo', 'whoami', 'slow', 'progress', 'sample', 'elicit', 'elicit_url', 'url_required', 'roots', 'log',
  'cancel_own_sample', 'add_tool', 'links', 'nested', 'touch', 'fail', 'crash',
];
const textOf = (r: any) => r.content[0].text as string;
const jsonOf = (r: any) => JSON.parse(textOf(r));

describe('upstream fixture: lists', () => {
  it('walks 250 tools 7 per page, each exactly once', async () => {
    const { client } = await connectStdio(fixture({ name: 'alpha', tools: 250, pageSize: 7 }));
    const names: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const r: any = await client.request({ method: 'tools/list', params: cursor ? { cursor } : {} }, looseSchema);
      expect(r.tools.length).toBeLessThanOrEqual(7);
      names.push(...r.tools.map((t: any) => t.name));
      cursor = r.nextCursor;
      expect(++pages).toBeLessThan(100);
    } while (cursor);
    const total = 250 + SPECIAL.length;
    expect(names).toHaveLength(total);
    expect(new Set(names).size).toBe(total);
    expect(pages).toBe(Math.ceil(total / 7));
    expect(names.slice(0, 250)).toEqual(Array.from({ length: 250 }, (_, i) => `tool_${i}`));
    expect(names.slice(250)).toEqual(SPECIAL);
  });

  it('paginates prompts, resources and templates too', async () => {
    const peer = startRaw(fixture({ name: 'p', prompts: 5, resources: 5, templates: 5, pageSize: 2 }));
    await peer.initialize();
    for (const [method, key] of [['prompts/list', 'prompts'], ['resources/list', 'resources'], ['resources/templates/list', 'resourceTemplates']]) {
      const seen: any[] = [];
      let cursor: string | undefined;
      do {
        const { result } = await peer.request(method!, cursor ? { cursor } : {});
        expect(result[key!].length).toBeLessThanOrEqual(2);
        seen.push(...result[key!]);
        cursor = result.nextCursor;
      } while (cursor);
      expect(seen).toHaveLength(5);
    }
  });

  it('puts every optional field and the unknown "x-fixture" key on the wire', async () => {
    const peer = startRaw(fixture({ name: 'wire' }));
    await peer.initialize();
    const cases: [string, string, any][] = [
      ['tools/list', 'tools', generatedTool('wire', 0)],
      ['prompts/list', 'prompts', generatedPrompt('wire', 0)],
      ['resources/list', 'resources', generatedResource('wire', 0)],
      ['resources/templates/list', 'resourceTemplates', generatedTemplate('wire', 0)],
    ];
    for (const [method, key, expected] of cases) {
      const { result } = await peer.request(method, {});
      expect(result[key][0]).toEqual(expected);
      expect(result[key][0]['x-fixture']).toEqual({ n: 0 });
    }
    expect(Object.keys(generatedTool('wire', 0)).sort()).toEqual(
      ['_meta', 'annotations', 'description', 'execution', 'icons', 'inputSchema', 'name', 'outputSchema', 'title', 'x-fixture'],
    );
    expect(Object.keys(generatedResource('wire', 0)).sort()).toEqual(
      ['_meta', 'annotations', 'description', 'icons', 'mimeType', 'name', 'size', 'title', 'uri', 'x-fixture'],
    );
    expect(peer.lines.filter((l) => l.includes('"x-fixture":{"n":0}'))).toHaveLength(4);
    // stdout carries nothing but JSON-RPC.
    for (const line of peer.lines) expect(JSON.parse(line).jsonrpc).toBe('2.0');
  });

  it('SDK typed helpers strip unknown keys; looseSchema keeps them', async () => {
    const { client } = await connectStdio(fixture({ name: 'strip' }));
    const typed = await client.listTools();
    expect(typed.tools[0]).not.toHaveProperty('x-fixture');
    const loose: any = await client.request({ method: 'tools/list', params: {} }, looseSchema);
    expect(loose.tools[0]['x-fixture']).toEqual({ n: 0 });
  });

  it('rejects a bad, foreign or other-list cursor with -32602', async () => {
    const peer = startRaw(fixture({ name: 'cur', prompts: 3, pageSize: 1 }));
    await peer.initialize();
    const { result } = await peer.request('prompts/list', {});
    expect(result.nextCursor).toBeTypeOf('string');
    for (const cursor of ['bogus', result.nextCursor /* a prompts cursor */]) {
      const res = await peer.request('tools/list', { cursor });
      expect(res.error.code).toBe(-32602);
    }
    const other = startRaw(fixture({ name: 'cur', prompts: 3, pageSize: 1 }));
    await other.initialize();
    expect((await other.request('prompts/list', { cursor: result.nextCursor })).error.code).toBe(-32602);
    const { client } = await connectStdio(fixture({ pageSize: 1 }));
    await expect(client.listTools({ cursor: 'bogus' })).rejects.toMatchObject({ code: -32602 });
  });

  it('honours capability overrides and instructions', async () => {
    const { client } = await connectStdio(fixture({ name: 'caps', capabilities: { prompts: false }, instructions: 'use me' }));
    expect(client.getServerCapabilities()).not.toHaveProperty('prompts');
    expect(client.getServerCapabilities()?.resources).toEqual({ subscribe: true, listChanged: true });
    expect(client.getInstructions()).toBe('use me');
    expect(client.getServerVersion()?.name).toBe('caps');
    await expect(client.request({ method: 'prompts/list', params: {} }, looseSchema)).rejects.toMatchObject({ code: -32601 });
  });
});

describe('upstream fixture: tools, prompts, resources', () => {
  it('answers echo, whoami, generated tools, links and fail', async () => {
    const events = tempFile('events.jsonl');
    const peer = await connectStdio(fixture({ name: 'tools', events }));
    const { client } = peer;
    await client.listTools(); // lets callTool validate tool_1's outputSchema
    const echo = await client.callTool({ name: 'echo', arguments: { a: 1, b: ['x'] } });
    expect(echo.structuredContent).toEqual({ a: 1, b: ['x'] });
    expect(jsonOf(echo)).toEqual({ a: 1, b: ['x'] });
    expect(jsonOf(await client.callTool({ name: 'whoami' }))).toEqual({ name: 'tools', pid: peer.transport.pid });
    const t1 = await client.callTool({ name: 'tool_1', arguments: { text: 'hi' } });
    expect(t1.structuredContent).toEqual({ tool: 'tool_1', n: 1, server: 'tools', arguments: { text: 'hi' } });
    const links: any = await client.request({ method: 'tools/call', params: { name: 'links' } }, looseSchema);
    expect(links.content.slice(1)).toEqual([
      { type: 'resource_link', uri: 'fixture://tools/res/0', name: 'res_0', title: 'Resource 0', mimeType: 'text/plain' },
      { type: 'resource', resource: { uri: 'fixture://tools/res/0', mimeType: 'text/plain', text: 'content of fixture://tools/res/0' } },
    ]);
    await expect(client.callTool({ name: 'fail' })).rejects.toMatchObject({ code: -32603 });
    await expect(client.callTool({ name: 'nope' })).rejects.toMatchObject({ code: -32602 });
    // The events file saw each request with the client's ids.
    const calls = readEvents(events).filter((e) => e.type === 'request' && e.method === 'tools/call');
    expect(calls.map((e) => e.params.name)).toEqual(['echo', 'whoami', 'tool_1', 'links', 'fail', 'nope']);
    expect(readEvents(events).find((e) => e.type === 'sent_response' && e.id === calls[4].id).error).toEqual({
      code: -32603,
      message: 'fixture failure',
    });
  });

  it('url_required fails with -32042 and data.elicitations', async () => {
    const peer = startRaw(fixture({ name: 'u' }));
    await peer.initialize();
    const res = await peer.request('tools/call', { name: 'url_required' });
    expect(res.error.code).toBe(-32042);
    expect(res.error.data.elicitations[0]).toMatchObject({ mode: 'url', elicitationId: 'u-required-1' });
  });

  it('serves prompts, reads, completions, subscriptions and touch', async () => {
    const events = tempFile('events.jsonl');
    const updated: string[] = [];
    const { client } = await connectStdio(fixture({ name: 'r', events }), {
      beforeConnect: (c) => c.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri)),
    });
    const prompt: any = await client.request({ method: 'prompts/get', params: { name: 'prompt_1', arguments: { topic: 'cats' } } }, looseSchema);
    expect(prompt.messages[0].content.text).toBe('prompt 1 of r about cats');
    expect(prompt.messages[1].content).toMatchObject({ type: 'resource', resource: { uri: 'fixture://r/res/0' } });
    expect(prompt.messages[2].content).toMatchObject({ type: 'resource_link', uri: 'fixture://r/res/0' });
    const read = await client.readResource({ uri: 'fixture://r/res/1' });
    expect(read.contents).toEqual([{ uri: 'fixture://r/res/1', mimeType: 'text/plain', text: 'content of fixture://r/res/1' }]);
    expect((await client.readResource({ uri: 'fixture://r/tpl/0/abc' })).contents[0]!.uri).toBe('fixture://r/tpl/0/abc');
    await expect(client.readResource({ uri: 'fixture://r/res/99' })).rejects.toMatchObject({ code: -32002 });
    const done = { values: ['a', 'b'], total: 2, hasMore: false };
    expect((await client.complete({ ref: { type: 'ref/prompt', name: 'prompt_0' }, argument: { name: 'topic', value: 'x' } })).completion).toEqual(done);
    expect(
      (await client.complete({ ref: { type: 'ref/resource', uri: 'fixture://r/tpl/0/{id}' }, argument: { name: 'id', value: '' } })).completion,
    ).toEqual(done);
    await client.subscribeResource({ uri: 'fixture://r/res/0' });
    await client.callTool({ name: 'touch', arguments: { uri: 'fixture://r/res/0' } });
    await waitFor(() => updated.includes('fixture://r/res/0'), { what: 'resources/updated' });
    await client.unsubscribeResource({ uri: 'fixture://r/res/0' });
    const methods = readEvents(events).filter((e) => e.type === 'request').map((e) => e.method);
    expect(methods).toEqual(expect.arrayContaining(['resources/subscribe', 'resources/unsubscribe', 'completion/complete']));
  });

  it('add_tool adds added_<k> and sends tools/list_changed', async () => {
    let changed = 0;
    const { client } = await connectStdio(fixture({ name: 'add', tools: 0 }), {
      beforeConnect: (c) => c.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++),
    });
    expect(textOf(await client.callTool({ name: 'add_tool' }))).toBe('added_0');
    await waitFor(() => changed === 1, { what: 'tools/list_changed' });
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('added_0');
    expect(textOf(await client.callTool({ name: 'added_0' }))).toBe('added_0');
  });
});

describe('upstream fixture: flows', () => {
  it('sends progress with the client token, increasing, before the result', async () => {
    const peer = startRaw(fixture({ name: 'prog' }));
    await peer.initialize();
    peer.send({ jsonrpc: '2.0', id: 42, method: 'tools/call', params: { name: 'progress', arguments: { steps: 3, delayMs: 1 }, _meta: { progressToken: 'tok-A' } } });
    const res = await peer.next((m) => m.id === 42);
    expect(res.result.content[0].text).toBe('done 3');
    const prog = peer.messages.filter((m) => m.method === 'notifications/progress');
    expect(prog.map((m) => m.params)).toEqual([1, 2, 3].map((k) => ({ progressToken: 'tok-A', progress: k, total: 3, message: `step ${k}` })));
    expect(peer.messages.indexOf(prog[2])).toBeLessThan(peer.messages.indexOf(res));

    // The SDK client only sends a token when onprogress is given. It handles notifications a
    // microtask after the response that shares their chunk, so the last steps may be dropped
    // by the SDK itself: only the first and the order are certain. The first comes 400 ms before
    // the next (25 ms was too little on a loaded machine: all of them arrived in one chunk).
    const { client } = await connectStdio(fixture({ name: 'prog2' }));
    const seen: number[] = [];
    await client.callTool({ name: 'progress', arguments: { steps: 3, delayMs: 400 } }, undefined, { onprogress: (p) => void seen.push(p.progress) });
    expect(seen[0]).toBe(1);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
  });

  it('round-trips sampling, elicitation (form and url) and roots through an SDK client', async () => {
    const completes: string[] = [];
    const { client } = await connectStdio(fixture({ name: 'flow' }), {
      clientCapabilities: { sampling: {}, elicitation: { form: {}, url: {} }, roots: { listChanged: true } },
      beforeConnect(c) {
        c.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
          model: 'test-model',
          role: 'assistant' as const,
          content: { type: 'text' as const, text: `maxTokens=${req.params.maxTokens}` },
        }));
        c.setRequestHandler(ElicitRequestSchema, async (req) =>
          req.params.mode === 'url' ? { action: 'accept' as const } : { action: 'accept' as const, content: { name: 'Ada', confirm: true } },
        );
        c.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///work', name: 'work' }] }));
        c.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => void completes.push(n.params.elicitationId));
      },
    });
    expect(jsonOf(await client.callTool({ name: 'sample', arguments: { maxTokens: 7 } }))).toEqual({
      model: 'test-model',
      role: 'assistant',
      content: { type: 'text', text: 'maxTokens=7' },
    });
    expect(jsonOf(await client.callTool({ name: 'elicit' }))).toEqual({ action: 'accept', content: { name: 'Ada', confirm: true } });
    expect(jsonOf(await client.callTool({ name: 'elicit_url' }))).toEqual({ action: 'accept', elicitationId: 'flow-elicitation-1' });
    await waitFor(() => completes.includes('flow-elicitation-1'), { what: 'elicitation/complete' });
    expect(jsonOf(await client.callTool({ name: 'roots' }))).toEqual({ roots: [{ uri: 'file:///work', name: 'work' }] });
  });

  it('still sends sampling/roots to a client without the capability (the client answers -32601)', async () => {
    const { client } = await connectStdio(fixture({ name: 'nocap' }));
    for (const name of ['sample', 'roots']) {
      const r = await client.callTool({ name });
      expect(r.isError).toBe(true);
      expect(jsonOf(r).error.code).toBe(-32601);
    }
  });

  it('records the cancellation of slow with the request id and never answers it', async () => {
    const events = tempFile('events.jsonl');
    const { client } = await connectStdio(fixture({ name: 'cancel', events }));
    const ac = new AbortController();
    const call = client.callTool({ name: 'slow', arguments: { ms: 60_000 } }, undefined, { signal: ac.signal });
    const req = await waitForEvent(events, (e) => e.type === 'request' && e.params?.name === 'slow');
    ac.abort('test cancels');
    await expect(call).rejects.toThrow();
    const cancelled = await waitForEvent(events, (e) => e.method === 'notifications/cancelled');
    expect(cancelled).toMatchObject({ type: 'notification', params: { requestId: req.id, reason: 'test cancels' } });
    expect(await waitForEvent(events, (e) => e.type === 'aborted')).toMatchObject({ tool: 'slow', id: req.id });
    await client.callTool({ name: 'whoami' }); // a later round-trip: the fixture is alive ...
    expect(readEvents(events).some((e) => e.type === 'sent_response' && e.id === req.id)).toBe(false); // ... and silent
  });

  it('ignores a cancellation of request id 0 (SDK 1.32 quirk: `if (!requestId) return`)', async () => {
    const events = tempFile('events.jsonl');
    const peer = startRaw(fixture({ name: 'zero', events }));
    await peer.initialize(); // id 1
    for (const id of [0, 7]) {
      peer.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'slow', arguments: { ms: 60_000 } } });
    }
    for (const id of [0, 7]) peer.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id } });
    await waitForEvent(events, (e) => e.type === 'aborted' && e.id === 7);
    // Messages are handled in order, so the cancel of 0 was processed before that of 7.
    expect(readEvents(events).some((e) => e.type === 'aborted' && e.id === 0)).toBe(false);
  });

  it('cancel_own_sample cancels its sampling request after 100 ms (raw peer)', async () => {
    const peer = startRaw(fixture({ name: 'own' }));
    await peer.initialize({ protocolVersion: '2025-11-25', capabilities: { sampling: {} }, clientInfo: { name: 'raw', version: '0' } });
    peer.send({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'cancel_own_sample' } });
    const sampling = await peer.next((m) => m.method === 'sampling/createMessage');
    expect(sampling.id).toBe(0); // the SDK numbers a peer's own requests from 0
    const cancel = await peer.next((m) => m.method === 'notifications/cancelled');
    expect(cancel.params).toEqual({ requestId: sampling.id, reason: 'fixture cancelled its own sample' });
    expect((await peer.next((m) => m.id === 5 && !('method' in m))).result.content[0].text).toBe('cancelled');
  });

  it('cancel_own_sample through an SDK client (which ignores a cancel of id 0, so sample first)', async () => {
    const events = tempFile('events.jsonl');
    let calls = 0;
    let aborted = false;
    const { client } = await connectStdio(fixture({ name: 'own2', events }), {
      clientCapabilities: { sampling: {} },
      beforeConnect: (c) =>
        c.setRequestHandler(CreateMessageRequestSchema, (_req, extra) =>
          ++calls === 1
            ? Promise.resolve({ model: 'm', role: 'assistant' as const, content: { type: 'text' as const, text: 'first' } })
            : new Promise((_resolve, reject) => extra.signal.addEventListener('abort', () => ((aborted = true), reject(new Error('aborted'))))),
        ),
    });
    await client.callTool({ name: 'sample' }); // uses the fixture's request id 0
    expect(textOf(await client.callTool({ name: 'cancel_own_sample' }))).toBe('cancelled');
    await waitFor(() => aborted, { what: 'sampling handler aborted' });
    const ev = readEvents(events);
    const sent = ev.filter((e) => e.type === 'sent_request' && e.method === 'sampling/createMessage');
    const cancel = ev.find((e) => e.type === 'sent_notification' && e.method === 'notifications/cancelled');
    expect(sent.map((e) => e.id)).toEqual([0, 1]);
    expect(cancel.params).toEqual({ requestId: 1, reason: 'fixture cancelled its own sample' });
  });

  it('logs at four levels, honouring logging/setLevel', async () => {
    const events = tempFile('events.jsonl');
    const got: any[] = [];
    const { client } = await connectStdio(fixture({ name: 'log', events }), {
      beforeConnect: (c) => c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void got.push(n.params)),
    });
    expect(jsonOf(await client.callTool({ name: 'log' }))).toEqual(['debug', 'info', 'warning', 'error']);
    await client.setLoggingLevel('warning');
    expect(jsonOf(await client.callTool({ name: 'log' }))).toEqual(['warning', 'error']);
    await waitFor(() => got.length === 6, { what: 'six log messages' });
    expect(got[0]).toEqual({ level: 'debug', logger: 'fixture-logger', data: 'debug from log' });
    expect(readEvents(events).find((e) => e.method === 'logging/setLevel').params).toEqual({ level: 'warning' });
    expect(readEvents(events).find((e) => e.method === 'notifications/initialized')).toBeTruthy();
  });

  it('crash exits without answering; stdin EOF exits cleanly', async () => {
    const peer = startRaw(fixture({ name: 'crash' }));
    await peer.initialize();
    peer.send({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'crash', arguments: { code: 3 } } });
    expect((await peer.exited).code).toBe(3);
    const other = startRaw(fixture({ name: 'eof' }));
    await other.initialize();
    expect((await other.close()).code).toBe(0);
  });
});
