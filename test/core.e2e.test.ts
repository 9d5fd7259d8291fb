// Acceptance tests of issue 2 (the aggregating core), driving the BUILT binary (`bin/mcpmux.js
// stdio`) with real peers: the SDK Client through the harness, raw JSON-RPC pipes, SDK-based
// fixture upstreams (test/fixtures/upstream.mjs) and @modelcontextprotocol/server-everything.
// Run `npm run build` first.
import { afterEach, describe, expect, it } from 'vitest';
import { ResourceUpdatedNotificationSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  closeAll,
  everything,
  fixture,
  looseSchema,
  readEvents,
  startMux,
  startRawMux,
  tempFile,
  waitFor,
  writeConfig,
  type RawPeer,
} from './helpers/harness.js';
import { generatedPrompt, generatedResource, generatedTemplate, generatedTool, resourceText } from './fixtures/upstream-items.mjs';

afterEach(closeAll);

// ---- local helpers ----------------------------------------------------------------------------

/** The fixture's special tools, in the order it lists them after the generated tool_<i>. */
const SPECIAL = [
  'echo', 'whoami', 'slow', 'progress', 'sample', 'elicit', 'elicit_url', 'url_required', 'roots', 'log',
  'cancel_own_sample', 'add_tool', 'links', 'nested', 'touch', 'fail', 'crash',
];
const LIST_KEY = { 'tools/list': 'tools', 'prompts/list': 'prompts', 'resources/list': 'resources', 'resources/templates/list': 'resourceTemplates' } as const;
type ListMethod = keyof typeof LIST_KEY;

/** `mcpServers` entries: fixture(), everything() or plain objects with extra mcpmux keys. */
type Servers = Record<string, object>;
const config = (mcpServers: Servers, extra: object = {}) => ({ mcpServers, ...extra });
/**
 * For tests that check the whole merged tools/list: surface "all". Under the default "auto", a
 * session seeing more than 40 tools (three fixtures; or two, once add_tool adds one) gets the
 * search surface (search_tools, call_tool) instead of the list (issue 20).
 */
const WHOLE_LIST = { surface: { mode: 'all' } };
/** Fixture servers keyed by name, each named after its key (so URIs say fixture://<key>/...). */
const fixtures = (...names: string[]): Servers => Object.fromEntries(names.map((n) => [n, fixture({ name: n })]));

const textOf = (r: any) => r.content[0].text as string;
const jsonOf = (r: any) => JSON.parse(textOf(r));

/** Awaits a promise that must reject and returns the error (for asserting code and message). */
async function failure(p: Promise<unknown>): Promise<{ code: number; message: string; data?: any }> {
  const err = await p.then(
    (v) => {
      throw new Error(`expected an error, got ${JSON.stringify(v)}`);
    },
    (e: any) => e,
  );
  return err;
}

/** Every page of a list through the SDK client with a passthrough schema (unknown keys kept). */
async function listPages(client: Client, method: ListMethod, maxPages = 200): Promise<any[][]> {
  const pages: any[][] = [];
  let cursor: string | undefined;
  do {
    const r: any = await client.request({ method, params: cursor ? { cursor } : {} }, looseSchema);
    pages.push(r[LIST_KEY[method]]);
    cursor = r.nextCursor;
    expect(pages.length).toBeLessThan(maxPages);
  } while (cursor);
  return pages;
}
const listAll = async (client: Client, method: ListMethod) => (await listPages(client, method)).flat();

/** A raw JSON-RPC host on a fresh mcpmux, initialized with `init` params (default 2025-11-25). */
async function rawMux(cfg: object, init?: object): Promise<{ peer: RawPeer; init: any }> {
  const peer = startRawMux(await writeConfig(cfg));
  return { peer, init: await peer.initialize(init) };
}
const initParams = (protocolVersion: string, capabilities: object = {}) => ({
  protocolVersion,
  capabilities,
  clientInfo: { name: 'raw-test', version: '0.0.0' },
});

/** `expected` with the public name (tools/prompts) or URI (resources/templates) swapped in. */
const renamed = (expected: Record<string, any>, key: string, value: string) => ({ ...expected, [key]: value });

// ---- catalogue and routing through the SDK client -------------------------------------------------

