// State an upstream or a host could grow without bound (issue 18, item 7), driven past each cap
// through the real binary: the public-name index (an upstream listing ever-new names), task and
// elicitation ownership, and the URIs of one 2026-07-28 subscriptions/listen.

import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, fixture, readEvents, ROOT, startRawMux, tempFile, waitFor, writeConfig, type RawPeer } from './helpers/harness.js';

afterEach(closeAll);

const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');

/** The admin port a `stdio --admin-port 0` logged. */
const adminPort = (peer: RawPeer) => waitFor(() => /"port":(\d+)[^\n]*"msg":"admin listening"/.exec(peer.stderr())?.[1], { what: 'admin port' });

describe('the public-name index', () => {
  it('an upstream listing ever-new names across list_changed: a server keeps at most 100 000 names, the least recently listed go (said once), what it lists now still routes', async () => {
    // Surface "all": the whole 10 001-tool list is counted (under the default "auto" a session
    // seeing more than 40 tools gets the search surface instead).
    const config = await writeConfig({
      mcpServers: { bad: { command: process.execPath, args: [BAD, JSON.stringify({ tools: 10_000 })] } },
      limits: { maxMessageBytes: 8 * 1024 * 1024 },
      surface: { mode: 'all' },
    });
    const peer = startRawMux(config, { args: ['--admin-port', '0'] });
    await peer.initialize();
    const port = await adminPort(peer);
    const listed = async () => (await peer.request('tools/list', {}, 60_000)).result.tools.length as number;
    expect(await listed()).toBe(10_001);
    // 10 renames of the 10 000 tools: 110 001 names listed in all, each listing after a list_changed.
    for (let g = 1; g <= 10; g++) {
      expect((await peer.request('tools/call', { name: 'bad__misbehave', arguments: { mode: 'churn' } }, 30_000)).result.content[0].text).toBe(`generation ${g}`);
      await peer.next((m) => m.method === 'notifications/tools/list_changed', 10_000);
      expect(await listed()).toBe(10_001);
    }
    const status = await (await fetch(`http://127.0.0.1:${port}/status`)).json();
    expect(status.upstreams.find((u: { name: string }) => u.name === 'bad').tools).toBe(100_000);
    // What the server lists now routes; its first names, long gone from its lists, are forgotten.
    expect((await peer.request('tools/call', { name: 'bad__misbehave', arguments: { mode: 'ok' } })).result.content[0].text).toBe('ok');
    expect((await peer.request('tools/call', { name: 'bad__tool_10_9999', arguments: {} })).result).toBeDefined();
    expect((await peer.request('tools/call', { name: 'bad__tool_0', arguments: {} }, 60_000)).error).toMatchObject({ code: -32602, message: 'Unknown tool: bad__tool_0' });
    await waitFor(() => peer.stderr().includes('the least recently listed are forgotten'), { what: 'the cap said' });
    expect(peer.stderr().split('the least recently listed are forgotten').length - 1).toBe(1);
  }, 180_000);
});

