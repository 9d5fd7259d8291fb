// Numbers a double cannot hold (issue 18, items 3 and 4), through the real binary over raw
// pipes and sockets (the SDK cannot send such ids):
// - an id out of double range (1e400, 123456789012345678901234567890...) comes back exactly as
//   it was sent, on every transport, alone and in batches (the rule: docs/decisions.md), a
//   batch is answered whole, also one that arrives while initialize is being answered;
// - mcpmux's internal marker for such numbers never reaches a host, an upstream, a log line or
//   the audit log; a param of the wrong type is -32602 naming the param.

import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { closeAll, fixture, ROOT, startRawMux, tempFile, waitFor, writeConfig, type RawPeer } from './helpers/harness.js';

afterEach(closeAll);
afterAll(stopAllDaemons);

/** Out-of-range literals: overflow, negative overflow, just past the largest double, and integers past 2^64. */
const OUT_OF_RANGE = ['1e400', '-1e400', '1e309', '1E+400', '123456789012345678901234567890', '-98765432109876543210987654321'];
/** The same magnitudes, spelled differently: distinct ids for the batches (ids are compared as written). */
const IN_BATCH = ['2e400', '-2e400', '1.5e309', '2E+400', '223456789012345678901234567890', '-88765432109876543210987654321'];
/** mcpmux's marker for a kept number, escaped or not. */
const MARKER = /mcpmux-num-/;
const V_BATCH = '2025-03-26';

const line = (id: string, method: string, params?: object): string =>
  `{"jsonrpc":"2.0","id":${id},"method":"${method}"${params ? `,"params":${JSON.stringify(params)}` : ''}}`;
/** Whether `text` holds a response carrying exactly this id literal. */
const echoes = (text: string, id: string): boolean => text.includes(`"id":${id},"result"`) || text.includes(`"id":${id},"error"`);
const initParams = (protocolVersion = V_BATCH) => ({ protocolVersion, capabilities: {}, clientInfo: { name: 'numbers', version: '0' } });

/** initialize (a 2025-03-26 host: batches allowed) + initialized; the upstreams may be slow to start on a loaded machine. */
async function init(peer: RawPeer): Promise<any> {
  const res = await peer.request('initialize', initParams(), 30_000);
  peer.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return res;
}

const bad = (opts: object) => ({ command: process.execPath, args: [path.join(ROOT, 'test/fixtures/bad-upstream.mjs'), JSON.stringify(opts)] });

