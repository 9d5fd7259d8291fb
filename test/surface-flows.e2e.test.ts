// The search surface (issue 20) through the real binary with real peers: call_tool is the
// direct call of the tool it names, in everything a host can observe. Governance (audit,
// policy, rate limits, pins, metrics) judges the real tool; progress, cancellation, sampling,
// elicitation, roots and tasks flow as they do for a direct call, and the result is the same
// bytes; bad calls are refused with the error a direct call gets, or -32602 naming why; MCP
// Apps tools stay listed; a 2026-07-28 host gets the same surface. The surface is forced with
// `surface.mode: "search"` so nothing here depends on tool counts.

import path from 'node:path';
import { readFileSync, writeFileSync } from 'node:fs';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernHttp } from '@modelcontextprotocol/client';
import { StdioClientTransport as ModernStdio } from '@modelcontextprotocol/client/stdio';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { closeAll, everything, fixture, startMux, MUX_BIN, readEvents, ROOT, startRawMux, tempDir, tempFile, waitFor, waitForEvent, writeConfig, type RawPeer, type ServerEntry } from './helpers/harness.js';
import { scrape, total } from './helpers/prom.js';

afterEach(closeAll);
afterAll(stopAllDaemons);

const SEARCH = { mode: 'search' };
const ROOTS = [{ uri: 'file:///work/project', name: 'project' }];
const HOST_CAPS = { sampling: {}, elicitation: { form: {}, url: {} }, roots: { listChanged: true } };
const app = (pkg: string): ServerEntry => ({ command: process.execPath, args: [path.join(ROOT, `node_modules/@modelcontextprotocol/${pkg}/dist/index.js`), '--stdio'] });
const MODERN_FIXTURE = path.join(ROOT, 'test/fixtures/modern-upstream.mjs');

interface HostOptions {
  capabilities?: object;
  clientName?: string;
  env?: Record<string, string>;
  args?: string[];
}

/** mcpmux stdio on a config with the search surface forced, initialized by a raw host. */
async function searchHost(servers: Record<string, ServerEntry | object>, extra: object = {}, opts: HostOptions = {}): Promise<RawPeer> {
  const config = await writeConfig({ mcpServers: servers, ...extra, surface: { ...SEARCH, ...((extra as { surface?: object }).surface ?? {}) } });
  const peer = startRawMux(config, { ...(opts.env && { env: opts.env }), ...(opts.args && { args: opts.args }) });
  const init = await peer.initialize({ protocolVersion: '2025-11-25', capabilities: opts.capabilities ?? {}, clientInfo: { name: opts.clientName ?? 'search-host', version: '0' } });
  expect(init.error, JSON.stringify(init.error)).toBeUndefined();
  return peer;
}

let seq = 0;
/** Sends a request with a string id of our choosing (so raw lines of two calls differ only in it) and awaits its answer. */
async function rpc(peer: RawPeer, method: string, params: object, id = `r${++seq}`): Promise<any> {
  peer.send({ jsonrpc: '2.0', id, method, params });
  return peer.next((m) => m.id === id && !('method' in m));
}
const direct = (peer: RawPeer, name: string, args?: object, extra: object = {}) => rpc(peer, 'tools/call', { name, ...(args !== undefined && { arguments: args }), ...extra });
const viaCall = (peer: RawPeer, name: string, args?: object, extra: object = {}) =>
  rpc(peer, 'tools/call', { name: 'call_tool', arguments: { name, ...(args !== undefined && { arguments: args }) }, ...extra });

/** The raw stdout line that answered request `id`, with the id blanked: what the host read, byte for byte. */
function rawAnswer(peer: RawPeer, id: string): string {
  const key = `"id":${JSON.stringify(id)}`;
  const line = peer.lines.find((l) => l.includes(key) && !l.includes('"method"'));
  expect(line, `the answer to ${id}`).toBeDefined();
  return line!.replace(key, '"id":"*"');
}

const upstreamCalls = (events: string, tool: string) => readEvents(events).filter((e) => e.type === 'request' && e.method === 'tools/call' && e.params?.name === tool);
const adminPort = (peer: RawPeer) => waitFor(() => /"port":(\d+)[^\n]*"msg":"admin listening"/.exec(peer.stderr())?.[1], { what: 'admin port' });

// ---- 1. governance judges the real tool ---------------------------------------------------------------

