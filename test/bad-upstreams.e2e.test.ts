// Upstreams that break the protocol, behind the real binary beside a good one: each kind of
// misbehaviour stays with that upstream, is logged once per kind (not once per message), is
// counted in /metrics, and the good upstream keeps serving throughout.

import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, fixture, ROOT, startRawMux, waitFor, writeConfig, type RawPeer } from './helpers/harness.js';
import { scrape, total } from './helpers/prom.js';

afterEach(closeAll);

const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');
const bad = (opts: object = {}) => ({ command: process.execPath, args: [BAD, JSON.stringify(opts)], restart: { maxRetries: 0, backoffMs: 10 } });

const MB = 1024 * 1024;

/** mcpmux with an admin port; `servers` replaces the default pair (bad first, then good). */
async function mux(
  extra: object = {},
  servers: object = { bad: bad(), good: fixture({ name: 'good' }) },
): Promise<{ peer: RawPeer; metrics: () => Promise<ReturnType<typeof scrape> extends Promise<infer T> ? T : never> }> {
  const config = await writeConfig({ mcpServers: servers, limits: { maxMessageBytes: 65536 }, ...extra });
  const peer = startRawMux(config, { args: ['--admin-port', '0'] });
  await peer.initialize({ protocolVersion: '2025-11-25', capabilities: { sampling: {} }, clientInfo: { name: 'host', version: '0' } });
  const port = await waitFor(() => /"port":(\d+)[^\n]*"msg":"admin listening"/.exec(peer.stderr())?.[1], { what: 'the admin port' });
  return { peer, metrics: () => scrape(`http://127.0.0.1:${port}/metrics`) };
}

const misbehave = (peer: RawPeer, mode: string, n: number) => peer.request('tools/call', { name: 'bad__misbehave', arguments: { mode, n } }, 20_000);
const goodStillServes = async (peer: RawPeer) => {
  const r = await peer.request('tools/call', { name: 'good__echo', arguments: { ok: 1 } });
  expect(r.result.structuredContent).toEqual({ ok: 1 });
};
const errors = (s: { samples: any[] }, kind: string) => total(s.samples, 'mcpmux_upstream_protocol_errors_total', { server: 'bad', kind });
const saidTimes = (peer: RawPeer, what: string) => peer.stderr().split('\n').filter((l) => l.includes(`"msg":"${what} (said once per kind`)).length;
const logged = (peer: RawPeer, msg: string) => peer.stderr().split('\n').filter((l) => l.includes(`"msg":"${msg}"`)).length;
const logText = (m: any, re: RegExp) => m.method === 'notifications/message' && typeof m.params?.data === 'string' && re.test(m.params.data);

/** Every tool name the host is shown, walking the pages if mcpmux pages them. */
async function listAll(peer: RawPeer): Promise<string[]> {
  const names: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 1000; page++) {
    const r = await peer.request('tools/list', cursor === undefined ? {} : { cursor }, 30_000);
    expect(r.error, JSON.stringify(r.error)).toBeUndefined();
    for (const t of r.result.tools) names.push(t.name);
    cursor = r.result.nextCursor;
    if (cursor === undefined) return names;
  }
  throw new Error('tools/list: more than 1000 pages');
}