describe('ids out of double range are echoed exactly', () => {
  it('stdio: alone and in a batch, every such id comes back as sent, the batch as one array', async () => {
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) } }));
    await init(peer);
    for (const id of OUT_OF_RANGE) peer.send(line(id, 'tools/list'));
    await waitFor(() => OUT_OF_RANGE.every((id) => peer.lines.some((l) => echoes(l, id))), { what: 'every single request answered', timeoutMs: 10_000 });
    const batch = `[${IN_BATCH.map((id, i) => line(id, i % 2 ? 'ping' : 'tools/list')).join(',')},${line('"plain"', 'ping')}]`;
    peer.send(batch);
    const answer = await waitFor(() => peer.lines.find((l) => l.startsWith('[') && l.includes('"plain"')), { what: 'the batch answered', timeoutMs: 10_000 });
    for (const id of IN_BATCH) expect(echoes(answer, id), `${id} in ${answer.slice(0, 300)}`).toBe(true);
    expect(JSON.parse(answer)).toHaveLength(IN_BATCH.length + 1);
    expect(peer.lines.join('\n')).not.toMatch(MARKER);
  });

  it('stdio: a batch sent while initialize is being answered gets an answer for each entry', async () => {
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) } }));
    // One write: the batch is read while initialize waits for the upstream.
    peer.send(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: initParams() })}\n[${line('1e400', 'ping')},${line('12345678901234567890', 'tools/list')},${line('3', 'initialize', initParams())}]`);
    const answer = await waitFor(() => peer.lines.find((l) => l.startsWith('[')), { what: 'the batch answered', timeoutMs: 15_000 });
    expect(peer.lines.findIndex((l) => l.startsWith('{"jsonrpc":"2.0","id":1,"result"'))).toBeGreaterThanOrEqual(0);
    expect(answer).toContain('{"jsonrpc":"2.0","id":1e400,"result":{}}');
    expect(answer).toContain('{"jsonrpc":"2.0","id":12345678901234567890,"result":{"tools":[');
    const entries = JSON.parse(answer);
    expect(entries).toHaveLength(3);
    expect(entries[2]).toMatchObject({ id: 3, error: { code: -32600, message: 'Invalid Request: initialize must not be part of a batch' } });
  });

  it('stdio: a batch before any initialize: each entry is answered on its own', async () => {
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) } }));
    peer.send(`[${line('1e400', 'ping')},${line('-1e400', 'tools/list')},${line('3', 'initialize', initParams())}]`);
    const answer = await waitFor(() => peer.lines.find((l) => l.startsWith('[')), { what: 'the batch answered', timeoutMs: 15_000 });
    expect(answer).toContain('{"jsonrpc":"2.0","id":1e400,"result":{}}');
    expect(answer).toContain('{"jsonrpc":"2.0","id":-1e400,"error":{"code":-32600,"message":"Invalid Request: tools/list before initialize"}}');
    expect(answer).toContain('{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"Invalid Request: initialize must not be part of a batch"}}');
    // The connection is still usable: initialize alone works.
    expect((await init(peer)).result.protocolVersion).toBe(V_BATCH);
  });

  it('stdio: a request reusing an out-of-range id in flight is told so with the id as sent', async () => {
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) } }));
    await init(peer);
    peer.send(line('1e400', 'tools/call', { name: 'fx__slow', arguments: { ms: 60_000 } }));
    peer.send(line('1e400', 'ping'));
    await waitFor(() => peer.lines.some((l) => echoes(l, '1e400')), { what: 'the second request answered' });
    expect(peer.lines.find((l) => echoes(l, '1e400'))).toBe('{"jsonrpc":"2.0","id":1e400,"error":{"code":-32600,"message":"Invalid Request: id 1e400 is already in use"}}');
    peer.send('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1e400}}');
    expect((await peer.request('ping')).result).toEqual({});
  });

  it('stdio: a line over the size limit is refused for its id as sent', async () => {
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) }, limits: { maxMessageBytes: 4096 } }));
    await init(peer);
    const pad = 'z'.repeat(8000);
    for (const id of ['1e400', '12345678901234567890', '-1.5e309']) {
      peer.send(line(id, 'tools/call', { name: 'fx__echo', arguments: { pad } }));
      // Read from its first bytes only: the message is never parsed whole.
      await waitFor(() => peer.lines.some((l) => echoes(l, id)), { what: `the refusal for ${id}` });
      expect(peer.lines.find((l) => echoes(l, id))).toMatch(new RegExp(`^\\{"jsonrpc":"2\\.0","id":${id.replace(/[.+-]/g, '\\$&')},"error":\\{"code":-32600,"message":"Message of \\d+ bytes exceeds the limit"`));
    }
  });

  describe('over HTTP', () => {
    let d: Daemon;
    const headers = (accept: string, sid?: string): Record<string, string> => ({
      'content-type': 'application/json',
      accept,
      ...(sid && { 'mcp-session-id': sid, 'mcp-protocol-version': V_BATCH }),
    });
    const JSON_FIRST = 'application/json, text/event-stream;q=0.5';
    const SSE_FIRST = 'text/event-stream, application/json;q=0.5';

    async function session(accept: string): Promise<string> {
      const r = await fetch(d.url, { method: 'POST', headers: headers(accept), body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: initParams() }) });
      await r.text();
      const sid = r.headers.get('mcp-session-id')!;
      await (await fetch(d.url, { method: 'POST', headers: headers(accept, sid), body: '{"jsonrpc":"2.0","method":"notifications/initialized"}' })).text();
      return sid;
    }

    it.each([
      ['JSON', JSON_FIRST],
      ['SSE', SSE_FIRST],
    ])('Streamable HTTP (%s answers): alone and in a batch, every id comes back as sent', async (_mode, accept) => {
      d ??= await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) } });
      const sid = await session(accept);
      for (const id of OUT_OF_RANGE) {
        const r = await fetch(d.url, { method: 'POST', headers: headers(accept, sid), body: line(id, 'tools/list') });
        const text = await r.text();
        expect(r.status).toBe(200);
        expect(echoes(text, id), `${id}: ${text.slice(0, 200)}`).toBe(true);
      }
      const r = await fetch(d.url, { method: 'POST', headers: headers(accept, sid), body: `[${IN_BATCH.map((id, i) => line(id, i % 2 ? 'ping' : 'tools/list')).join(',')}]` });
      const text = await r.text();
      expect(r.status).toBe(200);
      for (const id of IN_BATCH) expect(echoes(text, id), `${id}: ${text.slice(0, 300)}`).toBe(true);
      expect(text).not.toMatch(MARKER);
    });

    it('Streamable HTTP: a request reusing an id in flight is refused with the id as sent', async () => {
      d ??= await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) } });
      const sid = await session(JSON_FIRST);
      const ac = new AbortController();
      const slow = fetch(d.url, { method: 'POST', headers: headers(JSON_FIRST, sid), body: line('1e400', 'tools/call', { name: 'fx__slow', arguments: { ms: 60_000 } }), signal: ac.signal }).catch(() => undefined);
      // The daemon has the first one once its call reached the upstream... or at least once it answers 400 for the second.
      const text = await waitFor(async () => {
        const r = await fetch(d.url, { method: 'POST', headers: headers(JSON_FIRST, sid), body: line('1e400', 'ping') });
        const t = await r.text();
        return r.status === 400 ? t : undefined;
      }, { what: 'the reused id refused' });
      expect(JSON.parse(text).error.message).toBe('Invalid Request: request id 1e400 is already in use');
      ac.abort();
      await slow;
    });

    it('Streamable HTTP: a batch sent while initialize is being answered gets an answer for each entry', async () => {
      // The upstream takes 4 s to answer initialize; the host's initialize waits for it.
      const slowInit = await startDaemon({ mcpServers: { slow: bad({ initDelayMs: 4000 }) } });
      const init = await fetch(slowInit.url, { method: 'POST', headers: headers(SSE_FIRST), body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: initParams() }) });
      const sid = init.headers.get('mcp-session-id')!;
      let initAnswered = false;
      const initText = init.text().then((t) => ((initAnswered = true), t));
      // An SSE answer: its headers come as soon as the batch is accepted, before any entry is answered.
      const r = await fetch(slowInit.url, { method: 'POST', headers: headers(SSE_FIRST, sid), body: `[${line('1e400', 'ping')},${line('12345678901234567890', 'tools/list')}]` });
      // Proof that this batch came during the handshake: initialize was not answered when the batch was accepted.
      expect(initAnswered).toBe(false);
      const text = await r.text();
      expect(r.status, text).toBe(200);
      expect(text).toContain('{"jsonrpc":"2.0","id":1e400,"result":{}}');
      expect(text).toContain('{"jsonrpc":"2.0","id":12345678901234567890,"result":{"tools":[');
      expect(await initText).toContain('"protocolVersion":"2025-03-26"');
      await slowInit.stop();
    });

    it('legacy SSE: alone and in a batch, every id comes back as sent on the stream', async () => {
      d ??= await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) } });
      const ac = new AbortController();
      const res = await fetch(`${d.base}/sse`, { headers: { accept: 'text/event-stream' }, signal: ac.signal });
      let received = '';
      const pump = (async () => {
        const dec = new TextDecoder();
        try {
          for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) received += dec.decode(chunk, { stream: true });
        } catch {
          /* aborted at the end */
        }
      })();
      const endpoint = await waitFor(() => /event: endpoint\ndata: (\S+)/.exec(received)?.[1], { what: 'the endpoint event' });
      const post = (body: string) => fetch(new URL(endpoint, d.base), { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then((r) => r.text());
      await post(JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: initParams('2024-11-05') }));
      await waitFor(() => received.includes('"id":0,'), { what: 'initialize answered' });
      await post('{"jsonrpc":"2.0","method":"notifications/initialized"}');
      for (const id of OUT_OF_RANGE) await post(line(id, 'tools/list'));
      await post(`[${IN_BATCH.map((id) => line(id, 'ping')).join(',')}]`);
      await waitFor(() => [...OUT_OF_RANGE, ...IN_BATCH].every((id) => echoes(received, id)), { what: 'every id answered on the stream', timeoutMs: 10_000 });
      expect(received).toContain(`data: [${IN_BATCH.map((id) => `{"jsonrpc":"2.0","id":${id},"result":{}}`).join(',')}]`);
      expect(received).not.toMatch(MARKER);
      ac.abort();
      await pump;
    });

    it('WebSocket: alone and in a batch, every id comes back as sent', async () => {
      d ??= await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) } });
      const ws = new WebSocket(`ws://127.0.0.1:${d.port}/ws`, 'mcp');
      const received: string[] = [];
      ws.on('message', (m) => received.push(String(m)));
      await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: initParams() }));
      await waitFor(() => received.some((m) => m.includes('"id":0,')), { what: 'initialize answered', timeoutMs: 10_000 });
      ws.send('{"jsonrpc":"2.0","method":"notifications/initialized"}');
      for (const id of OUT_OF_RANGE) ws.send(line(id, 'tools/list'));
      ws.send(`[${IN_BATCH.map((id) => line(id, 'ping')).join(',')}]`);
      await waitFor(() => [...OUT_OF_RANGE, ...IN_BATCH].every((id) => received.some((m) => echoes(m, id))), { what: 'every id answered', timeoutMs: 10_000 });
      expect(received).toContain(`[${IN_BATCH.map((id) => `{"jsonrpc":"2.0","id":${id},"result":{}}`).join(',')}]`);
      expect(received.join('\n')).not.toMatch(MARKER);
      ws.close();
    });
  });
});

