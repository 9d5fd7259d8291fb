// Acceptance tests of issue 3 (every protocol flow forwarded both ways), driving the BUILT
// binary (`bin/mcpmux.js stdio`) with the SDK Client or a raw JSON-RPC host, in front of SDK-based
// fixture upstreams (test/fixtures/upstream.mjs) and @modelcontextprotocol/server-everything.
// Run `npm run build` first.
import { afterEach, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CreateMessageRequestSchema,
  ElicitationCompleteNotificationSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  type ClientCapabilities,
} from '@modelcontextprotocol/sdk/types.js';
import {
  closeAll,
  everything,
  fixture,
  readEvents,
  startMux,
  startRawMux,
  tempFile,
  waitFor,
  waitForEvent,
  writeConfig,
  type ClientOptions,
  type Connected,
  type RawPeer,
} from './helpers/harness.js';

afterEach(closeAll);

// ---- local helpers ----------------------------------------------------------------------------

/** `mcpServers` entries: fixture(), everything() or plain objects with extra mcpmux keys. */
type Servers = Record<string, object>;
const config = (mcpServers: Servers, extra: object = {}) => ({ mcpServers, ...extra });

const textOf = (r: any) => r.content[0].text as string;
const jsonOf = (r: any) => JSON.parse(textOf(r));
const allText = (r: any) => (r.content as any[]).map((c) => c.text ?? '').join('\n');

/** Fixture upstreams alpha and beta (or `names`), each with its own events file. */
function withEvents(names: string[] = ['alpha', 'beta']) {
  const events: Record<string, string> = {};
  const servers: Servers = {};
  for (const n of names) {
    events[n] = tempFile(`${n}.jsonl`);
    servers[n] = fixture({ name: n, events: events[n] });
  }
  return { events, servers };
}
const requestsOf = (file: string, method: string) => readEvents(file).filter((e) => e.type === 'request' && e.method === method);
const slowRequest = (file: string) => waitForEvent(file, (e) => e.type === 'request' && e.params?.name === 'slow');
const cancellationsIn = (file: string) => readEvents(file).filter((e) => e.method === 'notifications/cancelled');

const ROOTS = [{ uri: 'file:///work/project', name: 'project' }];
const HOST_CAPS: ClientCapabilities = { sampling: {}, elicitation: { form: {}, url: {} }, roots: { listChanged: true } };

/**
 * An SDK host that declares sampling, elicitation (form and url) and roots and answers them,
 * recording what it was asked. `elicitAction` decides form-mode answers.
 */
function answeringHost(elicitAction: 'accept' | 'decline' = 'accept') {
  const seen = { sampling: [] as any[], elicitations: [] as any[], completes: [] as string[], roots: 0, logs: [] as any[] };
  const options: ClientOptions = {
    clientCapabilities: HOST_CAPS,
    beforeConnect(c) {
      c.setRequestHandler(CreateMessageRequestSchema, async (req) => {
        seen.sampling.push(req.params);
        const prompt = (req.params.messages[0]?.content as any)?.text;
        return { model: 'host-model', role: 'assistant' as const, content: { type: 'text' as const, text: `maxTokens=${req.params.maxTokens} prompt=${prompt}` } };
      });
      c.setRequestHandler(ElicitRequestSchema, async (req) => {
        seen.elicitations.push(req.params);
        if (req.params.mode === 'url') return { action: 'accept' as const };
        return elicitAction === 'accept' ? { action: 'accept' as const, content: { name: 'Ada', confirm: true } } : { action: 'decline' as const };
      });
      c.setRequestHandler(ListRootsRequestSchema, async () => ((seen.roots++), { roots: ROOTS }));
      c.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => void seen.completes.push(n.params.elicitationId));
      c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void seen.logs.push(n.params));
    },
  };
  return { seen, options };
}

/**
 * Works around an SDK client race (seen without mcpmux too): notification handlers run on a
 * microtask but responses are handled at once, and a response drops its request's progress
 * handler. So when the last notifications/progress and the response arrive in one stdout chunk,
 * `onprogress` never sees that progress. Delaying responses by a macrotask keeps the wire order.
 */