describe('search surface: governance judges the tool call_tool names', () => {
  it('the audit line names the real tool (server, upstream name, its own arguments); a deny refuses it through call_tool with the direct call\'s error and the upstream never sees it', async () => {
    const audit = tempFile('audit.jsonl');
    const alphaEvents = tempFile('alpha.jsonl');
    const betaEvents = tempFile('beta.jsonl');
    const peer = await searchHost(
      { alpha: fixture({ name: 'alpha', events: alphaEvents }), beta: fixture({ name: 'beta', events: betaEvents }) },
      { policy: { tools: { deny: ['beta__echo'] } }, audit: { path: audit, arguments: 'full' } },
    );
    const listed = (await rpc(peer, 'tools/list', {})).result.tools.map((t: any) => t.name);
    expect(listed).toEqual(['search_tools', 'call_tool']);

    const ok = await viaCall(peer, 'alpha__echo', { say: 'hi', n: 1 });
    expect(ok.result.structuredContent).toEqual({ say: 'hi', n: 1 });
    const viaId = ok.id;

    const directDenied = await direct(peer, 'beta__echo', { x: 1 });
    const viaDenied = await viaCall(peer, 'beta__echo', { x: 1 });
    expect(directDenied.error).toEqual({ code: -31002, message: 'Tool beta__echo is denied by policy' });
    expect(viaDenied.error).toEqual(directDenied.error);
    // A search never offers it either.
    const found = (await direct(peer, 'search_tools', { query: 'echo arguments back', limit: 50 })).result.structuredContent.tools.map((t: any) => t.name);
    expect(found).toContain('alpha__echo');
    expect(found).not.toContain('beta__echo');

    const lines = await waitFor(() => {
      const all = readEvents(audit).filter((l) => l.method === 'tools/call');
      return all.length >= 4 && all;
    }, { what: 'audit lines of the four calls' });
    const viaLine = lines.find((l) => l.id === viaId);
    expect(viaLine).toMatchObject({ method: 'tools/call', name: 'alpha__echo', server: 'alpha', upstreamName: 'echo', outcome: 'ok', arguments: { say: 'hi', n: 1 } });
    expect(lines.find((l) => l.id === viaDenied.id)).toMatchObject({ name: 'beta__echo', outcome: 'denied', code: -31002 });
    // No line judges the meta-tool instead of the tool it called.
    expect(lines.filter((l) => l.name === 'call_tool')).toEqual([]);
    // beta never saw a tools/call; alpha saw exactly the one echo.
    expect(readEvents(betaEvents).filter((e) => e.type === 'request' && e.method === 'tools/call')).toEqual([]);
    expect(upstreamCalls(alphaEvents, 'echo').map((e) => e.params.arguments)).toEqual([{ say: 'hi', n: 1 }]);
  });

  it('a rate limit on a tool applies to call_tool: direct and call_tool calls share its bucket, and the limited answer is the one a direct call gets', async () => {
    const events = tempFile('alpha.jsonl');
    const peer = await searchHost(
      { alpha: fixture({ name: 'alpha', events }) },
      // Two at once, then one a minute: nothing refills within the test.
      { rateLimits: [{ server: 'alpha', tool: 'tool_0', perMinute: 1, burst: 2 }] },
    );
    const first = await direct(peer, 'alpha__tool_0', { i: 1 });
    const second = await viaCall(peer, 'alpha__tool_0', { i: 2 });
    expect(first.result.isError).toBeUndefined();
    expect(second.result.isError).toBeUndefined();
    // The third call, through call_tool, finds the bucket empty: the direct call took one token.
    const third = await viaCall(peer, 'alpha__tool_0', { i: 3 });
    const fourth = await direct(peer, 'alpha__tool_0', { i: 4 });
    for (const limited of [third, fourth]) {
      expect(limited.error).toBeUndefined();
      expect(limited.result.isError).toBe(true);
      expect(limited.result._meta.retryAfterMs).toBeGreaterThan(0);
      expect(limited.result.content[0].text).toMatch(/^Rate limit reached for alpha__tool_0: at most 2 at once and 1 per minute\. Try again in \d+\.\d s\.$/);
    }
    const shape = (r: any) => JSON.stringify(r.result).replace(/\d+(\.\d+)?/g, 'N');
    expect(shape(third)).toBe(shape(fourth));
    // The upstream saw the two that passed, and only those.
    expect(upstreamCalls(events, 'tool_0').map((e) => e.params.arguments.i)).toEqual([1, 2]);
    // Another tool of the same server is not limited through call_tool.
    expect((await viaCall(peer, 'alpha__tool_1', {})).result.isError).toBeUndefined();
  });

  it('a held tool (new on a pinned server) is refused through call_tool with -31006, as directly, and never reaches the upstream; metrics count the real tool', async () => {
    const state = tempDir();
    const events = tempFile('alpha.jsonl');
    // First run: alpha's three generated tools are trusted and recorded.
    const first = await searchHost({ alpha: { ...fixture({ name: 'alpha' }), pinTools: true } }, {}, { env: { MCPMUX_STATE_DIR: state } });
    expect((await direct(first, 'search_tools', { query: 'generated tool', limit: 50 })).result.structuredContent.tools.map((t: any) => t.name)).toContain('alpha__tool_2');
    await first.close();
    // Second run: alpha lists a fourth, new to a pinned server, so held.
    const peer = await searchHost(
      { alpha: { ...fixture({ name: 'alpha', tools: 4, events }), pinTools: true } },
      { metrics: { toolLabel: true } },
      { env: { MCPMUX_STATE_DIR: state }, args: ['--admin-port', '0'] },
    );
    const port = await adminPort(peer);
    const found = (await direct(peer, 'search_tools', { query: 'generated tool', limit: 50 })).result.structuredContent.tools.map((t: any) => t.name);
    expect(found).toContain('alpha__tool_2');
    // Search does not offer it.
    expect(found).not.toContain('alpha__tool_3');
    await waitFor(() => /"server":"alpha","tool":"tool_3","changed":\["\(new tool\)"\],"held":true/.test(peer.stderr()), { what: 'tool_3 held' });
    const directHeld = await direct(peer, 'alpha__tool_3', {});
    const viaHeld = await viaCall(peer, 'alpha__tool_3', {});
    expect(directHeld.error).toMatchObject({ code: -31006 });
    expect(directHeld.error.message).toContain('alpha__tool_3');
    expect(viaHeld.error).toEqual(directHeld.error);
    expect(upstreamCalls(events, 'tool_3')).toEqual([]);

    // Metrics: two echo calls through call_tool and one direct count as three calls of alpha__echo.
    await viaCall(peer, 'alpha__echo', { a: 1 });
    await viaCall(peer, 'alpha__echo', { a: 2 });
    await direct(peer, 'alpha__echo', { a: 3 });
    const samples = await waitFor(async () => {
      const s = (await scrape(`http://127.0.0.1:${port}/metrics`)).samples;
      return total(s, 'mcpmux_requests_total', { method: 'tools/call', tool: 'alpha__echo' }) >= 3 && s;
    }, { what: 'three alpha__echo calls counted' });
    expect(total(samples, 'mcpmux_requests_total', { method: 'tools/call', tool: 'alpha__echo', server: 'alpha', outcome: 'ok' })).toBe(3);
    expect(total(samples, 'mcpmux_requests_total', { method: 'tools/call', tool: 'alpha__tool_3' })).toBe(2);
    expect(total(samples, 'mcpmux_requests_total', { method: 'tools/call', tool: 'call_tool' })).toBe(0);
  }, 60_000);
});

// ---- 2. everything a direct call gets -------------------------------------------------------------------