describe('the marker for big numbers never leaves mcpmux', () => {
  it('a param of the wrong type is -32602 naming it; ids, arguments and errors carry the digits to the host, the upstream, the log and the audit log', async () => {
    const audit = tempFile('audit.jsonl');
    const raw = tempFile('upstream-in.jsonl');
    const peer: RawPeer = startRawMux(
      await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }), bad: bad({ rawLog: raw }) }, logLevel: 'debug', audit: { path: audit, arguments: 'full' } }),
    );
    await init(peer);
    // JSON.stringify cannot write these numbers: each request is written by hand.
    const wrongType: [id: number, method: string, params: string, param: string][] = [
      [1, 'resources/read', '{"uri":4643760711382237}', 'uri'],
      [2, 'tools/call', '{"name":12345678901234567890}', 'name'],
      [3, 'prompts/get', '{"name":1e400}', 'name'],
      [4, 'resources/subscribe', '{"uri":-1e400}', 'uri'],
      [5, 'logging/setLevel', '{"level":1e400}', 'level'],
      [6, 'tools/list', '{"cursor":98765432109876543210}', 'cursor'],
    ];
    for (const [id, method, params] of wrongType) peer.send(`{"jsonrpc":"2.0","id":${id},"method":"${method}","params":${params}}`);
    for (const [id, method, , param] of wrongType) {
      const a = await peer.next((m) => m.id === id);
      expect(a.error?.code, `${method}: ${JSON.stringify(a)}`).toBe(-32602);
      expect(a.error.message, method).toContain(param);
    }
    expect(peer.lines.find((l) => l.startsWith('{"jsonrpc":"2.0","id":5,'))).toContain('"message":"Invalid log level: 1e400"');
    // A response to an id mcpmux never used is logged (debug) with that id.
    peer.send('{"jsonrpc":"2.0","id":1e400,"result":{}}');
    await waitFor(() => peer.stderr().split('\n').find((l) => l.includes('a response to an id never used')), { what: 'the stray response logged' });
    expect(peer.stderr().split('\n').find((l) => l.includes('a response to an id never used'))).toContain('1e400');
    // Arguments with big numbers reach the upstream and the audit log as their digits.
    const args = '{"mode":"ok","big":12345678901234567890,"huge":1e400,"list":[-1e400,98765432109876543210]}';
    peer.send(`{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/call","params":{"name":"bad__misbehave","arguments":${args}}}`);
    await waitFor(() => peer.lines.some((l) => echoes(l, '123456789012345678901234567890')), { what: 'the call answered' });
    await waitFor(() => existsSync(raw) && readFileSync(raw, 'utf8').includes('"method":"tools/call"'), { what: 'the call seen upstream' });
    expect(readFileSync(raw, 'utf8')).toContain(`"arguments":${args}`);
    const auditText = await waitFor(() => (existsSync(audit) && readFileSync(audit, 'utf8').includes('"id":123456789012345678901234567890') ? readFileSync(audit, 'utf8') : undefined), {
      what: 'the call audited',
    });
    expect(auditText).toContain(`"arguments":${args}`);
    for (const [what, text] of [
      ['the host', peer.lines.join('\n')],
      ['the upstream', readFileSync(raw, 'utf8')],
      ['the audit log', auditText],
      ['the log', peer.stderr()],
    ]) {
      expect(text, what).not.toMatch(MARKER);
    }
  });
});