describe('core: one SDK client over two fixtures and server-everything', () => {
  it('lists, calls, reads and gets prompts across alpha, beta and server-everything', async () => {
    const { client } = await startMux(config({ ...fixtures('alpha', 'beta'), every: everything() }, WHOLE_LIST));

    const tools = (await client.listTools()).tools.map((t) => t.name);
    expect(tools).toEqual(expect.arrayContaining(['alpha__tool_0', 'alpha__echo', 'beta__tool_2', 'beta__whoami', 'every__echo', 'every__get-sum']));

    expect((await client.callTool({ name: 'alpha__echo', arguments: { a: 1, b: ['x'] } })).structuredContent).toEqual({ a: 1, b: ['x'] });
    expect(jsonOf(await client.callTool({ name: 'beta__whoami' }))).toMatchObject({ name: 'beta' });
    expect(textOf(await client.callTool({ name: 'every__echo', arguments: { message: 'hi' } }))).toBe('Echo: hi');
    expect(textOf(await client.callTool({ name: 'every__get-sum', arguments: { a: 2, b: 3 } }))).toContain('5');

    const read = await client.readResource({ uri: 'beta+fixture://beta/res/1' });
    expect(read.contents).toEqual([{ uri: 'beta+fixture://beta/res/1', mimeType: 'text/plain', text: resourceText('fixture://beta/res/1') }]);
    const everyResource = (await listAll(client, 'resources/list')).find((r) => r.uri.startsWith('every+'));
    expect(everyResource, 'server-everything resources are listed as every+<uri>').toBeDefined();
    expect((await client.readResource({ uri: everyResource.uri })).contents[0]!.uri).toBe(everyResource.uri);

    const prompts = (await client.listPrompts()).prompts.map((p) => p.name);
    expect(prompts).toEqual(expect.arrayContaining(['alpha__prompt_0', 'beta__prompt_1', 'every__simple-prompt']));
    expect((await client.getPrompt({ name: 'alpha__prompt_1', arguments: { topic: 'cats' } })).messages[0]!.content).toEqual({
      type: 'text',
      text: 'prompt 1 of alpha about cats',
    });
    expect((await client.getPrompt({ name: 'every__simple-prompt' })).messages.length).toBeGreaterThan(0);
  });

  it.each([
    ['tools/list', 'name', (i: number) => generatedTool('alpha', i), (i: number) => `alpha__tool_${i}`],
    ['prompts/list', 'name', (i: number) => generatedPrompt('alpha', i), (i: number) => `alpha__prompt_${i}`],
    ['resources/list', 'uri', (i: number) => generatedResource('alpha', i), (i: number) => `alpha+fixture://alpha/res/${i}`],
    ['resources/templates/list', 'uriTemplate', (i: number) => generatedTemplate('alpha', i), (i: number) => `alpha+fixture://alpha/tpl/${i}/{id}`],
  ] as const)('%s keeps every field (title, icons, annotations, outputSchema, _meta, x-fixture) and only renames %s', async (method, key, item, shown) => {
    const { client } = await startMux(config({ alpha: fixture({ name: 'alpha', tools: 3, prompts: 3, resources: 3, templates: 3 }) }));
    const items = await listAll(client, method);
    for (const i of [0, 1, 2]) {
      const got = items.find((x) => x[key] === shown(i));
      expect(got).toEqual(renamed(item(i), key, shown(i)));
      expect(got['x-fixture']).toEqual({ n: i });
    }
  });
});

// ---- pagination -------------------------------------------------------------------------------------

