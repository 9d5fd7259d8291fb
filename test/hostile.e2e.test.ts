// Hostile or broken input on the stdio host side never crashes mcpmux and never gets an answer
// that the peer could mistake for something else.

import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { closeAll, fixture, MUX_BIN, startRawMux, tempFile, UPSTREAM_FIXTURE, waitFor, waitForEvent, writeConfig } from './helpers/harness.js';

afterEach(closeAll);

async function rawHost(limits: object = {}) {
  const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) }, limits }));
  await peer.initialize();
  return peer;
}

describe('hostile input on stdio', () => {
  it('an oversized line whose id is a malformed string gets -32600 with id null, and mcpmux keeps serving', async () => {
    const peer = await rawHost({ maxMessageBytes: 4096 });
    peer.send(`{"jsonrpc":"2.0","id":"\\x","method":"tools/call","params":{"name":"fx__echo","arguments":{"pad":"${'z'.repeat(8000)}"}}}`);
    const err = await peer.next((m) => m.error !== undefined);
    expect(err).toMatchObject({ id: null, error: { code: -32600 } });
    expect(err.error.message).toMatch(/exceeds the limit/);
    const pong = await peer.request('ping');
    expect(pong.result).toEqual({});
  });

  it('a malformed response from the host is not answered (it would look like a response to the host)', async () => {
    const peer = await rawHost();
    peer.send({ jsonrpc: '2.0', id: 1, result: null });
    peer.send({ jsonrpc: '2.0', id: 'after', method: 'ping' });
    // Messages are answered in order: anything mcpmux said about id 1 would come first.
    const next = await peer.next((m) => m.id !== undefined && m.method === undefined);
    expect(next).toMatchObject({ id: 'after', result: {} });
  });

  it('requests beyond limits.maxInFlightPerSession get -31003 at once; the ones within the limit complete', async () => {
    const peer = await rawHost({ maxInFlightPerSession: 2 });
    // 3 s: the two calls within the limit are still running when the third arrives, even on a busy machine.
    const slow = (id: string) => peer.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'fx__slow', arguments: { ms: 3000 } } });
    slow('a');
    slow('b');
    slow('c');
    const refused = await peer.next((m) => m.id === 'c');
    expect(refused.error).toMatchObject({ code: -31003, message: 'Too many requests in flight (limit 2)' });
    for (const id of ['a', 'b']) expect((await peer.next((m) => m.id === id)).result).toBeDefined();
  });

  it('a long argument with a raw control character is a parse error (-32700), never forwarded', async () => {
    const peer = await rawHost();
    // JSON forbids raw control characters inside strings; mcpmux checks long values it keeps raw.
    peer.send(`{"jsonrpc":"2.0","id":"tab","method":"tools/call","params":{"name":"fx__echo","arguments":{"pad":"${'z'.repeat(50_000)}\t"}}}`);
    const err = await peer.next((m) => m.error !== undefined);
    expect(err).toMatchObject({ id: null, error: { code: -32700 } });
    const ok = await peer.request('tools/call', { name: 'fx__echo', arguments: { after: 1 } });
    expect(ok.result.structuredContent).toEqual({ after: 1 });
  });

  it('a long notification nested 20 000 deep is taken without harm, and mcpmux keeps serving', async () => {
    const peer = await rawHost();
    const deep = '['.repeat(20_000) + ']'.repeat(20_000);
    peer.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{"a":"${'z'.repeat(9000)}","b":${deep}}}`);
    const pong = await peer.request('ping');
    expect(pong.result).toEqual({});
    expect(peer.child.exitCode).toBeNull();
  });

  it('an id too big for a double comes back exactly, and cancelling it by that id works', async () => {
    const events = tempFile('events.jsonl');
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx', events }) } }));
    await peer.initialize();
    peer.send('{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping"}');
    await peer.next((m) => m.result !== undefined && typeof m.id === 'number' && m.id > 1e19);
    expect(peer.lines.some((l) => l.includes('"id":12345678901234567890,'))).toBe(true);
    peer.send('{"jsonrpc":"2.0","id":98765432109876543210,"method":"tools/call","params":{"name":"fx__echo","arguments":{"a":1}}}');
    await peer.next((m) => m.result?.structuredContent?.a === 1);
    expect(peer.lines.some((l) => l.includes('"id":98765432109876543210,'))).toBe(true);
    // A slow call cancelled by its big id: no answer comes for it, and the next request is served.
    peer.send('{"jsonrpc":"2.0","id":11111111111111111111,"method":"tools/call","params":{"name":"fx__slow","arguments":{"ms":60000}}}');
    await waitForEvent(events, (e) => e.type === 'request' && e.method === 'tools/call' && e.params?.name === 'slow');
    peer.send('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":11111111111111111111}}');
    await waitForEvent(events, (e) => e.type === 'aborted' && e.tool === 'slow');
    expect((await peer.request('ping')).result).toEqual({});
    expect(peer.lines.some((l) => l.includes('11111111111111111111'))).toBe(false);
  });

  // JSON.parse reads nesting that JSON.stringify cannot write back (~4 000 levels on Node's
  // default stack). mcpmux answers instead of crashing or leaving the request waiting.
  it('a request nested too deeply to forward gets -32603 at once, and mcpmux keeps serving', async () => {
    const peer = await rawHost();
    const deep = '['.repeat(20_000) + ']'.repeat(20_000);
    peer.send(`{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{"name":"fx__echo","arguments":{"v":${deep}}}}`);
    const res = await peer.next((m) => m.id === 'deep');
    expect(res.error).toMatchObject({ code: -32603 });
    expect(res.error.message).toMatch(/could not be serialised/);
    expect((await peer.request('ping')).result).toEqual({});
  });

  it('an upstream result nested too deeply to pass on becomes -32603 for that call, and mcpmux keeps serving', async () => {
    // The fixture gets a bigger stack, so that it can write what mcpmux cannot.
    const deepFixture = { command: process.execPath, args: ['--stack-size=4000', UPSTREAM_FIXTURE, JSON.stringify({ name: 'fx' })] };
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: deepFixture } }));
    await peer.initialize();
    const res = await peer.request('tools/call', { name: 'fx__nested', arguments: { depth: 6000 } });
    expect(res.error).toMatchObject({ code: -32603 });
    expect((await peer.request('tools/call', { name: 'fx__nested', arguments: { depth: 3 } })).result.structuredContent).toEqual({ v: [[[]]] });
  });

  it('a tool list nested too deeply to serve: that server is left out of tools/list (said once), the others are listed, and mcpmux keeps serving', async () => {
    const deepFixture = { command: process.execPath, args: ['--stack-size=4000', UPSTREAM_FIXTURE, JSON.stringify({ name: 'fx' })] };
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: deepFixture, other: fixture({ name: 'other' }) } }));
    await peer.initialize();
    expect((await peer.request('tools/call', { name: 'fx__add_tool', arguments: { depth: 6000 } })).result).toBeDefined();
    for (let i = 0; i < 2; i++) {
      const names = (await peer.request('tools/list')).result.tools.map((t: { name: string }) => t.name);
      expect(names.some((n: string) => n.startsWith('fx__'))).toBe(false);
      expect(names).toContain('other__echo');
    }
    await waitFor(() => peer.stderr().includes('list failed; leaving this server out (said once per server and reason)'), { what: 'the failure said' });
    expect(peer.stderr().split('list failed; leaving this server out').length - 1).toBe(1);
    expect((await peer.request('ping')).result).toEqual({});
  });
});

describe('a host that never reads', () => {
  it("mcpmux's stderr: log lines are queued (bounded) instead of blocking, and MCP on stdout carries on", async () => {
    const config = await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) }, logLevel: 'debug' });
    const child = spawn(process.execPath, [MUX_BIN, 'stdio', '--config', config], { stdio: ['pipe', 'pipe', 'pipe'] });
    // Nobody ever reads its stderr: once the pipe (64 KB) is full, a blocking write would freeze mcpmux.
    child.stderr.pause();
    const exited = new Promise((resolve) => child.once('exit', resolve));
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    const send = (m: object) => child.stdin.write(JSON.stringify(m) + '\n');
    // However the test ends, the process does not outlive it.
    onTestFinished(() => void (child.exitCode === null && child.signalCode === null && child.kill('SIGKILL')));
    send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '0' } } });
    await waitFor(() => out.includes('"id":1,'), { what: 'initialize answered', timeoutMs: 15_000 });
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    // Each unknown notification costs a debug log line (~200 bytes): far more than the pipe holds.
    const padding = 'p'.repeat(500);
    for (let i = 0; i < 3000; i++) send({ jsonrpc: '2.0', method: 'notifications/unknown', params: { i, padding } });
    send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'fx__echo', arguments: { after: 'the flood' } } });
    await waitFor(() => out.includes('"id":2,'), { what: 'the call after the log flood answered', timeoutMs: 10_000 });
    child.stdin.end();
    child.stderr.resume();
    await exited;
  });
});

describe('a host that stops reading stdout', () => {
  it('is dropped once it has taken nothing for the stuck time while more than the shed bound waits: mcpmux says why and exits, instead of growing', async () => {
    // Past the shed bound (1 MB waiting) the log notifications are shed; the host then takes
    // nothing for MCPMUX_STUCK_MS and is cut.
    const config = await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) }, limits: { maxMessageBytes: 262_144 } });
    const child = spawn(process.execPath, [MUX_BIN, 'stdio', '--config', config], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, MCPMUX_STUCK_MS: '1500' } });
    onTestFinished(() => void (child.exitCode === null && child.signalCode === null && child.kill('SIGKILL')));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    let out = '';
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
    const onOut = (c: string) => (out += c);
    child.stdout.setEncoding('utf8').on('data', onOut);
    const send = (m: object) => child.stdin.write(JSON.stringify(m) + '\n');
    send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '0' } } });
    await waitFor(() => out.includes('"id":1,'), { what: 'initialize answered', timeoutMs: 15_000 });
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    // The host stops reading; the upstream then floods it with ~4 MB of log notifications.
    child.stdout.off('data', onOut);
    child.stdout.pause();
    send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'fx__log', arguments: { levels: Array(30_000).fill('info') } } });
    expect(await exited).toBe(0);
    expect(err).toMatch(/"reason":"the peer has read nothing of what mcpmux sends for \d+ s \(\d+ bytes waiting\)"/);
    expect(err).toMatch(/"transport":"stdio"[^\n]*host is not keeping up/);
  });
});

describe('params that are not the shape MCP gives them', () => {
  it.each([
    ['params as an array', [], -32600],
    ['params as a string', 'x', -32600],
    ['_meta as an array', { _meta: [1, 2] }, -32602],
    ['_meta as a number', { _meta: 3 }, -32602],
    ['a progress token that is an object', { _meta: { progressToken: { a: 1 } } }, -32602],
  ])('%s is refused at once (%i) instead of waiting for an upstream that would drop it', async (_what, params, code) => {
    const peer = await rawHost();
    peer.send({ jsonrpc: '2.0', id: 'shape', method: 'resources/read', params: params as object });
    const r = await peer.next((m) => m.id === 'shape', 3000);
    expect(r.error.code).toBe(code);
    expect(r.error.message).toMatch(/^Invalid (params|Request): /);
  });
});