function responsesAfterNotifications(peer: Connected): void {
  const t = peer.transport;
  const deliver = t.onmessage!;
  t.onmessage = (m: any) => ('method' in m ? deliver(m) : void setImmediate(() => deliver(m)));
}

/** A raw JSON-RPC host on a fresh mcpmux, initialized as 2025-11-25 with `capabilities`. */
async function rawHost(cfg: object, capabilities: object = {}): Promise<{ peer: RawPeer; init: any }> {
  const peer = startRawMux(await writeConfig(cfg));
  const init = await peer.initialize({ protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 'raw-host', version: '0.0.0' } });
  return { peer, init };
}

/** Polls tools/list until `name` is listed (server-everything registers some tools after initialize). */
async function waitForTool(client: Client, name: string): Promise<void> {
  await waitFor(async () => (await client.listTools()).tools.some((t) => t.name === name), { timeoutMs: 10_000, intervalMs: 100, what: `tool ${name}` });
}

// ---- cancellation -------------------------------------------------------------------------------

describe('flows: cancellation', () => {
  it('a host cancel of a slow tool reaches the owning fixture with ITS request id while its call runs; the other upstream sees none', async () => {
    const { events, servers } = withEvents();
    const { client } = await startMux(config(servers));
    // Both upstreams have a slow call in flight (typically under the same upstream-side id); only alpha's is cancelled.
    const ac = new AbortController();
    const alphaCall = client.callTool({ name: 'alpha__slow', arguments: { ms: 60_000 } }, undefined, { signal: ac.signal, timeout: 120_000 });
    client.callTool({ name: 'beta__slow', arguments: { ms: 60_000 } }, undefined, { timeout: 120_000 }).catch(() => {});
    const [alphaReq] = await Promise.all([slowRequest(events.alpha!), slowRequest(events.beta!)]);

    ac.abort('host cancels');
    await expect(alphaCall).rejects.toThrow();
    // Forwarded at once, not when the 60 s call ends: the fixture aborts the call it is running.
    const cancel = await waitForEvent(events.alpha!, (e) => e.type === 'notification' && e.method === 'notifications/cancelled');
    expect(cancel.params.requestId).toBe(alphaReq.id);
    await waitForEvent(events.alpha!, (e) => e.type === 'aborted' && e.id === alphaReq.id);
    expect(readEvents(events.alpha!).some((e) => e.type === 'sent_response' && e.id === alphaReq.id)).toBe(false);

    expect(jsonOf(await client.callTool({ name: 'beta__whoami' }))).toMatchObject({ name: 'beta' }); // a round-trip after the cancel
    expect(cancellationsIn(events.beta!)).toEqual([]);
    expect(readEvents(events.beta!).some((e) => e.type === 'aborted')).toBe(false);
  });

  it('a raw host cancelling its string-id request: the fixture gets its own id, and mcpmux sends the host no response for it', async () => {
    const { events, servers } = withEvents(['alpha']);
    const { peer } = await rawHost(config(servers));
    peer.send({ jsonrpc: '2.0', id: 'host-req-1', method: 'tools/call', params: { name: 'alpha__slow', arguments: { ms: 60_000 } } });
    const req = await slowRequest(events.alpha!);
    peer.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'host-req-1', reason: 'raw cancel' } });
    const cancel = await waitForEvent(events.alpha!, (e) => e.type === 'notification' && e.method === 'notifications/cancelled');
    expect(cancel.params.requestId).toBe(req.id);
    expect((await peer.request('ping')).result).toEqual({});
    expect(peer.messages.some((m) => m.id === 'host-req-1')).toBe(false);
  });
});

// ---- progress -------------------------------------------------------------------------------------