describe('core: merged pagination', () => {
  it('tools/list merges 250 tools paged 7 per page (plus a second upstream), each exactly once, one upstream page per host page', async () => {
    const events = tempFile('alpha.jsonl');
    const { client } = await startMux(
      config({ alpha: fixture({ name: 'alpha', tools: 250, pageSize: 7, events }), beta: fixture({ name: 'beta', tools: 4 }) }, WHOLE_LIST),
    );
    const pages = await listPages(client, 'tools/list');
    const names = pages.flat().map((t) => t.name);
    const expected = [
      ...Array.from({ length: 250 }, (_, i) => `alpha__tool_${i}`),
      ...SPECIAL.map((s) => `alpha__${s}`),
      ...Array.from({ length: 4 }, (_, i) => `beta__tool_${i}`),
      ...SPECIAL.map((s) => `beta__${s}`),
    ];
    expect(names).toHaveLength(expected.length);
    expect(new Set(names).size).toBe(expected.length);
    expect(names).toEqual(expected);
    for (const page of pages) expect(page.filter((t) => t.name.startsWith('alpha__')).length).toBeLessThanOrEqual(7);
    // The upstream's own pages were walked, never read whole: at most one alpha page per host page.
    const upstreamPages = readEvents(events).filter((e) => e.type === 'request' && e.method === 'tools/list');
    expect(upstreamPages.length).toBeGreaterThanOrEqual(Math.ceil(266 / 7));
    expect(upstreamPages.length).toBeLessThanOrEqual(pages.length);
  });

  it('prompts, resources and templates are paged across two upstreams too, each item once', async () => {
    const paged = (name: string) => fixture({ name, prompts: 5, resources: 5, templates: 5, pageSize: 2 });
    const { client } = await startMux(config({ alpha: paged('alpha'), beta: paged('beta') }));
    for (const [method, key] of [['prompts/list', 'name'], ['resources/list', 'uri'], ['resources/templates/list', 'uriTemplate']] as const) {
      const items = (await listAll(client, method)).map((x) => x[key]);
      expect(items, method).toHaveLength(10);
      expect(new Set(items).size, method).toBe(10);
    }
  });

  it('two servers offering the same public name: the one earlier in the config keeps it, whoever offered it first', async () => {
    const events = { first: tempFile('first.jsonl'), second: tempFile('second.jsonl') };
    const servers = {
      first: { ...fixture({ name: 'first', tools: 0, prompts: 0, events: events.first }), prefix: '' },
      second: { ...fixture({ name: 'second', tools: 0, prompts: 0, events: events.second }), prefix: '' },
    };
    const { client } = await startMux(config(servers));
    // The special tools clash from the start: config order decides, not the order of answers.
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['whoami', 'whoami_2', 'add_tool', 'add_tool_2']));
    expect(JSON.parse(((await client.callTool({ name: 'whoami' })) as any).content[0].text).name).toBe('first');
    expect(JSON.parse(((await client.callTool({ name: 'whoami_2' })) as any).content[0].text).name).toBe('second');

    // "second" adds a tool first and shows it under the plain name...
    await client.callTool({ name: 'add_tool_2' });
    await waitFor(async () => (await client.listTools()).tools.some((t) => t.name === 'added_0'), { what: 'added_0 listed' });
    // ...then "first", earlier in the config, adds one of the same name and takes the name.
    const changed = new Promise((resolve) => client.setNotificationHandler(ToolListChangedNotificationSchema, resolve));
    await client.callTool({ name: 'add_tool' });
    await waitFor(async () => (await client.listTools()).tools.some((t) => t.name === 'added_0_2'), { what: 'added_0_2 listed' });
    await changed;
    const calls = (server: 'first' | 'second') => readEvents(events[server]).filter((e) => e.type === 'request' && e.method === 'tools/call' && e.params?.name === 'added_0').length;
    await client.callTool({ name: 'added_0' });
    expect([calls('first'), calls('second')]).toEqual([1, 0]);
    await client.callTool({ name: 'added_0_2' });
    expect([calls('first'), calls('second')]).toEqual([1, 1]);
  });

  describe('a bad cursor gets -32602', () => {
    const paged = () => config({ alpha: fixture({ name: 'alpha', tools: 20, prompts: 10, pageSize: 7 }) });
    async function cursorOf(client: Client, method: ListMethod): Promise<string> {
      const r: any = await client.request({ method, params: {} }, looseSchema);
      expect(r.nextCursor, `${method} has a second page`).toBeTypeOf('string');
      return r.nextCursor;
    }
    const listWith = (client: Client, cursor: string) => failure(client.request({ method: 'tools/list', params: { cursor } }, looseSchema));

    it('a forged cursor', async () => {
      const { client } = await startMux(paged());
      for (const forged of ['bogus', 'eyJrIjoidG9vbHMiLCJvIjo3fQ', '', '.']) {
        expect((await listWith(client, forged)).code, JSON.stringify(forged)).toBe(-32602);
      }
    });

    it('an edited cursor (one character changed, or the embedded upstream cursor moved on)', async () => {
      const { client } = await startMux(paged());
      const good = await cursorOf(client, 'tools/list');
      const mid = Math.floor(good.length / 3);
      const flipped = good.slice(0, mid) + (good[mid] === 'A' ? 'B' : 'A') + good.slice(mid + 1);
      expect((await listWith(client, flipped)).code).toBe(-32602);
      // A semantic edit that a cursor without integrity protection would accept: point the
      // embedded fixture cursor 7 items further (only when mcpmux's cursor is base64url JSON).
      const moved = moveEmbeddedCursor(good);
      if (moved) expect((await listWith(client, moved)).code).toBe(-32602);
      // The untouched cursor still works.
      expect(((await client.request({ method: 'tools/list', params: { cursor: good } }, looseSchema)) as any).tools.length).toBeGreaterThan(0);
    });

    it('a cursor from another list (prompts/list) used on tools/list', async () => {
      const { client } = await startMux(paged());
      const promptsCursor = await cursorOf(client, 'prompts/list');
      expect((await listWith(client, promptsCursor)).code).toBe(-32602);
    });

    it('a cursor of the wrong type, or empty, even once the first page is cached', async () => {
      const { client } = await startMux(paged());
      await cursorOf(client, 'tools/list'); // the first page is now memoised (the fixture says listChanged)
      for (const bad of [123, '', null, {}, false, [], 'x.y']) {
        const r = await failure(client.request({ method: 'tools/list', params: { cursor: bad as never } }, looseSchema));
        expect(r.code, JSON.stringify(bad)).toBe(-32602);
      }
    });

    it('a cursor from another mcpmux process (stale)', async () => {
      const first = await startMux(paged());
      const stale = await cursorOf(first.client, 'tools/list');
      await first.close();
      const { client } = await startMux(paged());
      expect((await listWith(client, stale)).code).toBe(-32602);
    });
  });
});

/**
 * If `cursor` is `<base64url JSON>.<mac>` with a fixture cursor ({k,o,n} base64url) somewhere in
 * the JSON, returns it with that fixture cursor's offset moved by 7 and the old mac; else undefined.
 */
