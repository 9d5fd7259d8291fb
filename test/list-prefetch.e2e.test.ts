// Issue 23, target 3: a shared upstream's tools and prompts are listed as soon as it is ready
// (Catalogue.prefetch), so a host's first list is answered from memory. One real `mcpmux serve`
// for the whole file, with upstreams that record every request they get:
//   fx     the fixture, announcing list changes: listed ahead, once;
//   own    the fixture with `sharing: "session"`: a host's own connection, never listed ahead;
//   flaky  a raw server whose first tools/list fails: the prefetch fails quietly, the host's list asks again;
//   pin    a pinned server whose one tool differs from its approved pin: held in the list read ahead too.

import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { fixture, looseSchema, readEvents, tempDir, tempFile, waitFor } from './helpers/harness.js';
import { resourceUri } from './fixtures/upstream-items.mjs';

/** A raw newline JSON-RPC server: its first tools/list answers an error, later ones one tool. Writes each method it gets to argv[2]. */
const FLAKY = `
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
const log = process.argv[2];
let lists = 0;
const out = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  appendFileSync(log, m.method + '\\n');
  const answer = (result) => out({ jsonrpc: '2.0', id: m.id, result });
  if (m.method === 'initialize') return answer({ protocolVersion: m.params.protocolVersion, capabilities: { tools: { listChanged: true } }, serverInfo: { name: 'flaky', version: '1' } });
  if (m.method === 'tools/list') return ++lists === 1 ? out({ jsonrpc: '2.0', id: m.id, error: { code: -32603, message: 'not warmed up yet' } }) : answer({ tools: [{ name: 'poke', inputSchema: { type: 'object' } }] });
  out({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'no such method' } });
});
process.stdin.on('end', () => process.exit(0));
`;

const ev = { fx: tempFile('fx.jsonl'), own: tempFile('own.jsonl'), pin: tempFile('pin.jsonl'), flaky: tempFile('flaky.log') };
let d: Daemon;
const hosts: Client[] = [];

/** Requests of `method` an upstream fixture recorded (events file). */
const asked = (file: string, method: string) => readEvents(file).filter((e) => e.type === 'request' && e.method === method).length;
/** tools/list requests flaky got (its log: one method a line). */
const flakyLists = () => readFileSync(ev.flaky, 'utf8').split('\n').filter((l) => l === 'tools/list').length;
const status = async () => ((await (await fetch(`${d.base}/status`)).json()) as any).upstreams as any[];
const logLines = () => d.stderr().split('\n').flatMap((l) => (l.startsWith('{') ? [JSON.parse(l)] : []));