describe('flows: progress', () => {
  it('three progress notifications reach the SDK host (onprogress), increasing, before the result', async () => {
    const mux = await startMux(config(withEvents(['alpha']).servers));
    responsesAfterNotifications(mux);
    const seen: { progress: number; total?: number }[] = [];
    const r = await mux.client.callTool({ name: 'alpha__progress', arguments: { steps: 3, delayMs: 10 } }, undefined, {
      onprogress: (p) => void seen.push({ progress: p.progress, total: p.total }),
    });
    expect(textOf(r)).toBe('done 3');
    expect(seen).toEqual([1, 2, 3].map((progress) => ({ progress, total: 3 })));
  });

  it('progress carries the host\'s own token (a raw host\'s string token), increasing, before the response', async () => {
    const { events, servers } = withEvents(['alpha']);
    const { peer } = await rawHost(config(servers));
    const token = 'host-token-\u03a9';
    peer.send({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'alpha__progress', arguments: { steps: 3, delayMs: 5 }, _meta: { progressToken: token } } });
    const res = await peer.next((m) => m.id === 9 && !('method' in m));
    expect(textOf(res.result)).toBe('done 3');
    const progress = peer.messages.filter((m) => m.method === 'notifications/progress');
    expect(progress.map((m) => m.params)).toEqual([1, 2, 3].map((k) => ({ progressToken: token, progress: k, total: 3, message: `step ${k}` })));
    expect(peer.messages.indexOf(progress[2])).toBeLessThan(peer.messages.indexOf(res));
    // The upstream saw a token of mcpmux's own, not the host's.
    const upstreamToken = requestsOf(events.alpha!, 'tools/call')[0].params._meta.progressToken;
    expect(upstreamToken).toBeDefined();
    expect(upstreamToken).not.toBe(token);
  });
});

// ---- server-initiated requests ----------------------------------------------------------------------

describe('flows: sampling, elicitation and roots answered by the host', () => {
  it('sampling/createMessage from a fixture tool is answered by the host\'s handler', async () => {
    const host = answeringHost();
    const { client } = await startMux(config(withEvents(['alpha', 'beta']).servers), host.options);
    expect(jsonOf(await client.callTool({ name: 'beta__sample', arguments: { text: 'hello', maxTokens: 7 } }))).toEqual({
      model: 'host-model',
      role: 'assistant',
      content: { type: 'text', text: 'maxTokens=7 prompt=hello' },
    });
    expect(host.seen.sampling).toHaveLength(1);
  });

  it.each([
    ['accept', { action: 'accept', content: { name: 'Ada', confirm: true } }],
    ['decline', { action: 'decline' }],
  ] as const)('form-mode elicitation answered %s by the host reaches the fixture', async (action, expected) => {
    const host = answeringHost(action);
    const { client } = await startMux(config(withEvents(['alpha']).servers), host.options);
    expect(jsonOf(await client.callTool({ name: 'alpha__elicit' }))).toEqual(expected);
    expect(host.seen.elicitations).toHaveLength(1);
    expect(host.seen.elicitations[0]).toMatchObject({ mode: 'form', message: 'alpha needs your name', requestedSchema: { required: ['name'] } });
  });

  it('url-mode elicitation is answered by the host and its completion notification carries the id the host saw', async () => {
    const host = answeringHost();
    const { client } = await startMux(config(withEvents(['alpha']).servers), host.options);
    const r = jsonOf(await client.callTool({ name: 'alpha__elicit_url' }));
    expect(r).toEqual({ action: 'accept', elicitationId: 'alpha-elicitation-1' });
    expect(host.seen.elicitations).toHaveLength(1);
    const asked = host.seen.elicitations[0];
    expect(asked).toMatchObject({ mode: 'url', url: 'https://example.com/alpha/elicit/alpha-elicitation-1' });
    expect(asked.elicitationId).toBeTypeOf('string');
    await waitFor(() => host.seen.completes.length > 0, { what: 'notifications/elicitation/complete at the host' });
    expect(host.seen.completes).toEqual([asked.elicitationId]);
  });

  it('roots/list from a fixture tool is answered by the host\'s handler', async () => {
    const host = answeringHost();
    const { client } = await startMux(config(withEvents(['alpha']).servers), host.options);
    expect(jsonOf(await client.callTool({ name: 'alpha__roots' }))).toEqual({ roots: ROOTS });
    expect(host.seen.roots).toBeGreaterThanOrEqual(1);
  });

  it.each([
    ['sample', 'sampling/createMessage'],
    ['elicit', 'elicitation/create'],
    ['roots', 'roots/list'],
  ])('a host without the capability for %s never receives %s; the fixture gets an error', async (tool, method) => {
    const { events, servers } = withEvents(['alpha']);
    const { peer } = await rawHost(config(servers), {});
    const res = await peer.request('tools/call', { name: `alpha__${tool}` });
    expect(res.result.isError, JSON.stringify(res)).toBe(true);
    expect(JSON.parse(textOf(res.result)).error.code).toBeTypeOf('number');
    expect(peer.messages.some((m) => m.method === method)).toBe(false);
    const sent = readEvents(events.alpha!).find((e) => e.type === 'sent_request' && e.method === method);
    expect(readEvents(events.alpha!).find((e) => e.type === 'response' && e.id === sent.id).error).toBeDefined();
  });

  it('an upstream cancelling its own sampling request reaches the host as notifications/cancelled with the HOST-side id; the late answer is dropped', async () => {
    const { events, servers } = withEvents(['alpha']);
    const { peer } = await rawHost(config(servers), { sampling: {} });
    const answer = (id: unknown) => peer.send({ jsonrpc: '2.0', id, result: { model: 'm', role: 'assistant', content: { type: 'text', text: 'late' } } });
    // A first, answered sample moves the fixture's own request ids on.
    peer.send({ jsonrpc: '2.0', id: 1001, method: 'tools/call', params: { name: 'alpha__sample' } });
    answer((await peer.next((m) => m.method === 'sampling/createMessage')).id);
    await peer.next((m) => m.id === 1001 && !('method' in m));

    peer.send({ jsonrpc: '2.0', id: 1002, method: 'tools/call', params: { name: 'alpha__cancel_own_sample' } });
    const sampling = await peer.next((m) => m.method === 'sampling/createMessage'); // not answered (slow host)
    const cancel = await peer.next((m) => m.method === 'notifications/cancelled', 3000);
    expect(cancel.params.requestId).toBe(sampling.id);
    expect(textOf((await peer.next((m) => m.id === 1002 && !('method' in m))).result)).toBe('cancelled');

    answer(sampling.id); // too late: mcpmux must not pass it on
    expect((await peer.request('tools/call', { name: 'alpha__whoami' })).result).toBeDefined();
    const fixtureCancel = readEvents(events.alpha!).find((e) => e.type === 'sent_notification' && e.method === 'notifications/cancelled');
    const responses = readEvents(events.alpha!).filter((e) => e.type === 'response' && e.id === fixtureCancel.params.requestId);
    expect(responses).toEqual([]);
  });
});

