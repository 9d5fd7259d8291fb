// Reloading a running mcpmux (issue 12): SIGHUP and file edits, validated first, applied as a
// diff, with every host session kept and told only about the lists that changed.

import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { awaitJsonLine, closeAll, connectStdio, fixture, isAlive, MUX_BIN, ROOT, startRawMux, waitFor, writeConfig } from './helpers/harness.js';
import { scrape, total } from './helpers/prom.js';

afterEach(closeAll);
afterAll(stopAllDaemons);

const timeouts = { startupWaitMs: 10_000 };
/** A server with tools only: adding or removing it changes the tool list and no other. */
const toolsOnly = (name: string) => fixture({ name, capabilities: { prompts: false, resources: false } });
const status = async (d: Daemon) => (await fetch(`${d.base}/status`)).json() as Promise<any>;
const pidOf = async (d: Daemon, name: string): Promise<number | undefined> => (await status(d)).upstreams.find((u: any) => u.name === name && u.state === 'ready')?.pid;
const toolNames = async (c: Client) => (await c.listTools()).tools.map((t) => t.name);

/** A host whose list_changed notices are counted by kind. */
function counting(client: Client): Record<'tools' | 'prompts' | 'resources', number> {
  const seen = { tools: 0, prompts: 0, resources: 0 };
  client.fallbackNotificationHandler = async (n) => {
    const k = /^notifications\/(tools|prompts|resources)\/list_changed$/.exec(n.method)?.[1] as keyof typeof seen | undefined;
    if (k) seen[k]++;
  };
  return seen;
}