function moveEmbeddedCursor(cursor: string): string | undefined {
  const [payload, mac] = cursor.split('.');
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  let changed = false;
  const edit = (v: unknown): unknown => {
    if (typeof v === 'string') {
      try {
        const inner = JSON.parse(Buffer.from(v, 'base64url').toString('utf8'));
        if (inner && Number.isInteger(inner.o)) {
          changed = true;
          return Buffer.from(JSON.stringify({ ...inner, o: inner.o + 7 })).toString('base64url');
        }
      } catch {
        /* not the fixture's cursor */
      }
      return v;
    }
    if (Array.isArray(v)) return v.map(edit);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, edit(x)]));
    return v;
  };
  const out = edit(decoded);
  return changed ? `${Buffer.from(JSON.stringify(out)).toString('base64url')}.${mac}` : undefined;
}

// ---- errors for unknown names --------------------------------------------------------------------------

describe('core: unknown names', () => {
  const callTool = (c: Client, name: string) => c.callTool({ name });
  const getPrompt = (c: Client, name: string) => c.getPrompt({ name });
  it.each([
    ['tool', 'alpha__no_such_tool', callTool],
    ['tool', 'nosuchserver__echo', callTool],
    ['tool', 'plainname', callTool],
    ['prompt', 'alpha__no_such_prompt', getPrompt],
    ['prompt', 'nosuchserver__prompt_0', getPrompt],
  ] as const)('an unknown %s (%s) gets -32602 naming it', async (_what, name, ask) => {
    const { client } = await startMux(config(fixtures('alpha')));
    const err = await failure(ask(client, name));
    expect(err.code).toBe(-32602);
    expect(err.message).toContain(name);
  });

  it.each([
    ['a URI the upstream does not have', 'alpha+fixture://alpha/res/99'],
    ['a URI of no known server', 'nosuchserver+fixture://alpha/res/0'],
    ['a URI without a server prefix', 'fixture://alpha/res/0'],
  ])('an unknown resource (%s) gets -32002', async (_what, uri) => {
    const { client } = await startMux(config(fixtures('alpha')));
    expect((await failure(client.readResource({ uri }))).code).toBe(-32002);
  });
});

// ---- the raw stdio wire ------------------------------------------------------------------------------------