describe('an upstream that breaks the protocol', () => {
  it.each([
    ['garbage on stdout', 'garbage', 500, 'a message that is not JSON'],
    ['a line over the size limit', 'huge', 200_000, 'a message over the size limit'],
    ['responses to ids never used', 'unknown-id', 300, 'a response to an id never used'],
  ])('%s: contained, logged once, counted; the good upstream serves', async (_what, mode, n, kind) => {
    const { peer, metrics } = await mux();
    const r = await misbehave(peer, mode, n);
    expect(r.result.content[0].text).toMatch(/sent$/);
    await misbehave(peer, mode, n);
    const expected = mode === 'huge' ? 2 : 2 * n;
    await waitFor(async () => errors(await metrics(), kind) === expected, { what: `${expected} counted` });
    expect(saidTimes(peer, kind)).toBe(1);
    await goodStillServes(peer);
  });

  it('a notification flood (10 000) reaches the host and leaves the good upstream serving', async () => {
    const { peer } = await mux();
    const r = await misbehave(peer, 'notify-flood', 10_000);
    expect(r.result.content[0].text).toBe('flood sent');
    await waitFor(() => peer.messages.filter((m) => m.method === 'notifications/message').length === 10_000, { what: 'every notification relayed', timeoutMs: 15_000 });
    await goodStillServes(peer);
  });

  it('a flood of server-initiated requests: at most 64 wait on the host, the rest get -31003 at once', async () => {
    const { peer } = await mux();
    // The host declares sampling and never answers: the requests that reach it stay pending.
    const r = await misbehave(peer, 'request-flood', 200);
    expect(JSON.parse(r.result.content[0].text)).toEqual({ refused: 136, held: 64 });
    expect(peer.messages.filter((m) => m.method === 'sampling/createMessage')).toHaveLength(64);
    await goodStillServes(peer);
  });

  it('exiting in the middle of a response fails that call with the reason, and the good upstream serves', async () => {
    const { peer } = await mux();
    const r = await misbehave(peer, 'exit-mid', 1);
    expect(r.error.code).toBe(-32000);
    expect(r.error.message).toMatch(/exited with code 3/);
    await goodStillServes(peer);
    // One loss, one line (restart.maxRetries 0: no restart to log a second one).
    await waitFor(() => logged(peer, 'upstream connection lost') > 0, { what: 'the loss logged' });
    expect(logged(peer, 'upstream connection lost')).toBe(1);
    expect(peer.stderr()).toMatch(/"how":"exited with code 3"[^\n]*"msg":"upstream connection lost"/);
  });

  it('a flood of log notifications with an invalid level (2 x 2 000): none reaches the host, logged once', async () => {
    const { peer } = await mux();
    for (let i = 0; i < 2; i++) {
      const r = await peer.request('tools/call', { name: 'bad__misbehave', arguments: { mode: 'notify-flood', n: 2000, level: 'loud' } }, 20_000);
      expect(r.result.content[0].text).toBe('flood sent');
    }
    // The call's answer comes after its notifications on the upstream's stdout: all were handled.
    await goodStillServes(peer);
    expect(peer.messages.filter((m) => m.method === 'notifications/message')).toHaveLength(0);
    await waitFor(() => logged(peer, 'log notification with an invalid level dropped') > 0, { what: 'the drop logged' });
    expect(logged(peer, 'log notification with an invalid level dropped')).toBe(1);
  });

  it('never answering initialize: it fails after timeouts.startupMs, the host is answered, the good upstream serves', async () => {
    // 3 s, not less: startupMs bounds every upstream's start, and on a loaded machine a shorter
    // one also failed "good" on every retry until it was given up.
    const config = await writeConfig({ mcpServers: { bad: bad({ neverInit: true }), good: fixture({ name: 'good' }) }, timeouts: { startupMs: 3000 } });
    const peer = startRawMux(config);
    await peer.initialize();
    // On a loaded machine "good" may still take longer than the host's wait: it joins with list_changed.
    const tools = await waitFor(
      async () => {
        const names: string[] = (await peer.request('tools/list')).result.tools.map((t: { name: string }) => t.name);
        return names.some((t) => t.startsWith('good__')) ? names : undefined;
      },
      { what: "good's tools listed", timeoutMs: 15_000 },
    );
    expect(tools.some((t: string) => t.startsWith('bad__'))).toBe(false);
    await goodStillServes(peer);
    await waitFor(() => peer.stderr().includes('"msg":"upstream failed"'), { what: 'the failure logged' });
  });
});

describe('a late answer to a request mcpmux gave up on', () => {
  /** Starts bad__misbehave {mode: "late"} under host id `hostId`; resolves with the upstream's id for it once it waits. */
  async function lateCall(peer: RawPeer, hostId: string): Promise<string> {
    peer.send({ jsonrpc: '2.0', id: hostId, method: 'tools/call', params: { name: 'bad__misbehave', arguments: { mode: 'late' } } });
    const waiting = await peer.next((m) => logText(m, /^late: waiting /), 10_000);
    return waiting.params.data.slice('late: waiting '.length);
  }

  /**
   * After the late answer was read: it was not counted (an answer to an id never used, counted
   * once here as a control, is the only protocol error), nothing was said about it, the upstream
   * still answers, and the good one serves.
   */
  async function droppedQuietly(peer: RawPeer, metrics: () => Promise<{ samples: any[] }>): Promise<void> {
    expect((await misbehave(peer, 'ok', 1)).result.content[0].text).toBe('ok');
    await goodStillServes(peer);
    await misbehave(peer, 'unknown-id', 1);
    await waitFor(async () => errors(await metrics(), 'a response to an id never used') === 1, { what: 'the control counted' });
    expect(total((await metrics()).samples, 'mcpmux_upstream_protocol_errors_total', { server: 'bad' })).toBe(1);
    expect(saidTimes(peer, 'a response to an id never used')).toBe(1);
    expect(peer.stderr().match(/said once per kind/g)).toHaveLength(1);
  }

  it('cancelled by the host: the upstream hears of it, its answer afterwards is dropped quietly (no response to the host, not counted), both upstreams serve', async () => {
    const { peer, metrics } = await mux();
    const upstreamId = await lateCall(peer, 'doomed');
    peer.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'doomed', reason: 'the host gave up' } });
    // The fixture answers only after notifications/cancelled for its id, then says so.
    await peer.next((m) => logText(m, new RegExp(`^late: answered ${upstreamId}$`)), 10_000);
    await droppedQuietly(peer, metrics);
    // Two round trips later: nothing ever came for the cancelled id.
    expect(peer.messages.flat().filter((m: any) => m.id === 'doomed')).toEqual([]);
    await waitFor(async () => total((await metrics()).samples, 'mcpmux_requests_total', { method: 'tools/call', server: 'bad', outcome: 'cancelled' }) === 1, {
      what: 'the call counted as cancelled',
    });
  });

  it("timed out (the server's timeoutMs): the host gets -32001, the upstream is told, its late answer is dropped quietly, both upstreams serve", async () => {
    // Long enough that its other answers (lists, the control calls) are not cut on a busy machine;
    // the late call waits for a cancellation, so only the timeout ends it.
    const { peer, metrics } = await mux({}, { bad: { ...bad(), timeoutMs: 3000 }, good: fixture({ name: 'good' }) });
    const upstreamId = await lateCall(peer, 'slow');
    const r = await peer.next((m) => m.id === 'slow' && !('method' in m), 10_000);
    expect(r.error.code).toBe(-32001);
    await peer.next((m) => logText(m, new RegExp(`^late: answered ${upstreamId}$`)), 10_000);
    await droppedQuietly(peer, metrics);
    expect(peer.messages.flat().filter((m: any) => m.id === 'slow')).toHaveLength(1);
  });
});