describe('long strings kept as raw bytes never leave mcpmux as placeholders', () => {
  // A line of 32 KiB or more keeps its long string values as bytes behind a placeholder
  // (src/jsonrpc/opaque.ts); a value moved out of its message must take its bytes along.
  it("a 2026-07-28 upstream's long requestState comes back to it whole on the retry (legacy host, input asked by elicitation)", async () => {
    const modern = { command: process.execPath, args: [path.join(ROOT, 'test/fixtures/modern-upstream.mjs'), 'stdio', '{}'] };
    const peer = startRawMux(await writeConfig({ mcpServers: { mo: modern } }));
    await peer.request('initialize', { ...initParams('2025-11-25'), capabilities: { elicitation: {} } }, 30_000);
    peer.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    // The fixture puts the greeting into its requestState: a 40 KB string in a 40 KB answer.
    const greeting = `Hello ${'é'.repeat(20_000)}`;
    peer.send({ jsonrpc: '2.0', id: 'greet', method: 'tools/call', params: { name: 'mo__greet', arguments: { greeting } } });
    const ask = await peer.next((m) => m.method === 'elicitation/create', 30_000);
    expect(ask.params.message).toBe('What is your name?');
    peer.send({ jsonrpc: '2.0', id: ask.id, result: { action: 'accept', content: { name: 'Ada' } } });
    const r = await peer.next((m) => m.id === 'greet', 30_000);
    expect(r.result?.content?.[0]?.text === `${greeting}, Ada!`, JSON.stringify(r).slice(0, 300)).toBe(true);
    expect(peer.lines.join('\n')).not.toMatch(/\\u0000mcpmux-/);
  });

  it("a 2026-07-28 host gets an upstream's long sampling request whole inside input_required", async () => {
    const peer = startRawMux(await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) } }));
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': { sampling: {} } };
    // The fixture's sample tool asks for sampling with this text: a 40 KB string in a 40 KB request.
    const text = `Summarise ${'é'.repeat(20_000)}`;
    peer.send({ jsonrpc: '2.0', id: 'sample', method: 'tools/call', params: { name: 'fx__sample', arguments: { text }, _meta: meta } });
    const r = await peer.next((m) => m.id === 'sample', 30_000);
    expect(r.result?.resultType, JSON.stringify(r).slice(0, 300)).toBe('input_required');
    const asks = Object.values(r.result.inputRequests) as any[];
    expect(asks).toHaveLength(1);
    expect(asks[0].method).toBe('sampling/createMessage');
    expect(asks[0].params.messages[0].content.text === text, JSON.stringify(asks[0]).slice(0, 300)).toBe(true);
    expect(peer.lines.join('\n')).not.toMatch(/\\u0000mcpmux-/);
  });
});