describe('search surface: call_tool gets what a direct call gets', () => {
  it('the result is the same bytes as a direct call\'s: structuredContent, content blocks, isError, long raw strings and big numbers', async () => {
    const peer = await searchHost({ alpha: fixture({ name: 'alpha' }) });
    // Past the opaque threshold (jsonrpc/opaque.ts: 32 KB lines, 8 KB strings), and a number past a double.
    const long = 'é'.repeat(20_000) + '"\\ end';
    // Arguments as raw JSON text: a number past a double must reach the upstream as its digits.
    const cases: Array<[string, string | undefined]> = [
      ['alpha__echo', '{"n":12345678901234567890123,"f":1.5e300,"s":"ünïcödé \\u2028","deep":{"list":[1,null,true,{"k":"v"}]}}'],
      ['alpha__echo', JSON.stringify({ long, other: 'short' })],
      ['alpha__echo', undefined],
      ['alpha__links', '{}'],
      ['alpha__nested', '{"depth":50}'],
      ['alpha__sample', '{}'], // isError: this host cannot sample
      ['alpha__tool_2', '{"x":"y"}'],
    ];
    for (const [i, [name, args]] of cases.entries()) {
      const d = `direct-${i}`;
      const v = `via-${i}`;
      // The same bytes on the wire: the raw line's text, not only a parse of it.
      const argsText = args === undefined ? '' : `,"arguments":${args}`;
      peer.send(`{"jsonrpc":"2.0","id":"${d}","method":"tools/call","params":{"name":"${name}"${argsText}}}`);
      await peer.next((m) => m.id === d);
      peer.send(`{"jsonrpc":"2.0","id":"${v}","method":"tools/call","params":{"name":"call_tool","arguments":{"name":"${name}"${argsText}}}}`);
      await peer.next((m) => m.id === v);
      expect(rawAnswer(peer, v), name).toBe(rawAnswer(peer, d));
    }
    // (The fixture's own JSON.parse rounds the big number: both answers carry the same rounding.)
    expect(JSON.parse(rawAnswer(peer, 'via-0')).result.structuredContent.s).toBe('ünïcödé \u2028');
    expect(JSON.parse(rawAnswer(peer, 'via-1')).result.structuredContent.long).toBe(long);
    expect(JSON.parse(rawAnswer(peer, 'via-5')).result.isError).toBe(true);
    // An upstream's JSON-RPC error is the same error too.
    const failDirect = await direct(peer, 'alpha__fail', {});
    const failVia = await viaCall(peer, 'alpha__fail', {});
    expect(failDirect.error).toMatchObject({ code: -32603, message: 'fixture failure' });
    expect(failVia.error).toEqual(failDirect.error);
  });

  it('the upstream gets the same request from call_tool as from a direct call: its own name, the arguments, and the host\'s _meta', async () => {
    const events = tempFile('alpha.jsonl');
    const peer = await searchHost({ alpha: fixture({ name: 'alpha', events }) });
    const meta = { 'com.example/trace': 'trace-1', progressToken: 'p-1' };
    const args = { q: 'same', nested: { list: [1, 'two'] } };
    await direct(peer, 'alpha__echo', args, { _meta: meta });
    await viaCall(peer, 'alpha__echo', args, { _meta: { ...meta, progressToken: 'p-2' } });
    const seen = upstreamCalls(events, 'echo').map((e) => e.params);
    expect(seen).toHaveLength(2);
    // mcpmux puts a token of its own in place of the host's; everything else is the host's.
    for (const p of seen) {
      expect(p._meta.progressToken).toBeDefined();
      delete p._meta.progressToken;
    }
    expect(seen[0]).toEqual({ name: 'echo', arguments: args, _meta: { 'com.example/trace': 'trace-1' } });
    expect(seen[1]).toEqual(seen[0]);
  });

  it('progress: every notifications/progress of the call carries the host\'s own token and comes before the result, as for a direct call', async () => {
    const peer = await searchHost({ alpha: fixture({ name: 'alpha' }) });
    const steps = (token: string) => peer.messages.filter((m) => m.method === 'notifications/progress' && m.params.progressToken === token);
    for (const [token, call] of [
      ['tok-direct', () => direct(peer, 'alpha__progress', { steps: 4, delayMs: 5 }, { _meta: { progressToken: 'tok-direct' } })],
      ['tok-via', () => viaCall(peer, 'alpha__progress', { steps: 4, delayMs: 5 }, { _meta: { progressToken: 'tok-via' } })],
    ] as const) {
      const answer = await call();
      expect(answer.result.content).toEqual([{ type: 'text', text: 'done 4' }]);
      const mine = steps(token);
      expect(mine.map((m) => [m.params.progress, m.params.total, m.params.message])).toEqual([1, 2, 3, 4].map((k) => [k, 4, `step ${k}`]));
      const at = peer.messages.indexOf(answer);
      for (const m of mine) expect(peer.messages.indexOf(m)).toBeLessThan(at);
    }
    // No progress went out under any other token.
    expect(peer.messages.filter((m) => m.method === 'notifications/progress').length).toBe(8);
  });

  it('cancellation: the host cancelling its call_tool request cancels the upstream\'s own request, which never answers the host', async () => {
    const events = tempFile('alpha.jsonl');
    const peer = await searchHost({ alpha: fixture({ name: 'alpha', events }) });
    peer.send({ jsonrpc: '2.0', id: 'slow-1', method: 'tools/call', params: { name: 'call_tool', arguments: { name: 'alpha__slow', arguments: { ms: 60_000 } } } });
    const upstreamReq = await waitForEvent(events, (e) => e.type === 'request' && e.method === 'tools/call' && e.params?.name === 'slow');
    expect(upstreamReq.params.arguments).toEqual({ ms: 60_000 });
    peer.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'slow-1', reason: 'host gave up' } });
    const cancelled = await waitForEvent(events, (e) => e.type === 'notification' && e.method === 'notifications/cancelled');
    expect(cancelled.params.requestId).toBe(upstreamReq.id);
    await waitForEvent(events, (e) => e.type === 'aborted' && e.tool === 'slow' && e.id === upstreamReq.id);
    // The session goes on, and the cancelled request was never answered.
    expect((await viaCall(peer, 'alpha__echo', { after: true })).result.structuredContent).toEqual({ after: true });
    expect(peer.messages.some((m) => m.id === 'slow-1')).toBe(false);
  });

  it('sampling, form elicitation and roots: the host is asked, answers, and the result carries the answer, exactly as a direct call\'s', async () => {
    const peer = await searchHost({ alpha: fixture({ name: 'alpha' }) }, {}, { capabilities: HOST_CAPS });
    const answers: Record<string, object> = {
      'sampling/createMessage': { role: 'assistant', content: { type: 'text', text: 'sampled by the host' }, model: 'host-model' },
      'elicitation/create': { action: 'accept', content: { name: 'Ada', confirm: true } },
      'roots/list': { roots: ROOTS },
    };
    for (const [tool, method] of [['sample', 'sampling/createMessage'], ['elicit', 'elicitation/create'], ['roots', 'roots/list']] as const) {
      const results: any[] = [];
      const asked: any[] = [];
      for (const how of ['direct', 'via'] as const) {
        const id = `${tool}-${how}`;
        const params = how === 'direct' ? { name: `alpha__${tool}`, arguments: {} } : { name: 'call_tool', arguments: { name: `alpha__${tool}`, arguments: {} } };
        peer.send({ jsonrpc: '2.0', id, method: 'tools/call', params });
        const req = await peer.next((m) => m.method === method && 'id' in m);
        asked.push(req.params);
        peer.send({ jsonrpc: '2.0', id: req.id, result: answers[method] });
        const answer = await peer.next((m) => m.id === id && !('method' in m));
        expect(answer.error, JSON.stringify(answer.error)).toBeUndefined();
        results.push(answer.result);
      }
      expect(JSON.parse(results[1].content[0].text), tool).toEqual(answers[method]);
      expect(results[1], tool).toEqual(results[0]);
      expect(asked[1], tool).toEqual(asked[0]);
    }
  });

  it('URL elicitation: the host is asked with the URL, and the completion notice carries the id it saw; -32042 URL-required passes through with its elicitations, and completing it reaches the host', async () => {
    const peer = await searchHost({ alpha: fixture({ name: 'alpha' }) }, {}, { capabilities: HOST_CAPS });
    peer.send({ jsonrpc: '2.0', id: 'url-1', method: 'tools/call', params: { name: 'call_tool', arguments: { name: 'alpha__elicit_url' } } });
    const req = await peer.next((m) => m.method === 'elicitation/create' && 'id' in m);
    expect(req.params).toMatchObject({ mode: 'url', url: 'https://example.com/alpha/elicit/alpha-elicitation-1', elicitationId: expect.any(String) });
    peer.send({ jsonrpc: '2.0', id: req.id, result: { action: 'accept' } });
    const answer = await peer.next((m) => m.id === 'url-1' && !('method' in m));
    expect(JSON.parse(answer.result.content[0].text)).toEqual({ action: 'accept', elicitationId: 'alpha-elicitation-1' });
    const complete = await peer.next((m) => m.method === 'notifications/elicitation/complete');
    expect(complete.params.elicitationId).toBe(req.params.elicitationId);

    const directErr = (await direct(peer, 'alpha__url_required', {})).error;
    const viaErr = (await viaCall(peer, 'alpha__url_required', {})).error;
    for (const e of [directErr, viaErr]) {
      expect(e).toMatchObject({ code: -32042, message: 'URL elicitation required' });
      expect(e.data.elicitations).toHaveLength(1);
      expect(e.data.elicitations[0]).toMatchObject({ mode: 'url', message: 'authorize first', elicitationId: expect.any(String), url: expect.stringMatching(/^https:\/\/example\.com\/alpha\/auth\//) });
    }
    // The same shape; only the fixture's counter in the id differs.
    expect(JSON.stringify(viaErr).replace(/required-\d+/g, 'required-N')).toBe(JSON.stringify(directErr).replace(/required-\d+/g, 'required-N'));
    // Completing the one asked through call_tool tells the host under the id it was given.
    const hostId = viaErr.data.elicitations[0].elicitationId as string;
    const upstreamId = /alpha-required-\d+/.exec(hostId)![0];
    expect((await viaCall(peer, 'alpha__url_required', { complete: upstreamId })).result.content[0].text).toBe(`completed ${upstreamId}`);
    const done = await peer.next((m) => m.method === 'notifications/elicitation/complete' && m.params.elicitationId === hostId);
    expect(done.params.elicitationId).toBe(hostId);
  });

  it('tasks: a task-augmented call_tool creates the task (id namespaced), progress keeps the host token, tasks/result gives the tool\'s result', async () => {
    const peer = await searchHost({ tk: fixture({ name: 'tk', tasks: true } as object) });
    // The surface decided and its index built before the call: the first search-mode call of a
    // session builds the index on the event loop while the call is in flight, and notices that
    // come in one read with the CreateTaskResult are then dropped (the race shown below).
    expect((await rpc(peer, 'tools/list', {})).result.tools.map((t: any) => t.name)).toEqual(['search_tools', 'call_tool']);
    expect((await direct(peer, 'search_tools', { query: 'progress' })).result.structuredContent.tools.map((t: any) => t.name)).toContain('tk__progress');
    peer.send({ jsonrpc: '2.0', id: 't1', method: 'tools/call', params: { name: 'call_tool', arguments: { name: 'tk__progress', arguments: { steps: 3, delayMs: 5 } }, task: { ttl: 60_000 }, _meta: { progressToken: 'task-tok' } } });
    const created = await peer.next((m) => m.id === 't1');
    expect(created.error, JSON.stringify(created.error)).toBeUndefined();
    expect(created.result.task).toMatchObject({ taskId: 'tk:task-1', status: 'working' });
    const status = await peer.next((m) => m.method === 'notifications/tasks/status');
    expect(status.params).toMatchObject({ taskId: 'tk:task-1', status: 'completed' });
    const steps = peer.messages.filter((m) => m.method === 'notifications/progress');
    expect(steps.map((m) => [m.params.progressToken, m.params.progress])).toEqual([['task-tok', 1], ['task-tok', 2], ['task-tok', 3]]);
    const result = await rpc(peer, 'tasks/result', { taskId: 'tk:task-1' });
    expect(result.result.content[0].text).toBe('done 3');
    expect(result.result._meta['io.modelcontextprotocol/related-task']).toEqual({ taskId: 'tk:task-1' });
    expect((await rpc(peer, 'tasks/get', { taskId: 'tk:task-1' })).result.status).toBe('completed');
  });
});

/**
 * A raw upstream that answers a task-augmented tools/call of `job` with its CreateTaskResult, a
 * progress notice (the caller's token) and the task's terminal status in ONE write: legal (a
 * task's progress and status follow its CreateTaskResult), and what a busy mcpmux reads anyway
 * when its loop was blocked while they arrived.
 */
const TASK_BURST_UPSTREAM = `
import { createInterface } from 'node:readline';
const out = (...msgs) => process.stdout.write(msgs.map((m) => JSON.stringify({ jsonrpc: '2.0', ...m }) + '\\n').join(''));
const task = { taskId: 'job-1', status: 'working', createdAt: '2026-01-01T00:00:00Z', lastUpdatedAt: '2026-01-01T00:00:00Z', ttl: 60000 };
createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  if (m.method === 'initialize') return out({ id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } }, serverInfo: { name: 'burst', version: '1' } } });
  if (m.method === 'tools/list') return out({ id: m.id, result: { tools: [{ name: 'job', description: 'A task that finishes at once', inputSchema: { type: 'object' } }] } });
  if (m.method === 'tools/call' && m.params.task) {
    const done = { ...task, status: 'completed' };
    return out(
      { id: m.id, result: { task } },
      { method: 'notifications/progress', params: { progressToken: m.params._meta.progressToken, progress: 1, total: 1 } },
      { method: 'notifications/tasks/status', params: done },
    );
  }
  if (m.method === 'tasks/result') return out({ id: m.id, result: { content: [{ type: 'text', text: 'job done' }], _meta: { 'io.modelcontextprotocol/related-task': { taskId: 'job-1' } } } });
  if (m.method === 'tasks/get') return out({ id: m.id, result: { ...task, status: 'completed' } });
  if ('id' in m && m.method) out({ id: m.id, error: { code: -32601, message: 'Method not found' } });
});
`;

describe('tasks: notices that arrive in one read with the CreateTaskResult', () => {
  // BUG (pre-existing, found through call_tool): mcpmux registers a task's progress route in a
  // promise continuation (src/upstream/upstream.ts, Upstream.request: pending.then(...
  // keepTaskProgress)) and its owner after an await (src/router/dispatch.ts, callNamed:
  // owners.tasks.set), so the progress and status lines decoded in the same chunk as the
  // CreateTaskResult find neither and are dropped ("progress for an unknown token dropped").
  // call_tool makes it likely with a well-behaved upstream: a session's first search-mode call
  // builds the search index (src/router/surface.ts, decide -> indexOf, setImmediate) on the loop
  // while the call is in flight (~50-100 ms cold here), so the upstream's answer and the notices
  // it sends 25 ms later (test/fixtures/upstream.mjs) are read together.
  for (const how of ['directly', 'through call_tool'] as const) {
    it(`${how}: the host still gets the task's progress (its own token) and its terminal status`, async () => {
      const script = tempFile('burst-upstream.mjs');
      writeFileSync(script, TASK_BURST_UPSTREAM);
      const peer = await searchHost({ burst: { command: process.execPath, args: [script] } });
      expect((await rpc(peer, 'tools/list', {})).result.tools.map((t: any) => t.name)).toEqual(['search_tools', 'call_tool']);
      const call = how === 'directly' ? { name: 'burst__job', arguments: {} } : { name: 'call_tool', arguments: { name: 'burst__job', arguments: {} } };
      const created = await rpc(peer, 'tools/call', { ...call, task: { ttl: 60_000 }, _meta: { progressToken: 'burst-tok' } });
      expect(created.result.task).toMatchObject({ taskId: 'burst:job-1', status: 'working' });
      const status = await peer.next((m) => m.method === 'notifications/tasks/status', 5000);
      expect(status.params).toMatchObject({ taskId: 'burst:job-1', status: 'completed' });
      expect(peer.messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progressToken)).toEqual(['burst-tok']);
      expect((await rpc(peer, 'tasks/result', { taskId: 'burst:job-1' })).result.content[0].text).toBe('job done');
    });
  }
});