describe('flows: URL elicitation errors, roots changes and older hosts', () => {
  it('the -32042 URL-elicitation-required error passes through with data.elicitations', async () => {
    const { peer } = await rawHost(config(withEvents(['alpha']).servers), { elicitation: { form: {}, url: {} } });
    const res = await peer.request('tools/call', { name: 'alpha__url_required' });
    expect(res.error.code).toBe(-32042);
    const [e] = res.error.data.elicitations;
    expect(e).toMatchObject({ mode: 'url', message: 'authorize first', elicitationId: expect.any(String) });
    expect(e.url).toMatch(/^https:\/\/example\.com\/alpha\/auth\//);
  });

  it('the host\'s notifications/roots/list_changed reaches every upstream', async () => {
    const { events, servers } = withEvents();
    const { client } = await startMux(config(servers), answeringHost().options);
    await client.sendRootsListChanged();
    for (const s of ['alpha', 'beta']) {
      await waitForEvent(events[s]!, (e) => e.type === 'notification' && e.method === 'notifications/roots/list_changed');
    }
  });

  it('a host that declared form-only elicitation never receives a url-mode request; the fixture gets an error', async () => {
    const { events, servers } = withEvents(['alpha']);
    const { peer } = await rawHost(config(servers), { elicitation: {} });
    const res = await peer.request('tools/call', { name: 'alpha__elicit_url' });
    expect(res.result.isError, JSON.stringify(res)).toBe(true);
    expect(peer.messages.some((m) => m.method === 'elicitation/create')).toBe(false);
    const sent = readEvents(events.alpha!).find((e) => e.type === 'sent_request' && e.method === 'elicitation/create');
    expect(readEvents(events.alpha!).find((e) => e.type === 'response' && e.id === sent.id).error).toBeDefined();
  });

  it.each([
    ['2024-11-05', false],
    ['2025-03-26', false],
    ['2025-06-18', true],
    ['2025-11-25', true],
  ])('a %s host gets resource_link blocks: %s (else the link is turned into text or an embedded resource with the same URI)', async (version, kept) => {
    const peer = startRawMux(await writeConfig(config(withEvents(['alpha']).servers)));
    await peer.initialize({ protocolVersion: version, capabilities: {}, clientInfo: { name: 'old-host', version: '0' } });
    const uri = 'alpha+fixture://alpha/res/0';
    const tool = (await peer.request('tools/call', { name: 'alpha__links' })).result;
    const prompt = (await peer.request('prompts/get', { name: 'alpha__prompt_0', arguments: { topic: 't' } })).result;
    for (const blocks of [tool.content, prompt.messages.map((m: any) => m.content)]) {
      expect(blocks).toHaveLength(3);
      expect(blocks.some((b: any) => b.type === 'resource_link')).toBe(kept);
      // Whatever form the link takes, its URI is still there.
      expect(blocks.filter((b: any) => JSON.stringify(b).includes(uri)).length).toBeGreaterThanOrEqual(2);
    }
  });
});

// ---- logging --------------------------------------------------------------------------------------------

describe('flows: logging', () => {
  it('logging/setLevel warning: the host gets the fixture\'s warning and error, not info or debug, with logger "<server>/fixture-logger"', async () => {
    const host = answeringHost();
    const { events, servers } = withEvents();
    const { client } = await startMux(config(servers), host.options);
    await client.setLoggingLevel('warning');
    for (const s of ['alpha', 'beta']) await client.callTool({ name: `${s}__log` });
    await waitFor(() => host.seen.logs.filter((l) => l.level === 'error').length === 2, { what: 'two error messages' });
    const got = host.seen.logs.map((l) => `${l.logger} ${l.level} ${l.data}`).sort();
    expect(got).toEqual([
      'alpha/fixture-logger error error from alpha',
      'alpha/fixture-logger warning warning from alpha',
      'beta/fixture-logger error error from beta',
      'beta/fixture-logger warning warning from beta',
    ]);
    for (const s of ['alpha', 'beta']) expect(requestsOf(events[s]!, 'logging/setLevel').map((e) => e.params)).toEqual([{ level: 'warning' }]);
  });
});

// ---- timeouts -----------------------------------------------------------------------------------------------

describe('flows: timeouts', () => {
  it('a server timeoutMs of 500 on a 60 s slow call: the host has a timeout error and the fixture saw the cancellation while the call ran', async () => {
    const { events, servers } = withEvents(['alpha']);
    const { client } = await startMux(config({ alpha: { ...servers.alpha!, timeoutMs: 500 } }));
    // The fixture answers after 60 s, the SDK gives up after 30 s: an error before either is mcpmux's timeout.
    const err: any = await client.callTool({ name: 'alpha__slow', arguments: { ms: 60_000 } }, undefined, { timeout: 30_000 }).then(
      () => undefined,
      (e) => e,
    );
    expect(err, 'the call must fail').toBeDefined();
    expect(err.code).toBe(-32001);
    expect(err.message).toMatch(/500 ms/);
    const req = await slowRequest(events.alpha!);
    const cancel = await waitForEvent(events.alpha!, (e) => e.type === 'notification' && e.method === 'notifications/cancelled');
    expect(cancel.params.requestId).toBe(req.id);
    await waitForEvent(events.alpha!, (e) => e.type === 'aborted' && e.id === req.id);
  });
});

// ---- id and token isolation ----------------------------------------------------------------------------------

describe('flows: two upstreams with the same ids and progress tokens', () => {
  // A raw host, so that every progress token is visible (and the SDK's own progress race, see
  // responsesAfterNotifications, cannot blur the result).
  it('100 concurrent calls each (echo and progress) on alpha and beta: every response and every progress matches its request', async () => {
    const { events, servers } = withEvents();
    const { peer } = await rawHost(config(servers));
    const sent: { id: string; server: string; args?: object; steps?: number; token?: string }[] = [];
    for (let i = 0; i < 100; i++) {
      for (const server of ['alpha', 'beta']) {
        const id = `${server}-${i}`;
        if (i % 2 === 0) {
          // Echo calls carry a token too (they report no progress): upstream tokens are the
          // upstream's request ids, so both upstreams then surely see the same tokens, whatever
          // other requests (a list, a ping) shifted one upstream's numbering.
          const args = { server, i };
          sent.push({ id, server, args, token: `tok-${id}` });
          peer.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: `${server}__echo`, arguments: args, _meta: { progressToken: `tok-${id}` } } });
        } else {
          const steps = 2 + (i % 3);
          const token = `tok-${id}`;
          sent.push({ id, server, steps, token });
          peer.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: `${server}__progress`, arguments: { steps, delayMs: 1 }, _meta: { progressToken: token } } });
        }
      }
    }
    const responses = await Promise.all(sent.map((s) => peer.next((m) => m.id === s.id && !('method' in m), 20_000)));
    const progress = peer.messages.filter((m) => m.method === 'notifications/progress');
    sent.forEach((s, k) => {
      const res = responses[k];
      expect(res.error, `${s.id}: ${JSON.stringify(res.error)}`).toBeUndefined();
      if (s.args) {
        expect(res.result.structuredContent, s.id).toEqual(s.args);
        expect(progress.filter((m) => m.params.progressToken === s.token), s.id).toEqual([]);
        return;
      }
      expect(textOf(res.result), s.id).toBe(`done ${s.steps}`);
      const mine = progress.filter((m) => m.params.progressToken === s.token);
      expect(mine.map((m) => [m.params.progress, m.params.total]), s.id).toEqual(Array.from({ length: s.steps! }, (_, j) => [j + 1, s.steps]));
      expect(peer.messages.indexOf(mine.at(-1)), s.id).toBeLessThan(peer.messages.indexOf(res));
    });
    expect(progress.every((m) => sent.some((s) => s.token === m.params.progressToken))).toBe(true);
    // Meaningful only if the two upstreams really saw the same request ids and progress tokens.
    const seenBy = (file: string) => {
      const calls = requestsOf(file, 'tools/call');
      return { ids: new Set(calls.map((e) => e.id)), tokens: new Set(calls.map((e) => e.params._meta?.progressToken).filter((t) => t !== undefined)) };
    };
    const a = seenBy(events.alpha!);
    const b = seenBy(events.beta!);
    expect(a.ids.size).toBe(100);
    expect([...b.ids].filter((id) => a.ids.has(id)).length, 'premise: both upstreams saw some of the same ids').toBeGreaterThan(0);
    expect([...b.tokens].filter((t) => a.tokens.has(t)).length, 'premise: both upstreams saw some of the same tokens').toBeGreaterThan(0);
  });

  it('20 concurrent sampling requests from each upstream (both numbering theirs 0..19) answered out of order: each answer reaches the request it belongs to', async () => {
    const { events, servers } = withEvents();
    const { peer } = await rawHost(config(servers), { sampling: {} });
    const calls: { id: string; text: string }[] = [];
    for (let i = 0; i < 20; i++) {
      for (const server of ['alpha', 'beta']) {
        const call = { id: `${server}-s${i}`, text: `${server}-${i}` };
        calls.push(call);
        peer.send({ jsonrpc: '2.0', id: call.id, method: 'tools/call', params: { name: `${server}__sample`, arguments: { text: call.text } } });
      }
    }
    const asked = [];
    for (let k = 0; k < calls.length; k++) asked.push(await peer.next((m) => m.method === 'sampling/createMessage', 20_000));
    expect(new Set(asked.map((m) => m.id)).size).toBe(calls.length); // host-side ids are unique
    for (const m of asked.reverse()) {
      const text = `answer to ${m.params.messages[0].content.text}`;
      peer.send({ jsonrpc: '2.0', id: m.id, result: { model: 'm', role: 'assistant', content: { type: 'text', text } } });
    }
    for (const call of calls) {
      const res = await peer.next((m) => m.id === call.id && !('method' in m), 20_000);
      expect(jsonOf(res.result).content.text, call.id).toBe(`answer to ${call.text}`);
    }
    // Premise: the two fixtures really used the same ids for their own requests.
    const own = (f: string) => readEvents(f).filter((e) => e.type === 'sent_request').map((e) => e.id).sort((x, y) => x - y);
    expect(own(events.alpha!)).toEqual(own(events.beta!));
  });
});