describe('core: the stdio wire (raw JSON-RPC host)', () => {
  it('every stdout line is a JSON-RPC 2.0 message, and a garbage line gets -32700 with id null', async () => {
    const { peer } = await rawMux(config({ ...fixtures('alpha'), every: everything() }));
    peer.send('this is { not json');
    const parseError = await peer.next((m) => m.error?.code === -32700);
    expect(parseError).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32700 } });
    // Traffic of every kind afterwards: lists, calls with notifications, an error, logging.
    expect((await peer.request('tools/list', {})).result.tools.length).toBeGreaterThan(0);
    expect((await peer.request('tools/call', { name: 'alpha__links' })).result.content).toHaveLength(3);
    expect((await peer.request('logging/setLevel', { level: 'debug' })).result).toEqual({});
    expect((await peer.request('tools/call', { name: 'alpha__log' })).result).toBeDefined();
    expect((await peer.request('tools/call', { name: 'alpha__fail' })).error.code).toBe(-32603);
    expect((await peer.request('tools/call', { name: 'every__echo', arguments: { message: 'x' } })).result.content[0].text).toBe('Echo: x');
    expect((await peer.request('ping')).result).toEqual({});
    expect(peer.lines.length).toBeGreaterThan(8);
    for (const line of peer.lines) {
      const m = JSON.parse(line); // throws on a non-JSON line
      const msgs = Array.isArray(m) ? m : [m];
      for (const x of msgs) {
        expect(x.jsonrpc, line).toBe('2.0');
        expect('method' in x || 'result' in x || 'error' in x, line).toBe(true);
      }
    }
  });

  it('requests before initialize are refused and never reach an upstream; ping is answered', async () => {
    const events = tempFile('alpha.jsonl');
    const peer = startRawMux(await writeConfig(config({ alpha: fixture({ name: 'alpha', events }) })));
    const early = await peer.request('tools/call', { name: 'alpha__echo', arguments: {} });
    expect(early.error, JSON.stringify(early)).toBeDefined();
    expect(early.result).toBeUndefined();
    expect((await peer.request('tools/list', {})).error).toBeDefined();
    expect((await peer.initialize()).result.protocolVersion).toBe('2025-11-25');
    expect((await peer.request('tools/call', { name: 'alpha__echo', arguments: { ok: 1 } })).result.structuredContent).toEqual({ ok: 1 });
    const calls = readEvents(events).filter((e) => e.type === 'request' && e.method === 'tools/call');
    expect(calls).toHaveLength(1);
    expect(calls[0].params.arguments).toEqual({ ok: 1 });
  });

  it.each([
    ['2024-11-05', '2024-11-05'],
    ['2025-03-26', '2025-03-26'],
    ['2025-06-18', '2025-06-18'],
    ['2025-11-25', '2025-11-25'],
    ['1999-01-01 (unknown)', '2025-11-25'],
  ])('initialize with %s negotiates %s', async (offered, expected) => {
    const { peer, init } = await rawMux(config(fixtures('alpha')), initParams(offered.split(' ')[0]!));
    expect(init.result.protocolVersion).toBe(expected);
    expect(init.result.serverInfo.name).toBe('mcpmux');
    expect((await peer.request('ping')).result).toEqual({});
  });

  it('a batch from a 2025-03-26 host is answered as one batch', async () => {
    const { peer } = await rawMux(config(fixtures('alpha')), initParams('2025-03-26'));
    peer.send([
      { jsonrpc: '2.0', id: 'b1', method: 'tools/call', params: { name: 'alpha__echo', arguments: { n: 1 } } },
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'nothing-in-flight' } },
      { jsonrpc: '2.0', id: 'b2', method: 'ping' },
    ]);
    const batch = await peer.next((m) => Array.isArray(m));
    expect(batch).toHaveLength(2);
    const byId = Object.fromEntries(batch.map((r: any) => [r.id, r]));
    expect(byId.b1.result.structuredContent).toEqual({ n: 1 });
    expect(byId.b2.result).toEqual({});
  });

  it('a batch from a 2025-06-18 host is refused (an error, no results) and the session goes on', async () => {
    const events = tempFile('alpha.jsonl');
    const { peer } = await rawMux(config({ alpha: fixture({ name: 'alpha', events }) }), initParams('2025-06-18'));
    peer.send([
      { jsonrpc: '2.0', id: 'b1', method: 'tools/call', params: { name: 'alpha__echo', arguments: { n: 1 } } },
      { jsonrpc: '2.0', id: 'b2', method: 'ping' },
    ]);
    const answer = await peer.next((m) => Array.isArray(m) || 'error' in m || m.id === 'b1' || m.id === 'b2');
    for (const r of Array.isArray(answer) ? answer : [answer]) {
      expect(r.error?.code, JSON.stringify(answer)).toBe(-32600);
      expect(r.result).toBeUndefined();
    }
    expect((await peer.request('ping')).result).toEqual({});
    expect(peer.messages.flat().some((m: any) => (m.id === 'b1' || m.id === 'b2') && 'result' in m)).toBe(false);
    expect(readEvents(events).some((e) => e.method === 'tools/call')).toBe(false);
  });

  it('an oversized line (limit 4096 bytes) gets an error naming its size for that request id, and the session keeps working', async () => {
    const small = fixture({ name: 'alpha', tools: 0, prompts: 0, resources: 0, templates: 0 });
    const { peer } = await rawMux(config({ alpha: small }, { limits: { maxMessageBytes: 4096 } }));
    const big = { jsonrpc: '2.0', id: 77, method: 'tools/call', params: { name: 'alpha__echo', arguments: { blob: 'x'.repeat(10_000) } } };
    const size = Buffer.byteLength(JSON.stringify(big));
    peer.send(big);
    const res = await peer.next((m) => m.id === 77);
    expect(res.result).toBeUndefined();
    expect(res.error.message).toContain(String(size));
    expect((await peer.request('tools/call', { name: 'alpha__echo', arguments: { after: true } })).result.structuredContent).toEqual({ after: true });
    expect((await peer.request('ping')).result).toEqual({});
  });
});

// ---- the merged view ------------------------------------------------------------------------------------------