describe('search surface: a legacy host over Streamable HTTP (mcpmux serve)', () => {
  it('sampling, elicitation, roots and progress of a call_tool reach the SDK host on its HTTP session, and the results equal direct calls\'', async () => {
    const d = await startDaemon({ mcpServers: { alpha: fixture({ name: 'alpha' }) }, surface: SEARCH });
    const c = new Client({ name: 'http-host', version: '0' }, { capabilities: HOST_CAPS });
    c.setRequestHandler(CreateMessageRequestSchema, async (req) => ({ model: 'host-model', role: 'assistant' as const, content: { type: 'text' as const, text: `sampled ${(req.params.messages[0]?.content as any)?.text}` } }));
    c.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept' as const, content: { name: 'Ada', confirm: true } }));
    c.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: ROOTS }));
    await c.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    try {
      expect((await c.listTools()).tools.map((t) => t.name)).toEqual(['search_tools', 'call_tool']);
      for (const [tool, args] of [['sample', { text: 'over http' }], ['elicit', {}], ['roots', {}]] as const) {
        const via = await c.callTool({ name: 'call_tool', arguments: { name: `alpha__${tool}`, arguments: args } });
        const directly = await c.callTool({ name: `alpha__${tool}`, arguments: args });
        expect(via.isError, JSON.stringify(via)).toBeFalsy();
        expect(via, tool).toEqual(directly);
      }
      const progress: number[] = [];
      const done = await c.callTool({ name: 'call_tool', arguments: { name: 'alpha__progress', arguments: { steps: 3, delayMs: 20 } } }, undefined, { onprogress: (p) => void progress.push(p.progress) });
      expect(done.content).toEqual([{ type: 'text', text: 'done 3' }]);
      // The SDK 1.x client may drop the last notice when the answer arrives in the same chunk
      // (flows.e2e.test.ts, responsesAfterNotifications); the raw stdio test checks every one.
      await waitFor(() => progress.length >= 2, { what: 'progress through call_tool over HTTP' });
      expect([1, 2, 3].slice(0, progress.length)).toEqual(progress);
    } finally {
      await c.close();
      await d.stop();
    }
  }, 60_000);
});

