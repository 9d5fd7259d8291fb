// The audit log through the real binary: one parseable line per request with the right
// outcome, arguments per mode, secrets nowhere, complete after SIGTERM, rotation on SIGUSR2,
// and a disk that refuses writes costing lines (counted) but never the daemon.

import { readFileSync, renameSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { closeAll, fixture, startRawMux, tempFile, waitFor, writeConfig } from './helpers/harness.js';
import { scrape, total } from './helpers/prom.js';

afterEach(closeAll);
afterAll(stopAllDaemons);

const SECRET = 'env-secret-7f3a9c1e55';

/** Every line of the audit file, each parsed (a line that is not JSON fails the test). */
function auditLines(file: string): any[] {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  expect(text === '' || text.endsWith('\n'), 'the file ends with a whole line').toBe(true);
  return text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));
}

async function httpHost(d: Daemon): Promise<Client> {
  const client = new Client({ name: 'audit-test', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(d.url)));
  return client;
}

describe('audit log: one line per request', () => {
  it('a scripted mix leaves exactly one line per request, each with its outcome; secrets appear nowhere', async () => {
    const path = tempFile('audit.jsonl');
    const peer = startRawMux(
      await writeConfig({
        mcpServers: {
          fx: { ...fixture({ name: 'fx' }), env: { API_KEY: '${AUDIT_SECRET}' } },
          // Long enough that its tools/list is not cut on a busy machine; the slow call takes 30 s.
          tmo: { ...fixture({ name: 'tmo' }), timeoutMs: 3000 },
        },
        policy: { tools: { deny: ['fx__whoami'] } },
        rateLimits: [{ server: 'fx', tool: 'tool_0', perMinute: 1, burst: 1 }],
        audit: { path, arguments: 'full', redact: ['password', 'nested.*.token'] },
      }),
      { env: { AUDIT_SECRET: SECRET } },
    );
    const init = await peer.initialize();
    expect(init.result.serverInfo.name).toBe('mcpmux');
    const args = { password: 'hunter2-pass-value', note: `the key is ${SECRET}`, nested: [{ token: 'tok-abc-123', keep: 'kept-1' }], keep: 'visible-value' };
    const expected: Record<number, { method: string; outcome: string; code?: number; name?: string }> = { 1: { method: 'initialize', outcome: 'ok' } };
    let id = 100;
    const send = async (name: string, a: object, outcome: string, code?: number) => {
      const r = await peer.request('tools/call', { name, arguments: a }, 10_000);
      expected[r.id] = { method: 'tools/call', outcome, name, ...(code !== undefined && { code }) };
      return r;
    };
    expect((await send('fx__echo', args, 'ok')).result.structuredContent).toEqual(args);
    expect((await send('fx__sample', {}, 'error')).result.isError).toBe(true); // a tool error: the host cannot sample
    expect((await send('fx__fail', {}, 'error', -32603)).error.code).toBe(-32603);
    expect((await send('fx__whoami', {}, 'denied', -31002)).error.code).toBe(-31002);
    expect((await send('fx__tool_0', {}, 'ok')).result.isError).toBeUndefined();
    expect((await send('fx__tool_0', {}, 'limited')).result._meta.retryAfterMs).toBeGreaterThan(0);
    expect((await send('tmo__slow', { ms: 30_000 }, 'timeout', -32001)).error.code).toBe(-32001);
    // Cancelled: no answer ever comes, but the line does.
    peer.send({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name: 'fx__slow', arguments: { ms: 30_000 } } });
    expected[id] = { method: 'tools/call', outcome: 'cancelled', name: 'fx__slow' };
    peer.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'test' } });
    const list = await peer.request('tools/list');
    expect(list.result.tools.length).toBeGreaterThan(0);
    expected[list.id] = { method: 'tools/list', outcome: 'ok' };
    expect((await send('fx__crash', {}, 'unavailable', -32000)).error.code).toBe(-32000);

    // ... and one more: fx__sample's own sampling request, refused on its way to this host.
    const count = Object.keys(expected).length + 1;
    await waitFor(() => auditLines(path).length === count, { what: 'an audit line for every request' });
    expect((await peer.close()).code).toBe(0);

    const all = auditLines(path);
    expect(all).toHaveLength(count);
    const [sampling, ...others] = [all.find((l) => l.direction === 'server-to-host'), ...all.filter((l) => l.direction === 'host-to-server')];
    expect(sampling).toMatchObject({ method: 'sampling/createMessage', server: 'fx', outcome: 'error', code: -32601 });
    const lines = others;
    expect(lines).toHaveLength(Object.keys(expected).length);
    for (const [rid, want] of Object.entries(expected)) {
      const mine = lines.filter((l) => l.id === Number(rid));
      expect(mine, `request ${rid}`).toHaveLength(1);
      expect(mine[0]).toMatchObject({ direction: 'host-to-server', client: 'anonymous', transport: 'stdio', ...want });
      if (want.code === undefined) expect(mine[0].code).toBeUndefined();
      expect(typeof mine[0].session).toBe('string');
      expect(Date.parse(mine[0].time)).toBeGreaterThan(0);
      expect(mine[0].durationMs).toBeGreaterThanOrEqual(0);
      expect(mine[0].bytesIn).toBeGreaterThan(0);
    }
    const echo = lines.find((l) => l.name === 'fx__echo');
    expect(echo).toMatchObject({ server: 'fx', upstreamName: 'echo' });
    expect(echo.bytesOut).toBeGreaterThan(100);
    expect(echo.arguments).toEqual({ ...args, password: '[REDACTED]', note: 'the key is [REDACTED]', nested: [{ token: '[REDACTED]', keep: 'kept-1' }] });
    expect(lines.find((l) => l.outcome === 'limited').retryAfterMs).toBeGreaterThan(0);
    expect(lines.find((l) => l.outcome === 'cancelled').bytesOut).toBe(0);
    const text = readFileSync(path, 'utf8');
    for (const secret of [SECRET, 'hunter2-pass-value', 'tok-abc-123']) expect(text).not.toContain(secret);
  });

  it('"redacted" keeps argument keys and replaces every value; "none" (the default) leaves arguments out', async () => {
    for (const mode of ['redacted', undefined] as const) {
      const path = tempFile('audit.jsonl');
      const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) }, audit: { path, ...(mode && { arguments: mode }) } }));
      await peer.initialize();
      await peer.request('tools/call', { name: 'fx__echo', arguments: { user: 'alice', n: 3, deep: { list: [1, 'two'] } } });
      await peer.request('prompts/get', { name: 'fx__prompt_0', arguments: { topic: 'secret topic' } });
      await peer.close();
      const lines = auditLines(path);
      const echo = lines.find((l) => l.method === 'tools/call');
      const prompt = lines.find((l) => l.method === 'prompts/get');
      if (mode === 'redacted') {
        expect(echo.arguments).toEqual({ user: '[REDACTED]', n: '[REDACTED]', deep: { list: ['[REDACTED]', '[REDACTED]'] } });
        expect(prompt.arguments).toEqual({ topic: '[REDACTED]' });
      } else {
        expect(echo).not.toHaveProperty('arguments');
        expect(prompt).not.toHaveProperty('arguments');
      }
      expect(readFileSync(path, 'utf8')).not.toMatch(/alice|secret topic/);
    }
  });

  it('server-initiated requests are audited with their direction', async () => {
    const path = tempFile('audit.jsonl');
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) }, audit: { path } }));
    await peer.initialize({ protocolVersion: '2025-11-25', capabilities: { sampling: {} }, clientInfo: { name: 'raw', version: '0' } });
    peer.send({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'fx__sample', arguments: { text: 'hi' } } });
    const sampling = await peer.next((m) => m.method === 'sampling/createMessage');
    peer.send({ jsonrpc: '2.0', id: sampling.id, result: { role: 'assistant', content: { type: 'text', text: 'hello' }, model: 'm' } });
    await peer.next((m) => m.id === 7);
    await peer.close();
    const line = auditLines(path).find((l) => l.method === 'sampling/createMessage');
    expect(line).toMatchObject({ direction: 'server-to-host', server: 'fx', client: 'anonymous', transport: 'stdio', outcome: 'ok' });
    expect(line).not.toHaveProperty('bytesIn');
  });
});