// ---- tasks -----------------------------------------------------------------------------------------------------

describe('flows: server-initiated requests and the host handshake', () => {
  it('an upstream asking for roots while the host is still initializing gets an error; the host never sees the request early', async () => {
    const events = tempFile('roots-on-init.jsonl');
    const fast = fixture({ name: 'fast', rootsOnInit: true, events });
    // A second upstream that takes a second to start keeps mcpmux's initialize answer waiting.
    const slow = fixture({ name: 'slow' });
    const slowEntry = { command: 'sh', args: ['-c', `sleep 1; exec "$0" "$@"`, slow.command, ...slow.args] };
    const peer = startRawMux(await writeConfig(config({ fast, slow: slowEntry })));
    const init = await peer.initialize({ protocolVersion: '2025-11-25', capabilities: { roots: {} }, clientInfo: { name: 'raw-host', version: '0.0.0' } });
    const answered = await waitForEvent(events, (e: any) => e.type === 'roots_on_init');
    expect(answered.error?.message).toMatch(/not finished initializing|No initialized host session/);
    // Nothing but the initialize answer came before it; no roots/list reached the host at all.
    expect(peer.messages.indexOf(init)).toBe(0);
    expect(peer.messages.some((m) => m.method === 'roots/list')).toBe(false);
  });
});