describe('tasks: a host that follows the tools\' declared taskSupport', () => {
  /** What the SDK 1.x host's callToolStream yields for `params`: it makes the call a task when the listed tool says it supports tasks. */
  async function streamed(mode: 'all' | 'search', params: { name: string; arguments: object }): Promise<{ types: string[]; text: string }> {
    const mux = await startMux({ mcpServers: { every: everything() }, surface: { mode } });
    try {
      await mux.client.listTools();
      const types: string[] = [];
      let text = '';
      for await (const m of mux.client.experimental.tasks.callToolStream(params)) {
        types.push(m.type);
        if (m.type === 'result') text = (m.result.content as any[]).map((c) => c.text ?? '').join('\n');
        if (m.type === 'error') text = String(m.error);
      }
      return { types, text };
    } finally {
      await mux.close();
    }
  }

  it('all mode (control): the SDK host calls server-everything\'s task-required tool as a task', async () => {
    const got = await streamed('all', { name: 'every__simulate-research-query', arguments: { topic: 'multiplexing' } });
    expect(got.types[0]).toBe('taskCreated');
    expect(got.text).toContain('Research Report: multiplexing');
  }, 60_000);

  // BUG (contract gap): call_tool's definition (src/surface/meta-tools.ts, callToolDefinition)
  // declares no `execution.taskSupport`, which means "forbidden": a host that follows the spec
  // (here the SDK's callToolStream) never sends call_tool as a task, so a task-required tool
  // cannot be called through call_tool at all (the upstream answers -32601 "requires task
  // augmentation") and tasks are out of reach through it. mcpmux itself passes `task` through
  // call_tool fine (the raw test above). Likely fix: `execution: {taskSupport: "optional"}` on
  // call_tool when the session's server capabilities include task-augmented tools/call, and
  // each search_tools match carrying its tool's `execution`, so the model and host know.
  it('search mode: the same host calls it through call_tool as a task', async () => {
    const got = await streamed('search', { name: 'call_tool', arguments: { name: 'every__simulate-research-query', arguments: { topic: 'multiplexing' } } });
    expect(got.text).toContain('Research Report: multiplexing');
    expect(got.types[0]).toBe('taskCreated');
  }, 60_000);
});