describe('audit log: files and signals', () => {
  it('is complete after SIGTERM: every answered request has its line', async () => {
    const path = tempFile('audit.jsonl');
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) }, audit: { path } });
    const client = await httpHost(d);
    await Promise.all(Array.from({ length: 40 }, (_, i) => client.callTool({ name: 'fx__echo', arguments: { i } })));
    expect(await d.stop()).toEqual({ code: 0, signal: null });
    const calls = auditLines(path).filter((l) => l.method === 'tools/call');
    expect(calls).toHaveLength(40);
    expect(calls.every((l) => l.outcome === 'ok' && l.transport === 'http')).toBe(true);
  });

  it('SIGUSR2 after a rename starts a new file, and no line is lost; both files (and a folder mcpmux made) are private, 0600', async () => {
    const path = join(tempFile('logs'), 'mcpmux', 'audit.jsonl');
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) }, audit: { path } });
    const client = await httpHost(d);
    const batch = (from: number, n: number) => Promise.all(Array.from({ length: n }, (_, i) => client.callTool({ name: 'fx__echo', arguments: { i: from + i } })));
    await batch(0, 10);
    renameSync(path, `${path}.1`);
    await batch(10, 10); // still written to the renamed file, by its open descriptor
    d.child.kill('SIGUSR2');
    await waitFor(() => d.stderr().includes('"msg":"audit log reopened"'), { what: 'the reopen log line' });
    await batch(20, 10);
    expect((await d.stop()).code).toBe(0);

    const numbers = (file: string) => auditLines(file).filter((l) => l.method === 'tools/call').map((l) => l.id);
    const before = numbers(`${path}.1`);
    const after = numbers(path);
    expect(before).toHaveLength(20);
    expect(after).toHaveLength(10);
    expect(auditLines(path).every((l) => l.method === 'tools/call')).toBe(true);
    // Audit lines name clients, tools and arguments: readable by mcpmux's own user only.
    expect((statSync(`${path}.1`).mode & 0o777).toString(8)).toBe('600');
    expect((statSync(path).mode & 0o777).toString(8)).toBe('600');
    expect((statSync(dirname(path)).mode & 0o777).toString(8)).toBe('700');
  });

  it('a disk that refuses every write is logged and counted, and the daemon carries on', async () => {
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) }, audit: { path: '/dev/full' } });
    const client = await httpHost(d);
    for (let i = 0; i < 5; i++) expect((await client.callTool({ name: 'fx__echo', arguments: { i } })).isError).toBeFalsy();
    await waitFor(async () => total((await scrape(`${d.base}/metrics`)).samples, 'mcpmux_audit_errors_total') >= 5, { what: 'lost audit lines counted' });
    await waitFor(() => /"msg":"cannot write \/dev\/full: ENOSPC/.test(d.stderr()), { what: 'the write failure logged' });
    expect((await d.stop()).code).toBe(0);
  });

  it('an audit path that cannot be opened stops startup with the reason', async () => {
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture() }, audit: { path: '/proc/forbidden/audit.jsonl' } }));
    const exit = await peer.exited;
    expect(exit.code).toBe(1);
    expect(peer.stderr()).toMatch(/\/audit\/path: cannot open the audit log: /);
  });
});