describe('flows: tasks', () => {
  it('progress of a task-augmented call keeps the host token after the CreateTaskResult, until the task is terminal', async () => {
    const { peer, init } = await rawHost(config({ tk: fixture({ name: 'tk', tasks: true }) }));
    expect(init.result.capabilities.tasks?.requests?.tools?.call).toBeDefined();
    peer.send({ jsonrpc: '2.0', id: 't1', method: 'tools/call', params: { name: 'tk__progress', arguments: { steps: 3, delayMs: 5 }, task: { ttl: 60_000 }, _meta: { progressToken: 'host-tok' } } });
    const created = await peer.next((m) => m.id === 't1');
    expect(created.result.task).toMatchObject({ taskId: 'tk:task-1', status: 'working' });

    const status = await peer.next((m) => m.method === 'notifications/tasks/status', 10_000);
    expect(status.params).toMatchObject({ taskId: 'tk:task-1', status: 'completed' });
    // Every step arrived after the task was created, with the host's own token, increasing.
    const steps = peer.messages.filter((m) => m.method === 'notifications/progress');
    expect(steps.map((m) => [m.params.progressToken, m.params.progress])).toEqual([['host-tok', 1], ['host-tok', 2], ['host-tok', 3]]);
    expect(peer.messages.indexOf(steps[0])).toBeGreaterThan(peer.messages.indexOf(created));

    const result = await peer.request('tasks/result', { taskId: 'tk:task-1' });
    expect(result.result.content[0].text).toBe('done 3');
    expect(result.result._meta['io.modelcontextprotocol/related-task']).toEqual({ taskId: 'tk:task-1' });
  });

  it('a task-augmented tools/call of server-everything\'s simulate-research-query completes via tasks/get and tasks/result', async () => {
    const { peer, init } = await rawHost(config({ every: everything() }), { elicitation: {} });
    expect.soft(init.result.capabilities.tasks?.requests?.tools?.call, 'mcpmux announces task-augmented tools/call').toBeDefined();
    await waitFor(async () => (await peer.request('tools/list', {})).result?.tools?.some((t: any) => t.name === 'every__simulate-research-query'), {
      timeoutMs: 10_000,
      intervalMs: 100,
      what: 'every__simulate-research-query listed',
    });
    const created = await peer.request('tools/call', { name: 'every__simulate-research-query', arguments: { topic: 'multiplexing' }, task: { ttl: 60_000 } }, 10_000);
    expect(created.error, JSON.stringify(created.error)).toBeUndefined();
    const task = created.result.task;
    expect(task).toMatchObject({ taskId: expect.any(String), status: 'working' });

    const got = await peer.request('tasks/get', { taskId: task.taskId });
    expect(got.error, JSON.stringify(got.error)).toBeUndefined();
    expect(got.result).toMatchObject({ taskId: task.taskId });
    expect(['working', 'completed']).toContain(got.result.status);

    const result = await peer.request('tasks/result', { taskId: task.taskId }, 20_000);
    expect(result.error, JSON.stringify(result.error)).toBeUndefined();
    expect(allText(result.result)).toContain('Research Report: multiplexing');
    expect(result.result._meta?.['io.modelcontextprotocol/related-task']).toEqual({ taskId: task.taskId });
    expect((await peer.request('tasks/get', { taskId: task.taskId })).result.status).toBe('completed');
  });
});