describe('core: capabilities and instructions', () => {
  it('capabilities are the union of the upstreams, with no prompts capability when no upstream has prompts', async () => {
    const { client } = await startMux(
      config({
        alpha: fixture({ name: 'alpha', capabilities: { prompts: false, resources: false } }),
        beta: fixture({ name: 'beta', capabilities: { prompts: false, logging: false, completions: false } }),
      }),
    );
    const caps = client.getServerCapabilities()!;
    expect(caps).not.toHaveProperty('prompts');
    expect(caps.tools).toBeDefined();
    expect(caps.resources).toMatchObject({ subscribe: true }); // only beta has resources
    expect(caps.logging).toBeDefined(); // only alpha has logging
    expect(caps.completions).toBeDefined(); // only alpha has completions
  });

  it('capability keys mcpmux does not know (experimental, newer ones) pass through, merged across upstreams', async () => {
    const peer = startRawMux(
      await writeConfig(
        config({
          alpha: fixture({ name: 'alpha', capabilities: { experimental: { 'com.example/a': { on: true } }, 'x-future': { level: 2 } } }),
          beta: fixture({ name: 'beta', capabilities: { experimental: { 'com.example/b': {} } } }),
        }),
      ),
    );
    const init = await peer.initialize();
    expect(init.result.capabilities.experimental).toEqual({ 'com.example/a': { on: true }, 'com.example/b': {} });
    expect(init.result.capabilities['x-future']).toEqual({ level: 2 });
  });

  it('a prompts capability appears as soon as one upstream has prompts', async () => {
    const { client } = await startMux(
      config({ alpha: fixture({ name: 'alpha', capabilities: { prompts: false } }), beta: fixture({ name: 'beta' }) }),
    );
    expect(client.getServerCapabilities()?.prompts).toBeDefined();
    expect((await client.listPrompts()).prompts.map((p) => p.name)).toEqual(['beta__prompt_0', 'beta__prompt_1']);
  });

  it('instructions are merged with a heading per server, in config order', async () => {
    const { client } = await startMux(
      config({
        alpha: fixture({ name: 'alpha', instructions: 'Use alpha for A.' }),
        quiet: fixture({ name: 'quiet' }),
        beta: fixture({ name: 'beta', instructions: 'Use beta for B.' }),
      }),
    );
    const text = client.getInstructions() ?? '';
    expect(text).toMatch(/^#+ *alpha\b[^\n]*\n+Use alpha for A\./m);
    expect(text).toMatch(/^#+ *beta\b[^\n]*\n+Use beta for B\./m);
    expect(text.indexOf('Use alpha')).toBeLessThan(text.indexOf('Use beta'));
  });
});

// ---- URI rewriting ------------------------------------------------------------------------------------------------

describe('core: resource URIs', () => {
  it('resource_link and embedded resources in tool results come back as server+uri and read back through mcpmux', async () => {
    const { client } = await startMux(config(fixtures('alpha', 'beta')));
    const r: any = await client.request({ method: 'tools/call', params: { name: 'beta__links' } }, looseSchema);
    const uri = 'beta+fixture://beta/res/0';
    expect(r.content[1]).toEqual({ type: 'resource_link', uri, name: 'res_0', title: 'Resource 0', mimeType: 'text/plain' });
    expect(r.content[2]).toEqual({ type: 'resource', resource: { uri, mimeType: 'text/plain', text: resourceText('fixture://beta/res/0') } });
    for (const shown of [r.content[1].uri, r.content[2].resource.uri]) {
      expect((await client.readResource({ uri: shown })).contents).toEqual([{ uri, mimeType: 'text/plain', text: resourceText('fixture://beta/res/0') }]);
    }
  });

  it('resource_link and embedded resources in prompt messages come back as server+uri and read back through mcpmux', async () => {
    const { client } = await startMux(config(fixtures('alpha', 'beta')));
    const p: any = await client.request({ method: 'prompts/get', params: { name: 'alpha__prompt_0', arguments: { topic: 't' } } }, looseSchema);
    const uri = 'alpha+fixture://alpha/res/0';
    expect(p.messages[1].content).toEqual({ type: 'resource', resource: { uri, mimeType: 'text/plain', text: resourceText('fixture://alpha/res/0') } });
    expect(p.messages[2].content).toEqual({ type: 'resource_link', uri, name: 'res_0', mimeType: 'text/plain' });
    expect((await client.readResource({ uri: p.messages[2].content.uri })).contents[0]).toMatchObject({ uri, text: resourceText('fixture://alpha/res/0') });
  });

  it('resources/templates/list shows server+uriTemplate, and a URI expanded from it reads back', async () => {
    const { client } = await startMux(config({ ...fixtures('alpha'), every: everything() }));
    const templates = (await listAll(client, 'resources/templates/list')).map((t) => t.uriTemplate);
    expect(templates).toEqual(expect.arrayContaining(['alpha+fixture://alpha/tpl/0/{id}', 'alpha+fixture://alpha/tpl/1/{id}']));
    expect(templates.filter((t) => t.startsWith('every+demo://'))).not.toHaveLength(0);
    expect(templates.every((t) => t.startsWith('alpha+') || t.startsWith('every+'))).toBe(true);
    const read = await client.readResource({ uri: 'alpha+fixture://alpha/tpl/1/abc' });
    expect(read.contents[0]).toEqual({ uri: 'alpha+fixture://alpha/tpl/1/abc', mimeType: 'text/plain', text: resourceText('fixture://alpha/tpl/1/abc') });
    const dyn = await client.readResource({ uri: 'every+demo://resource/dynamic/text/3' });
    expect(dyn.contents[0]!.uri).toBe('every+demo://resource/dynamic/text/3');
  });
});

describe('core: resource subscriptions', () => {
  it('resources/subscribe and unsubscribe reach the owner with its own URI; resources/updated comes back as server+uri, only while subscribed', async () => {
    const events = tempFile('alpha.jsonl');
    const updated: string[] = [];
    const { client } = await startMux(config({ alpha: fixture({ name: 'alpha', events }), beta: fixture({ name: 'beta' }) }), {
      beforeConnect: (c) => c.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri)),
    });
    const touch = (i: number) => client.callTool({ name: 'alpha__touch', arguments: { uri: `fixture://alpha/res/${i}` } });
    await client.subscribeResource({ uri: 'alpha+fixture://alpha/res/0' });
    await touch(1); // not subscribed: must not reach the host
    await touch(0);
    await waitFor(() => updated.length > 0, { what: 'resources/updated at the host' });
    expect(updated).toEqual(['alpha+fixture://alpha/res/0']);
    await client.unsubscribeResource({ uri: 'alpha+fixture://alpha/res/0' });
    await touch(0);
    await client.ping(); // a round-trip after the last touch
    expect(updated).toEqual(['alpha+fixture://alpha/res/0']);
    const uriOf = (method: string) => readEvents(events).filter((e) => e.type === 'request' && e.method === method).map((e) => e.params.uri);
    expect(uriOf('resources/subscribe')).toEqual(['fixture://alpha/res/0']);
    expect(uriOf('resources/unsubscribe')).toEqual(['fixture://alpha/res/0']);
  });
});