// ---- 3. errors through call_tool --------------------------------------------------------------------------

describe('search surface: call_tool refuses what a direct call refuses, and bad calls, with -32602', () => {
  it('an unknown name gets the direct call\'s error; a name that is not a string, arguments that are not an object, and the meta-tools themselves get -32602', async () => {
    const events = tempFile('alpha.jsonl');
    const peer = await searchHost({ alpha: fixture({ name: 'alpha', events }) });
    for (const unknown of ['alpha__no_such_tool', 'nosuchserver__echo', 'echo']) {
      const d = await direct(peer, unknown, {});
      const v = await viaCall(peer, unknown, {});
      expect(d.error.code, unknown).toBe(-32602);
      expect(v.error, unknown).toEqual(d.error);
    }
    const bad: Array<[string, unknown]> = [
      ['arguments missing', undefined],
      ['arguments an array', ['alpha__echo']],
      ['arguments a string', 'alpha__echo'],
      ['arguments null', null],
      ['name missing', {}],
      ['name a number', { name: 5 }],
      ['name an object', { name: { tool: 'alpha__echo' } }],
      ['inner arguments an array', { name: 'alpha__echo', arguments: [1, 2] }],
      ['inner arguments a string', { name: 'alpha__echo', arguments: '{"a":1}' }],
      ['inner arguments null', { name: 'alpha__echo', arguments: null }],
      ['calling search_tools', { name: 'search_tools', arguments: { query: 'echo' } }],
      ['calling call_tool', { name: 'call_tool', arguments: { name: 'alpha__echo' } }],
    ];
    for (const [what, args] of bad) {
      const r = await rpc(peer, 'tools/call', { name: 'call_tool', ...(args !== undefined && { arguments: args }) });
      expect(r.error?.code, `${what}: ${JSON.stringify(r)}`).toBe(-32602);
      expect(r.error.message, what).toMatch(/call_tool/);
    }
    // None of them reached the upstream.
    expect(readEvents(events).filter((e) => e.type === 'request' && e.method === 'tools/call')).toEqual([]);
  });

  it('an app-only MCP Apps tool is refused through call_tool naming why, while a view still calls it directly by name', async () => {
    const peer = await searchHost({ monitor: app('server-system-monitor') });
    const via = await viaCall(peer, 'monitor__poll-system-stats', {});
    expect(via.error?.code, JSON.stringify(via)).toBe(-32602);
    expect(via.error.message).toMatch(/MCP Apps view/);
    expect(via.error.message).toContain('monitor__poll-system-stats');
    const viewCall = await direct(peer, 'monitor__poll-system-stats', {});
    expect(viewCall.error, JSON.stringify(viewCall.error)).toBeUndefined();
    expect(viewCall.result.isError).toBeFalsy();
    // A view may call it by its server's own name, and still can, directly.
    const ownName = await direct(peer, 'poll-system-stats', {});
    expect(ownName.error, JSON.stringify(ownName.error)).toBeUndefined();
    expect(ownName.result.isError).toBeFalsy();
  }, 60_000);

  // BUG: route() (src/router/surface.ts) looks the name up in the view by public name only
  // (`view.byName.get(inner.name)`), so the server's own name of an app-only tool, which the
  // resolver accepts for MCP Apps views (src/router/resolve.ts, viewCall/viewOwners), is not
  // seen as app-only and call_tool calls it.
  it('an app-only tool named by its server\'s own name (as views do) is refused through call_tool too', async () => {
    const peer = await searchHost({ monitor: app('server-system-monitor') });
    await rpc(peer, 'tools/list', {});
    const via = await viaCall(peer, 'poll-system-stats', {});
    expect(via.error?.code, JSON.stringify(via).slice(0, 300)).toBe(-32602);
    expect(via.error.message).toMatch(/MCP Apps view/);
  }, 60_000);

  it('a name outside the session\'s toolset is refused with -32602 naming the toolset, through call_tool and directly alike', async () => {
    const alphaEvents = tempFile('alpha.jsonl');
    const peer = await searchHost(
      { alpha: fixture({ name: 'alpha', events: alphaEvents }), beta: fixture({ name: 'beta' }) },
      { toolsets: { b: { tools: ['beta__*'] } } },
      { args: ['--toolset', 'b'] },
    );
    const d = await direct(peer, 'alpha__echo', { x: 1 });
    const v = await viaCall(peer, 'alpha__echo', { x: 1 });
    expect(d.error).toMatchObject({ code: -32602 });
    expect(d.error.message).toContain('toolset "b"');
    expect(v.error).toEqual(d.error);
    expect(upstreamCalls(alphaEvents, 'echo')).toEqual([]);
    // Inside the toolset it works, and search finds only its tools.
    expect((await viaCall(peer, 'beta__echo', { x: 2 })).result.structuredContent).toEqual({ x: 2 });
    const found = (await direct(peer, 'search_tools', { query: 'echo', limit: 50 })).result.structuredContent.tools.map((t: any) => t.name);
    expect(found.length).toBeGreaterThan(0);
    for (const n of found) expect(n).toMatch(/^beta__/);
  });
});