describe('a huge tools/list from an upstream', () => {
  it('20 000 tools in one ~6 MB page (under limits.maxMessageBytes): every one reaches the host, once, and both upstreams serve', async () => {
    // Surface "all": the whole 20 000-tool list is what is checked (under the default "auto" a
    // session seeing more than 40 tools gets the search surface instead).
    const { peer, metrics } = await mux({ limits: { maxMessageBytes: 8 * MB }, surface: { mode: 'all' } }, { bad: bad({ tools: 20_000, toolPad: 250 }), good: fixture({ name: 'good' }) });
    const names = await listAll(peer);
    const bads = names.filter((n) => n.startsWith('bad__'));
    expect(bads).toHaveLength(20_001);
    expect(new Set(bads).size).toBe(20_001);
    expect(bads).toContain('bad__misbehave');
    for (const i of [0, 9_999, 19_999]) expect(bads).toContain(`bad__tool_${i}`);
    expect(names.some((n) => n.startsWith('good__'))).toBe(true);
    expect(Math.max(...peer.lines.map((l) => l.length))).toBeGreaterThan(5 * MB);
    expect((await misbehave(peer, 'ok', 1)).result.content[0].text).toBe('ok');
    await goodStillServes(peer);
    expect(total((await metrics()).samples, 'mcpmux_upstream_protocol_errors_total', { server: 'bad' })).toBe(0);
  }, 60_000);

  /**
   * `servers` puts "bad" (its tools/list answer ~340 KB) beside "good" under a 64 KB limit. The
   * good tool is called first, before any list (its name is resolved by walking the lists), then
   * the tools are listed twice: 2 or 3 oversized answers (see below), said once, each counted.
   * Surface "all", so each host list is one walk of the upstream lists: under the default
   * "auto" the first list also walks them once more to weigh the session's view (4 answers).
   */
  async function oversizedList(servers: (b: object) => object): Promise<void> {
    const { peer, metrics } = await mux({ surface: { mode: 'all' } }, servers(bad({ tools: 2000, toolPad: 100 })));
    await goodStillServes(peer);
    for (let i = 0; i < 2; i++) {
      const names = await listAll(peer);
      expect(names.some((n) => n.startsWith('good__'))).toBe(true);
      expect(names.filter((n) => n.startsWith('bad__'))).toEqual([]);
    }
    // Each host list asks "bad" and meets its oversized answer: 2. The good call's name
    // resolution asks it too (3) unless good's page, read ahead of hosts when it became ready,
    // already named the tool: which one depends on timing, so either count is right.
    await waitFor(async () => errors(await metrics(), 'a message over the size limit') >= 2, { what: 'the two lists counted' });
    expect(saidTimes(peer, 'a message over the size limit')).toBe(1);
    await goodStillServes(peer);
    // The connection survives its oversized answers: still up, nothing else counted against it.
    const s = await metrics();
    const oversized = errors(s, 'a message over the size limit');
    expect([2, 3]).toContain(oversized);
    expect(total(s.samples, 'mcpmux_upstream_up', { server: 'bad' })).toBe(1);
    expect(total(s.samples, 'mcpmux_upstream_protocol_errors_total', { server: 'bad' })).toBe(oversized);
  }

  it('one over limits.maxMessageBytes (64 KB), configured after the good one: left out, logged once, counted; the good tools are listed and serve', async () => {
    await oversizedList((b) => ({ good: fixture({ name: 'good' }), bad: b }));
  });

  // A regression test: the first upstream's page used to be awaited without the skip the
  // others get, so a failing first server took the whole list (and name resolution) down.
  it('one over limits.maxMessageBytes (64 KB), configured before the good one: the same', async () => {
    await oversizedList((b) => ({ bad: b, good: fixture({ name: 'good' }) }));
  });
});