// ---- completion ----------------------------------------------------------------------------------------------------

describe('core: completion/complete', () => {
  const setup = async () => {
    const events = { alpha: tempFile('alpha.jsonl'), beta: tempFile('beta.jsonl') };
    const peer = await startMux(
      config({ alpha: fixture({ name: 'alpha', events: events.alpha }), beta: fixture({ name: 'beta', events: events.beta }), every: everything() }),
    );
    const completions = (file: string) => readEvents(file).filter((e) => e.type === 'request' && e.method === 'completion/complete');
    return { client: peer.client, events, completions };
  };

  it('a ref/prompt is routed to the prompt owner with its own prompt name', async () => {
    const { client, events, completions } = await setup();
    const r = await client.complete({ ref: { type: 'ref/prompt', name: 'beta__prompt_0' }, argument: { name: 'topic', value: 'x' } });
    expect(r.completion).toEqual({ values: ['a', 'b'], total: 2, hasMore: false });
    expect(completions(events.beta).map((e) => e.params.ref)).toEqual([{ type: 'ref/prompt', name: 'prompt_0' }]);
    expect(completions(events.alpha)).toEqual([]);
  });

  it('a ref/resource template is routed to the template owner with its own URI template', async () => {
    const { client, events, completions } = await setup();
    const r = await client.complete({ ref: { type: 'ref/resource', uri: 'beta+fixture://beta/tpl/0/{id}' }, argument: { name: 'id', value: '' } });
    expect(r.completion.values).toEqual(['a', 'b']);
    expect(completions(events.beta).map((e) => e.params.ref)).toEqual([{ type: 'ref/resource', uri: 'fixture://beta/tpl/0/{id}' }]);
    expect(completions(events.alpha)).toEqual([]);
  });

  it('a ref/resource template of server-everything completes through its own completer', async () => {
    const { client } = await setup();
    const r = await client.complete({ ref: { type: 'ref/resource', uri: 'every+demo://resource/dynamic/text/{resourceId}' }, argument: { name: 'resourceId', value: '7' } });
    expect(r.completion.values).toEqual(['7']);
  });
});

// ---- long names ----------------------------------------------------------------------------------------------------

describe('core: long names', () => {
  const LONG = 'a_very_long_server_name_here';
  const longCfg = () => config({ [LONG]: fixture({ name: 'longsrv' }) }, { namespace: { maxNameLength: 20 } });
  const byDescription = (tools: { name: string; description?: string }[], prefix: string) =>
    tools.find((t) => t.description?.startsWith(prefix))!.name;

  it('names over maxNameLength 20 are shortened deterministically, stay within 20 characters and still call', async () => {
    const first = await startMux(longCfg());
    const tools = (await first.client.listTools()).tools;
    const prompts = (await first.client.listPrompts()).prompts;
    const names = [...tools, ...prompts].map((t) => t.name);
    expect(names).toHaveLength(3 + SPECIAL.length + 2);
    for (const n of names) {
      expect(n.length, n).toBeLessThanOrEqual(20);
      expect(n, n).toMatch(/^[A-Za-z0-9_.-]+$/);
    }
    expect(new Set(tools.map((t) => t.name)).size).toBe(tools.length);

    const echo = byDescription(tools, 'Returns its arguments');
    expect((await first.client.callTool({ name: echo, arguments: { long: 'yes' } })).structuredContent).toEqual({ long: 'yes' });
    expect(jsonOf(await first.client.callTool({ name: byDescription(tools, 'Returns {name, pid}') }))).toMatchObject({ name: 'longsrv' });
    const prompt1 = prompts.find((p) => p.description === 'Generated prompt 1 of longsrv')!.name;
    expect((await first.client.getPrompt({ name: prompt1, arguments: { topic: 'z' } })).messages[0]!.content).toMatchObject({ text: 'prompt 1 of longsrv about z' });
    await first.close();

    // A second mcpmux process with the same config publishes exactly the same names.
    const second = await startMux(longCfg());
    expect((await second.client.listTools()).tools.map((t) => t.name)).toEqual(tools.map((t) => t.name));
    expect((await second.client.listPrompts()).prompts.map((p) => p.name)).toEqual(prompts.map((p) => p.name));
    expect((await second.client.callTool({ name: echo, arguments: { again: 1 } })).structuredContent).toEqual({ again: 1 });
  });
});