describe('task and elicitation ownership', () => {
  const host = async (servers: object, capabilities: object = {}) => {
    const peer = startRawMux(await writeConfig({ mcpServers: servers }));
    await peer.initialize({ protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 'raw-host', version: '0.0.0' } });
    return peer;
  };
  /** Sends every request at once and waits for all the answers. */
  const all = (peer: RawPeer, n: number, method: string, params: (i: number) => object) => {
    for (let i = 1; i <= n; i++) peer.send({ jsonrpc: '2.0', id: `b${i}`, method, params: params(i) });
    return Promise.all(Array.from({ length: n }, (_, i) => peer.next((m) => m.id === `b${i + 1}`, 60_000)));
  };

  it('a session owns at most 1 000 tasks: past that its oldest is forgotten (Unknown task), said once; the newest still answer', async () => {
    const peer = await host({ tk: fixture({ name: 'tk', tasks: true }) });
    const created = await all(peer, 1001, 'tools/call', (i) => ({ name: 'tk__echo', arguments: { i }, task: { ttl: 600_000 } }));
    expect(created.every((m) => typeof m.result?.task?.taskId === 'string')).toBe(true);
    const ids = created.map((m) => m.result.task.taskId as string);
    const first = ids[0]!;
    const last = ids[1000]!;
    expect((await peer.request('tasks/get', { taskId: first })).error).toMatchObject({ code: -32602, message: `Unknown task: ${first}` });
    expect((await peer.request('tasks/get', { taskId: ids[1]! })).result.taskId).toBe(ids[1]);
    expect((await peer.request('tasks/result', { taskId: last }, 10_000)).result.content[0].text).toContain('"i":1001');
    expect((await peer.request('tasks/list', {})).result.tasks).toHaveLength(1000);
    await waitFor(() => peer.stderr().includes('too many tasks owned at once; the oldest is forgotten'), { what: 'the cap said' });
    expect(peer.stderr().match(/"level":40[^\n]*too many tasks owned at once/g)).toHaveLength(1);
  }, 120_000);

  it('a task is forgotten once its ttl has passed (the upstream may have forgotten it too)', async () => {
    const peer = await host({ tk: fixture({ name: 'tk', tasks: true }) });
    const id = (await peer.request('tools/call', { name: 'tk__echo', arguments: {}, task: { ttl: 1 } })).result.task.taskId;
    // The fixture itself keeps its tasks: only mcpmux forgetting makes this "Unknown task".
    await waitFor(async () => (await peer.request('tasks/get', { taskId: id })).error?.message === `Unknown task: ${id}`, { what: 'the task forgotten' });
  }, 60_000);

  it('a session owns at most 1 000 URL elicitations: the oldest is forgotten, so its completion reaches nobody; the newest still reach their host', async () => {
    const peer = await host({ fx: fixture({ name: 'fx' }) }, { elicitation: { form: {}, url: {} } });
    const refused = await all(peer, 1001, 'tools/call', () => ({ name: 'fx__url_required' }));
    const ids = refused.map((m) => m.error.data.elicitations[0].elicitationId as string);
    expect(new Set(ids).size).toBe(1001);
    // The upstream completes the oldest, then the newest (its own ids: without "fx:").
    for (const id of [ids[0]!, ids[1000]!]) await peer.request('tools/call', { name: 'fx__url_required', arguments: { complete: id.slice('fx:'.length) } });
    const done = await peer.next((m) => m.method === 'notifications/elicitation/complete', 10_000);
    expect(done.params.elicitationId).toBe(ids[1000]);
    // Both came down one pipe in order: had the oldest been delivered, it would have come first.
    expect(peer.messages.filter((m) => m.method === 'notifications/elicitation/complete').map((m) => m.params.elicitationId)).toEqual([ids[1000]]);
  }, 120_000);
});

describe('subscriptions/listen (2026-07-28 hosts)', () => {
  const envelope = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' } };

  it('one listen may name at most 1 000 URIs: past that it is refused with -32602 before anything is subscribed; 1 000 are acknowledged', async () => {
    const events = tempFile('fx.jsonl');
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx', events }) } }));
    const uris = (n: number) => Array.from({ length: n }, (_, i) => `fx+fixture://fx/res/${i}`);
    const listen = (id: string, n: number) => peer.send({ jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { notifications: { resourceSubscriptions: uris(n) }, _meta: envelope } });
    const subscribes = () => readEvents(events).filter((e) => e.type === 'request' && e.method === 'resources/subscribe').length;

    listen('over', 1001);
    const refused = await peer.next((m) => m.id === 'over', 10_000);
    expect(refused.error).toMatchObject({ code: -32602, message: 'Invalid params: notifications.resourceSubscriptions has 1001 entries; at most 1000 per subscriptions/listen', data: { max: 1000 } });
    expect(subscribes()).toBe(0);

    listen('at', 1000);
    const ack = await peer.next((m) => m.method === 'notifications/subscriptions/acknowledged', 60_000);
    expect(ack.params.notifications.resourceSubscriptions).toHaveLength(1000);
    expect(subscribes()).toBe(1000);
  }, 120_000);
});