describe('reload', () => {
  it('serve: add by SIGHUP, remove, refuse an invalid file, pick up an edit without a signal; both sessions stay and hear only what changed', async () => {
    const file = await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) }, timeouts });
    const write = (cfg: object) => writeFileSync(file, JSON.stringify({ ...cfg, timeouts }, null, 2));
    const d = await startDaemon(file);

    const http = new Client({ name: 'http-host', version: '0' }, { capabilities: {} });
    const heardHttp = counting(http);
    await http.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    const stdio = await connectStdio({ command: process.execPath, args: [MUX_BIN, 'connect', d.url] });
    const heardStdio = counting(stdio.client);
    expect(await toolNames(http)).toContain('fx__echo');
    const fxPid = await pidOf(d, 'fx');
    expect(fxPid).toBeGreaterThan(0);

    // A call to fx stays in flight across both reloads below.
    const inFlight = http.callTool({ name: 'fx__slow', arguments: { ms: 3000 } }, undefined, { timeout: 30_000 }).catch((err: Error) => err);

    // Add a server (tools only) with SIGHUP.
    write({ mcpServers: { fx: fixture({ name: 'fx' }), extra: toolsOnly('extra') } });
    d.child.kill('SIGHUP');
    await waitFor(() => heardHttp.tools >= 1 && heardStdio.tools >= 1, { what: 'tools/list_changed at both hosts', timeoutMs: 15_000 });
    for (const c of [http, stdio.client]) {
      expect(await toolNames(c)).toContain('extra__echo');
      expect((await c.callTool({ name: 'extra__echo', arguments: { via: 'reload' } })).structuredContent).toEqual({ via: 'reload' });
    }
    // Only the tool list changed: no prompts or resources notices (they would have come in the same debounced batch).
    expect({ ...heardHttp, tools: 0 }).toEqual({ tools: 0, prompts: 0, resources: 0 });
    expect({ ...heardStdio, tools: 0 }).toEqual({ tools: 0, prompts: 0, resources: 0 });
    const extraPid = await waitFor(() => pidOf(d, 'extra'), { what: 'extra pid' });
    await waitFor(() => /"msg":"config reloaded"/.test(d.stderr()), { what: 'the reload logged' });

    // A call in flight to the server about to be removed fails naming it.
    const doomed = http.callTool({ name: 'extra__slow', arguments: { ms: 20_000 } }, undefined, { timeout: 30_000 }).then(
      () => 'answered',
      (err: Error) => err.message,
    );
    await waitFor(async () => (await status(d)).upstreams.find((u: any) => u.name === 'extra')?.inFlight === 1, { what: 'the doomed call in flight' });

    // Remove it: its process ends, its tools go, fx keeps its process and its call.
    const before = { ...heardHttp };
    write({ mcpServers: { fx: fixture({ name: 'fx' }) } });
    d.child.kill('SIGHUP');
    await waitFor(() => !isAlive(extraPid), { what: 'the removed server process gone', timeoutMs: 10_000 });
    expect(await doomed).toMatch(/server "extra" was removed from the config/);
    await waitFor(() => heardHttp.tools > before.tools && heardStdio.tools >= 2, { what: 'tools/list_changed after the removal' });
    for (const c of [http, stdio.client]) expect((await toolNames(c)).some((n) => n.startsWith('extra__'))).toBe(false);
    expect(await pidOf(d, 'fx')).toBe(fxPid);
    expect(((await inFlight) as any).content?.[0].text).toBe('slept 3000');

    // An invalid file is refused with its JSON path; the service and the status show it.
    write({ mcpServers: { fx: { command: 5 } } });
    d.child.kill('SIGHUP');
    await waitFor(() => /"msg":"config reload refused; the running config stays"/.test(d.stderr()), { what: 'the refusal logged' });
    expect(d.stderr()).toMatch(/\/mcpServers\/fx\/command/);
    const refused = await status(d);
    expect(refused.lastReload).toMatchObject({ result: 'refused', trigger: 'signal', error: expect.stringContaining('/mcpServers/fx/command') });
    expect(refused.upstreams.find((u: any) => u.name === 'fx').pid).toBe(fxPid);
    expect((await http.callTool({ name: 'fx__echo', arguments: { still: 'up' } })).structuredContent).toEqual({ still: 'up' });
    const m = (await scrape(`${d.base}/metrics`)).samples;
    expect(total(m, 'mcpmux_config_reloads_total', { result: 'refused' })).toBe(1);
    expect(total(m, 'mcpmux_config_reloads_total', { result: 'applied' })).toBe(2);

    // An edit without a signal is picked up (the file is watched): a policy change, applied in place.
    const heardBefore = { ...heardHttp };
    write({ mcpServers: { fx: fixture({ name: 'fx' }) }, policy: { tools: { deny: ['fx__echo'] } } });
    await waitFor(async () => !(await toolNames(http)).includes('fx__echo'), { what: 'the edit applied', intervalMs: 50 });
    await waitFor(() => heardHttp.tools > heardBefore.tools, { what: 'tools/list_changed for the policy edit' });
    expect(heardHttp.prompts).toBe(heardBefore.prompts);
    expect((await status(d)).lastReload).toMatchObject({ result: 'applied', trigger: 'file', updated: [], added: [], removed: [] });
    expect(await pidOf(d, 'fx')).toBe(fxPid);

    await http.close();
    await stdio.close();
    await d.stop();
  }, 90_000);

  it('a changed server restarts (new process); settings that need a restart are said so and the rest applies', async () => {
    const file = await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) }, timeouts });
    const d = await startDaemon(file);
    const first = await waitFor(() => pidOf(d, 'fx'), { what: 'fx pid' });
    writeFileSync(file, JSON.stringify({ mcpServers: { fx: fixture({ name: 'fx', tools: 4 }) }, timeouts, listen: { port: 1 } }));
    d.child.kill('SIGHUP');
    await waitFor(async () => (await status(d)).lastReload?.result === 'applied', { what: 'the reload applied', timeoutMs: 15_000 });
    expect((await status(d)).lastReload).toMatchObject({ restarted: ['fx'], needsRestart: ['listen.port'] });
    const second = await waitFor(() => pidOf(d, 'fx'), { what: 'the new fx pid' });
    expect(second).not.toBe(first);
    expect(isAlive(first!)).toBe(false);
    await waitFor(() => /apply only when mcpmux restarts/.test(d.stderr()), { what: 'the restart-only setting logged' });
    await d.stop();
  }, 60_000);

  it('stdio: SIGHUP adds a server to the running session, which hears tools/list_changed', async () => {
    const file = await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) }, timeouts });
    const peer = startRawMux(file);
    await peer.initialize();
    writeFileSync(file, JSON.stringify({ mcpServers: { fx: fixture({ name: 'fx' }), extra: toolsOnly('extra') }, timeouts }));
    peer.child.kill('SIGHUP');
    await peer.next((m) => m.method === 'notifications/tools/list_changed', 15_000);
    const tools = (await peer.request('tools/list')).result.tools.map((t: any) => t.name);
    expect(tools).toEqual(expect.arrayContaining(['fx__echo', 'extra__echo']));
    expect(peer.child.exitCode).toBeNull();
  }, 60_000);
});

describe('signals', () => {
  it('a drain that fails exits 1 (the real shutdown handler, in a process of its own)', async () => {
    const dist = (f: string) => JSON.stringify(path.join(ROOT, 'dist', f));
    const script = `
      import { onShutdownSignals } from ${dist('cli/runtime.js')};
      import { createLogger } from ${dist('observe/logger.js')};
      onShutdownSignals(createLogger('info'), async () => { throw new Error('a child would not stop'); });
      process.stderr.write(JSON.stringify({ msg: 'ready' }) + '\\n');
      setInterval(() => {}, 1000);
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await awaitJsonLine(child.stderr, exited, (j) => (j.msg === 'ready' ? true : undefined), { ms: 10_000, what: 'ready', log: () => err });
    child.kill('SIGTERM');
    expect(await exited).toBe(1);
    expect(err).toMatch(/"err":"a child would not stop","msg":"drain failed"/);
  });
});