async function host(): Promise<Client> {
  const c = new Client({ name: 'prefetch-test', version: '0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(d.url)));
  hosts.push(c);
  return c;
}

beforeAll(async () => {
  const dir = tempDir();
  const flaky = path.join(dir, 'flaky.mjs');
  writeFileSync(flaky, FLAKY);
  // `pin`'s tool_0 was approved with another definition: it is held (hidden, calls refused).
  const state = tempDir();
  const stale = { fields: { name: '0000000000000000', description: '0000000000000000' }, approvedAt: '2026-01-01T00:00:00.000Z' };
  writeFileSync(path.join(state, 'tool-pins.json'), JSON.stringify({ version: 1, servers: { pin: { tool_0: stale } } }));
  d = await startDaemon(
    {
      mcpServers: {
        fx: fixture({ name: 'fx', events: ev.fx }),
        own: { ...fixture({ name: 'own', events: ev.own }), sharing: 'session' },
        flaky: { command: process.execPath, args: [flaky, ev.flaky] },
        pin: { ...fixture({ name: 'pin', tools: 1, specialTools: false, events: ev.pin }), pinTools: true },
      },
      surface: { mode: 'all' },
      // The failed prefetch is said at debug, and only there.
      logLevel: 'debug',
    },
    { MCPMUX_STATE_DIR: state },
  );
  // Listed ahead: fx's and pin's tools and prompts are counted in /status with no host yet;
  // flaky's prefetch has failed (its debug line), so the host's list below asks it again.
  await waitFor(
    async () => {
      const ups = await status();
      const by = (n: string) => ups.find((u) => u.name === n);
      return by('fx')?.tools !== null && by('fx')?.prompts !== null && by('pin')?.tools !== null && by('pin')?.prompts !== null;
    },
    { what: 'fx and pin listed ahead of any host' },
  );
  await waitFor(() => logLines().some((l) => l.server === 'flaky' && /listing ahead of hosts failed/.test(l.msg)), { what: "flaky's failed prefetch said" });
}, 60_000);

afterAll(async () => {
  await Promise.allSettled(hosts.map((h) => h.close()));
  await stopAllDaemons();
});

describe('lists read ahead of hosts', () => {
  it('the first host list is served from what was listed ahead: each shared upstream was asked once, before any host', async () => {
    expect(asked(ev.fx, 'tools/list')).toBe(1);
    expect(asked(ev.fx, 'prompts/list')).toBe(1);
    // Resources are left to hosts.
    expect(asked(ev.fx, 'resources/list')).toBe(0);
    const c = await host();
    const names = (await c.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['fx__echo', 'own__echo', 'flaky__poke']));
    expect((await c.listPrompts()).prompts.map((p) => p.name)).toContain('fx__prompt_0');
    // No round trip for the host's lists.
    expect(asked(ev.fx, 'tools/list')).toBe(1);
    expect(asked(ev.fx, 'prompts/list')).toBe(1);
    expect(asked(ev.pin, 'tools/list')).toBe(1);
  });

  it("a session's own upstream is never listed ahead: only when its host asks", async () => {
    const c = await host();
    // A read goes straight to the session's own connection (its URI names it): no list is needed for it.
    const uri = `own+${resourceUri('own', 0)}`;
    expect((await c.readResource({ uri })).contents[0]).toMatchObject({ uri });
    const mine = readEvents(ev.own);
    const at = mine.findIndex((e) => e.type === 'request' && e.method === 'resources/read');
    const pid = mine[at].pid;
    // Everything this connection was asked before the read (requests arrive in the order they
    // were sent, and a prefetch is sent the moment it is ready): its handshake and nothing else.
    expect(mine.slice(0, at).filter((e) => e.pid === pid && e.type === 'request').map((e) => e.method)).toEqual(['initialize']);
    expect((await c.listTools()).tools.map((t) => t.name)).toContain('own__echo');
    expect(readEvents(ev.own).filter((e) => e.pid === pid && e.type === 'request' && e.method === 'tools/list')).toHaveLength(1);
  });

  it('a failed prefetch leaves the upstream ready and says nothing above debug; the host list asks again and gets it', async () => {
    const flaky = (await status()).find((u) => u.name === 'flaky');
    expect(flaky).toMatchObject({ state: 'ready', restarts: 0 });
    const said = logLines().filter((l) => l.server === 'flaky' && /list/.test(l.msg));
    expect(said.length).toBeGreaterThan(0);
    for (const l of said) expect(l.level).toBeLessThanOrEqual(20);
    // The first test's host list asked flaky again (its prefetch had failed) and got its tool.
    expect(flakyLists()).toBe(2);
    const c = await host();
    expect((await c.listTools()).tools.map((t) => t.name)).toContain('flaky__poke');
    expect(flakyLists()).toBe(2);
  });

  it('a held tool is hidden from the list read ahead and refused when called, as on demand', async () => {
    const c = await host();
    const names = (await c.listTools()).tools.map((t) => t.name);
    expect(names.filter((n) => n.startsWith('pin__'))).toEqual([]);
    const r = await c.request({ method: 'tools/call', params: { name: 'pin__tool_0', arguments: {} } }, looseSchema).catch((e: { code: number }) => e);
    expect(r).toMatchObject({ code: -31006 });
    expect(logLines().filter((l) => l.server === 'pin' && l.tool === 'tool_0' && l.held === true)).toHaveLength(1);
    expect(asked(ev.pin, 'tools/call')).toBe(0);
  });

  it('list_changed from an upstream still refreshes what was listed ahead', async () => {
    const c = await host();
    const added = (await c.callTool({ name: 'fx__add_tool', arguments: {} })).content as { text: string }[];
    const name = `fx__${added[0]!.text}`;
    await waitFor(async () => (await c.listTools()).tools.some((t) => t.name === name), { what: 'the added tool listed after list_changed' });
    expect(asked(ev.fx, 'tools/list')).toBe(2);
  });
});