describe('search surface: names, mode "all" and list changes', () => {
  it('renamed meta-tools (surface.searchToolName, callToolName) answer under their names only; mode "all" lists no meta-tools and knows none', async () => {
    const peer = await searchHost({ alpha: fixture({ name: 'alpha' }) }, { surface: { searchToolName: 'find_tools', callToolName: 'run_tool' } });
    const listed: any[] = (await rpc(peer, 'tools/list', {})).result.tools;
    expect(listed.map((t) => t.name)).toEqual(['find_tools', 'run_tool']);
    expect(listed[0].description).toContain('run_tool');
    expect(listed[1].description).toContain('find_tools');
    expect((await direct(peer, 'find_tools', { query: 'echo' })).result.structuredContent.tools.map((t: any) => t.name)).toContain('alpha__echo');
    expect((await rpc(peer, 'tools/call', { name: 'run_tool', arguments: { name: 'alpha__echo', arguments: { renamed: true } } })).result.structuredContent).toEqual({ renamed: true });
    for (const old of ['search_tools', 'call_tool']) {
      const r = await rpc(peer, 'tools/call', { name: old, arguments: { name: 'alpha__echo', query: 'echo' } });
      expect(r.error, old).toMatchObject({ code: -32602, message: `Unknown tool: ${old}` });
    }
    expect((await rpc(peer, 'tools/call', { name: 'run_tool', arguments: { name: 'find_tools', arguments: { query: 'x' } } })).error?.code).toBe(-32602);

    const all = startRawMux(await writeConfig({ mcpServers: { alpha: fixture({ name: 'alpha' }) }, surface: { mode: 'all' } }));
    await all.initialize();
    const names = (await all.request('tools/list', {})).result.tools.map((t: any) => t.name);
    expect(names).toContain('alpha__echo');
    expect(names.filter((n: string) => !n.startsWith('alpha__'))).toEqual([]);
    expect((await all.request('tools/call', { name: 'call_tool', arguments: { name: 'alpha__echo' } })).error).toMatchObject({ code: -32602, message: 'Unknown tool: call_tool' });
  });

  it('a tool an upstream adds is found by search_tools and callable through call_tool once the host heard list_changed', async () => {
    const peer = await searchHost({ alpha: fixture({ name: 'alpha' }) });
    expect((await direct(peer, 'search_tools', { query: 'added at run time', limit: 50 })).result.structuredContent.tools.map((t: any) => t.name)).not.toContain('alpha__added_0');
    expect((await viaCall(peer, 'alpha__add_tool', {})).result.content[0].text).toBe('added_0');
    await peer.next((m) => m.method === 'notifications/tools/list_changed');
    const found = (await direct(peer, 'search_tools', { query: 'added at run time', limit: 50 })).result.structuredContent.tools.map((t: any) => t.name);
    expect(found).toContain('alpha__added_0');
    expect((await viaCall(peer, 'alpha__added_0', {})).result.content[0].text).toBe('added_0');
    // The description's count follows too.
    const [search] = (await rpc(peer, 'tools/list', {})).result.tools;
    expect(search.description).toMatch(/Search the 21 tools/);
  });
});

// ---- 4. MCP Apps in search mode ------------------------------------------------------------------------------

