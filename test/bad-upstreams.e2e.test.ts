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

async function mux(extra: object = {}): Promise<{ peer: RawPeer; metrics: () => Promise<ReturnType<typeof scrape> extends Promise<infer T> ? T : never> }> {
  const config = await writeConfig({ mcpServers: { bad: bad(), good: fixture({ name: 'good' }) }, limits: { maxMessageBytes: 65536 }, ...extra });
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
  });

  it('never answering initialize: it fails after timeouts.startupMs, the host is answered, the good upstream serves', async () => {
    const config = await writeConfig({ mcpServers: { bad: bad({ neverInit: true }), good: fixture({ name: 'good' }) }, timeouts: { startupMs: 500 } });
    const peer = startRawMux(config);
    await peer.initialize();
    // On a loaded machine "good" may itself take longer than the 500 ms: it joins with list_changed.
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