// ---- server-everything behind mcpmux ------------------------------------------------------------------------------

describe('flows: server-everything behind mcpmux', () => {
  async function everyHost() {
    const host = answeringHost();
    const mux = await startMux(config({ every: everything() }), host.options);
    responsesAfterNotifications(mux);
    return { client: mux.client, seen: host.seen };
  }

  it('echo', async () => {
    const { client } = await everyHost();
    expect(textOf(await client.callTool({ name: 'every__echo', arguments: { message: 'through mcpmux' } }))).toBe('Echo: through mcpmux');
  });

  it('sampling (trigger-sampling-request) answered by the host', async () => {
    const { client, seen } = await everyHost();
    await waitForTool(client, 'every__trigger-sampling-request');
    const r = await client.callTool({ name: 'every__trigger-sampling-request', arguments: { prompt: 'hi there', maxTokens: 9 } });
    expect(allText(r)).toContain('host-model');
    expect(allText(r)).toContain('maxTokens=9 prompt=Resource trigger-sampling-request context: hi there');
    expect(seen.sampling).toHaveLength(1);
  });

  it('form elicitation (trigger-elicitation-request) accepted by the host', async () => {
    const { client, seen } = await everyHost();
    await waitForTool(client, 'every__trigger-elicitation-request');
    const r = await client.callTool({ name: 'every__trigger-elicitation-request' });
    expect(allText(r)).toContain('- Name: Ada');
    expect(seen.elicitations).toHaveLength(1);
  });

  it('url elicitation (trigger-url-elicitation) accepted by the host', async () => {
    const { client, seen } = await everyHost();
    await waitForTool(client, 'every__trigger-url-elicitation');
    const r = await client.callTool({ name: 'every__trigger-url-elicitation', arguments: { url: 'https://example.com/consent', elicitationId: 'ev-1' } });
    expect(allText(r)).toContain('User completed the URL elicitation flow');
    expect(seen.elicitations).toHaveLength(1);
    expect(seen.elicitations[0]).toMatchObject({ mode: 'url', url: 'https://example.com/consent' });
  });

  it('roots (get-roots-list) answered by the host', async () => {
    const { client, seen } = await everyHost();
    await waitForTool(client, 'every__get-roots-list');
    const r = await client.callTool({ name: 'every__get-roots-list' });
    expect(allText(r)).toContain('URI: file:///work/project');
    expect(seen.roots).toBeGreaterThanOrEqual(1);
  });

  it('long running operation progress reaches the host, increasing', async () => {
    const { client } = await everyHost();
    const seen: number[] = [];
    const r = await client.callTool({ name: 'every__trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 } }, undefined, {
      onprogress: (p) => void seen.push(p.progress),
    });
    expect(allText(r)).toContain('Steps: 3');
    expect(seen).toEqual([1, 2, 3]);
  });

  it('logging (toggle-simulated-logging) reaches the host with the logger prefixed by the server name', async () => {
    const { client, seen } = await everyHost();
    await client.setLoggingLevel('debug');
    await client.callTool({ name: 'every__toggle-simulated-logging' });
    const log = await waitFor(() => seen.logs.find((l) => String(l.data).includes('-level message') || String(l.data).includes('level-message')), {
      what: 'a simulated log message',
    });
    expect(log.logger).toMatch(/^every(\/|$)/);
    await client.callTool({ name: 'every__toggle-simulated-logging' });
  });
});