// ---- live changes and concurrency ---------------------------------------------------------------------------------

describe('core: list_changed, concurrency and failures', () => {
  it('notifications/tools/list_changed after add_tool reaches the host and the next list shows alpha__added_0', async () => {
    let changed = 0;
    const { client } = await startMux(config(fixtures('alpha', 'beta'), WHOLE_LIST), {
      beforeConnect: (c) => c.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++),
    });
    const before = (await client.listTools()).tools.map((t) => t.name); // fills any cache
    expect(before).not.toContain('alpha__added_0');
    expect(textOf(await client.callTool({ name: 'alpha__add_tool' }))).toBe('added_0');
    await waitFor(() => changed > 0, { what: 'tools/list_changed at the host' });
    const after = (await client.listTools()).tools.map((t) => t.name);
    expect(after).toContain('alpha__added_0');
    expect(after).toHaveLength(before.length + 1);
    expect(textOf(await client.callTool({ name: 'alpha__added_0' }))).toBe('added_0');
  });

  it('two upstreams asked at the same time (same upstream ids) never see each other\'s responses', async () => {
    const events = { alpha: tempFile('alpha.jsonl'), beta: tempFile('beta.jsonl') };
    const { client } = await startMux(
      config({ alpha: fixture({ name: 'alpha', events: events.alpha }), beta: fixture({ name: 'beta', events: events.beta }) }),
    );
    const calls = Array.from({ length: 60 }, (_, i) => {
      const server = i % 2 ? 'beta' : 'alpha';
      const args = { server, i, pad: 'p'.repeat(i) };
      return client.callTool({ name: `${server}__echo`, arguments: args }).then((r) => expect(r.structuredContent).toEqual(args));
    });
    const whoami = ['alpha', 'beta', 'alpha', 'beta'].map((s) =>
      client.callTool({ name: `${s}__whoami` }).then((r) => expect(jsonOf(r).name).toBe(s)),
    );
    await Promise.all([...calls, ...whoami]);
    // The test means most if both upstreams saw overlapping request ids.
    const ids = (f: string) => new Set(readEvents(f).filter((e) => e.type === 'request' && e.method === 'tools/call').map((e) => e.id));
    const a = ids(events.alpha);
    expect([...ids(events.beta)].filter((id) => a.has(id)).length, 'premise: both upstreams saw some of the same ids').toBeGreaterThan(0);
  });

  it('an upstream whose command does not exist does not stop the others; calling its tools gives a clear error', async () => {
    const { client } = await startMux(
      config({ ghost: { command: '/nonexistent/mcp-ghost-server', args: [], restart: { maxRetries: 0 } }, ...fixtures('alpha') }),
    );
    const tools = (await client.listTools()).tools.map((t) => t.name);
    expect(tools).toContain('alpha__echo');
    expect(tools.some((t) => t.startsWith('ghost__'))).toBe(false);
    expect((await client.callTool({ name: 'alpha__echo', arguments: { ok: 1 } })).structuredContent).toEqual({ ok: 1 });
    const err = await failure(client.callTool({ name: 'ghost__anything' }));
    expect(err.message).toContain('ghost');
    expect(err.message).toMatch(/not available|unavailable|failed|not running|could not start/i);
  });

  it('an upstream that crashes mid-call fails the host\'s call fast with a clear error; the other upstream keeps working', async () => {
    const { client } = await startMux(config(fixtures('alpha', 'beta')));
    // Fast: the error is mcpmux's (the crash), not the SDK's request timeout, which mcpmux would
    // reach first if it waited for its own.
    const err = await failure(client.callTool({ name: 'alpha__crash' }, undefined, { timeout: 15_000 }));
    expect(err.code, err.message).not.toBe(-32001); // not the SDK's own request timeout
    expect(err.message).toContain('alpha');
    expect(jsonOf(await client.callTool({ name: 'beta__whoami' }))).toMatchObject({ name: 'beta' });
  });

  it('closing stdin makes mcpmux exit 0 and leaves no upstream process behind', async () => {
    const { peer } = await rawMux(config({ ...fixtures('alpha', 'beta'), every: everything() }));
    const pids: number[] = [];
    for (const s of ['alpha', 'beta']) pids.push(JSON.parse((await peer.request('tools/call', { name: `${s}__whoami` })).result.content[0].text).pid);
    for (const pid of pids) expect(() => process.kill(pid, 0)).not.toThrow();
    expect(await peer.close(15_000)).toEqual({ code: 0, signal: null });
    for (const pid of pids) expect(() => process.kill(pid, 0), `pid ${pid} still alive`).toThrow();
  });
});

