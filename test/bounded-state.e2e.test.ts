// State an upstream or a host could grow without bound (issue 18, item 7), driven past each cap
// through the real binary: the public-name index (an upstream listing ever-new names), task and
// elicitation ownership, and the URIs of one 2026-07-28 subscriptions/listen.

import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, ROOT, startRawMux, waitFor, writeConfig, type RawPeer } from './helpers/harness.js';

afterEach(closeAll);

const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');

/** The admin port a `stdio --admin-port 0` logged. */
const adminPort = (peer: RawPeer) => waitFor(() => /"port":(\d+)[^\n]*"msg":"admin listening"/.exec(peer.stderr())?.[1], { what: 'admin port' });

describe('the public-name index', () => {
  it('an upstream listing ever-new names across list_changed: a server keeps at most 10 000 names, the least recently listed go (said once), what it lists now still routes', async () => {
    const config = await writeConfig({ mcpServers: { bad: { command: process.execPath, args: [BAD, JSON.stringify({ tools: 1000 })] } } });
    const peer = startRawMux(config, { args: ['--admin-port', '0'] });
    await peer.initialize();
    const port = await adminPort(peer);
    const listed = async () => (await peer.request('tools/list', {}, 30_000)).result.tools.length as number;
    expect(await listed()).toBe(1001);
    // 11 renames of the 1000 tools: 12 001 names listed in all, each listing after a list_changed.
    for (let g = 1; g <= 11; g++) {
      expect((await peer.request('tools/call', { name: 'bad__misbehave', arguments: { mode: 'churn' } }, 30_000)).result.content[0].text).toBe(`generation ${g}`);
      await peer.next((m) => m.method === 'notifications/tools/list_changed', 10_000);
      expect(await listed()).toBe(1001);
    }
    const status = await (await fetch(`http://127.0.0.1:${port}/status`)).json();
    expect(status.upstreams.find((u: { name: string }) => u.name === 'bad').tools).toBe(10_000);
    // What the server lists now routes; its first names, long gone from its lists, are forgotten.
    expect((await peer.request('tools/call', { name: 'bad__misbehave', arguments: { mode: 'ok' } })).result.content[0].text).toBe('ok');
    expect((await peer.request('tools/call', { name: 'bad__tool_11_999', arguments: {} })).result).toBeDefined();
    expect((await peer.request('tools/call', { name: 'bad__tool_0', arguments: {} }, 30_000)).error).toMatchObject({ code: -32602, message: 'Unknown tool: bad__tool_0' });
    await waitFor(() => peer.stderr().includes('the least recently listed are forgotten'), { what: 'the cap said' });
    expect(peer.stderr().split('the least recently listed are forgotten').length - 1).toBe(1);
  }, 120_000);
});