describe('search surface: MCP Apps', () => {
  it('tools/list holds every view tool and app-only tool (as in all mode), the meta-tools and alwaysVisible tools; search never returns app-only tools; the view still reads', async () => {
    const servers = { basic: app('server-basic-vanillajs'), monitor: app('server-system-monitor'), alpha: fixture({ name: 'alpha' }) };
    const allPeer = startRawMux(await writeConfig({ mcpServers: servers, surface: { mode: 'all' } }));
    await allPeer.initialize();
    const all: any[] = (await allPeer.request('tools/list', {})).result.tools;
    await allPeer.close();
    const ui = (t: any) => t._meta?.ui ?? {};
    const appTools = all.filter((t) => typeof ui(t).resourceUri === 'string' || (Array.isArray(ui(t).visibility) && !ui(t).visibility.includes('model')));
    const appOnly = appTools.filter((t) => Array.isArray(ui(t).visibility) && !ui(t).visibility.includes('model')).map((t) => t.name);
    expect(appTools.map((t) => t.name)).toEqual(expect.arrayContaining(['basic__get-time', 'monitor__poll-system-stats']));
    expect(appOnly).toContain('monitor__poll-system-stats');
    expect(ui(all.find((t) => t.name === 'basic__get-time')).resourceUri).toBe('ui://basic+get-time/mcp-app.html');

    const peer = await searchHost(servers, { surface: { alwaysVisible: ['alpha__whoami'] } });
    const listed: any[] = (await rpc(peer, 'tools/list', {})).result.tools;
    const names = listed.map((t) => t.name);
    expect(names.slice(0, 2)).toEqual(['search_tools', 'call_tool']);
    expect(names.slice(2).sort()).toEqual([...appTools.map((t) => t.name), 'alpha__whoami'].sort());
    // Each is listed exactly as all mode lists it (namespaced view URI and visibility included).
    for (const t of listed.slice(2)) expect(t, t.name).toEqual(all.find((a) => a.name === t.name));

    for (const query of ['poll system stats', 'system monitor cpu memory', 'get the current time']) {
      const found = (await direct(peer, 'search_tools', { query, limit: 50 })).result.structuredContent.tools.map((t: any) => t.name);
      for (const hidden of appOnly) expect(found, query).not.toContain(hidden);
    }
    // A view tool is searchable and callable through call_tool.
    const time = (await direct(peer, 'search_tools', { query: 'get the current time', limit: 50 })).result.structuredContent.tools.map((t: any) => t.name);
    expect(time).toContain('basic__get-time');
    expect((await viaCall(peer, 'basic__get-time', {})).result.isError).toBeFalsy();

    const read = await rpc(peer, 'resources/read', { uri: 'ui://basic+get-time/mcp-app.html' });
    expect(read.error, JSON.stringify(read.error)).toBeUndefined();
    expect(read.result.contents[0]).toMatchObject({ uri: 'ui://basic+get-time/mcp-app.html', mimeType: 'text/html;profile=mcp-app' });
    expect(read.result.contents[0].text.length).toBeGreaterThan(1000);
  }, 60_000);
});

// ---- 5. a 2026-07-28 host ------------------------------------------------------------------------------------

/** The SDK 2.x client pinned to 2026-07-28, answering form elicitations with a name. */
function modernHost(asked: string[]): ModernClient {
  const c = new ModernClient({ name: 'modern-host', version: '0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: { elicitation: { form: {} } } });
  c.setRequestHandler('elicitation/create', async (req: { params: { message: string } }) => {
    asked.push(req.params.message);
    return { action: 'accept', content: { name: 'Grace', answer: 'yes' } };
  });
  return c;
}

/** What every 2026-07-28 host must get: the search list, a search, call_tool, and input rounds through call_tool as direct. */
async function modernSearchSurface(c: ModernClient, asked: string[], withModernUpstream: boolean): Promise<void> {
  expect(c.getProtocolEra()).toBe('modern');
  const names = (await c.listTools()).tools.map((t) => t.name);
  expect(names).toEqual(['search_tools', 'call_tool']);
  const found = await c.callTool({ name: 'search_tools', arguments: { query: 'echo the arguments back' } });
  expect(found.isError).toBeFalsy();
  expect((found.structuredContent as any).tools.map((t: any) => t.name)).toContain('fx__echo');
  expect((await c.callTool({ name: 'call_tool', arguments: { name: 'fx__echo', arguments: { via: 'modern' } } })).structuredContent).toEqual({ via: 'modern' });
  // A legacy upstream's elicitation reaches the modern host as an input_required round: through call_tool as directly.
  const directElicit = await c.callTool({ name: 'fx__elicit', arguments: {} });
  const viaElicit = await c.callTool({ name: 'call_tool', arguments: { name: 'fx__elicit', arguments: {} } });
  expect(JSON.parse((viaElicit.content as any)[0].text)).toEqual({ action: 'accept', content: { name: 'Grace', answer: 'yes' } });
  expect(viaElicit).toEqual(directElicit);
  expect(asked).toEqual(['fx needs your name', 'fx needs your name']);
  if (withModernUpstream) {
    // A 2026-07-28 upstream's own input_required passes through, and the retry through call_tool resumes it.
    const greeted = await c.callTool({ name: 'call_tool', arguments: { name: 'mo__greet', arguments: { greeting: 'Hi' } } });
    expect(greeted.content).toEqual([{ type: 'text', text: 'Hi, Grace!' }]);
    expect(asked.at(-1)).toBe('What is your name?');
  }
  const progress: number[] = [];
  const done = await c.callTool({ name: 'call_tool', arguments: { name: 'fx__progress', arguments: { steps: 3, delayMs: 50 } } }, { onprogress: (p) => void progress.push(p.progress) });
  expect(done.content).toEqual([{ type: 'text', text: 'done 3' }]);
  // (The SDK 2.x client may drop the last notice when the answer right behind it resolves the call: modern.e2e.test.ts.)
  await waitFor(() => progress.length >= 2, { what: 'progress through call_tool' });
  expect([1, 2, 3].slice(0, progress.length)).toEqual(progress);
  await expect(c.callTool({ name: 'call_tool', arguments: { name: 'fx__no_such_tool', arguments: {} } })).rejects.toThrow(/Unknown tool: fx__no_such_tool/);
}

describe('search surface: a 2026-07-28 host', () => {
  it('over stdio: lists the meta-tools, searches, calls through call_tool, and answers input_required rounds through it (legacy and modern upstreams)', async () => {
    const config = await writeConfig({
      mcpServers: { fx: fixture({ name: 'fx' }), mo: { command: process.execPath, args: [MODERN_FIXTURE, 'stdio', JSON.stringify({ events: tempFile('mo.jsonl') })] } },
      surface: SEARCH,
    });
    const asked: string[] = [];
    const c = modernHost(asked);
    await c.connect(new ModernStdio({ command: process.execPath, args: [MUX_BIN, 'stdio', '--config', config], stderr: 'ignore' }));
    try {
      await modernSearchSurface(c, asked, true);
    } finally {
      await c.close();
    }
  }, 60_000);

  it('over Streamable HTTP (mcpmux serve): the same surface', async () => {
    const d = await startDaemon({ mcpServers: { fx: fixture({ name: 'fx' }) }, surface: SEARCH });
    const asked: string[] = [];
    const c = modernHost(asked);
    await c.connect(new ModernHttp(new URL(d.url)));
    try {
      await modernSearchSurface(c, asked, false);
    } finally {
      await c.close();
      await d.stop();
    }
  }, 60_000);
});
