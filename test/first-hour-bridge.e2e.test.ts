// Issue 19, points 13 and 14: a 2026-07-28 host whose call mcpmux answered `input_required` (a
// legacy upstream asked for input) retries with a new request and a new progressToken. What the
// upstream says after that (progress, log messages) goes with the retry, cancelling the retry
// cancels the upstream's call, and the call is counted once in /metrics and the audit log. An
// upstream's own request with no host to take it is client="none". Raw JSON-RPC hosts over the
// real binary: `mcpmux stdio`, and `mcpmux serve` over Streamable HTTP.

import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import {
  awaitJsonLine,
  closeAll,
  exitWithin,
  fixture,
  readEvents,
  ROOT,
  startRawMux,
  tempFile,
  waitFor,
  waitForEvent,
  writeConfig,
  type FixtureOptions,
  type ServerEntry,
} from './helpers/harness.js';
import { scrape, total } from './helpers/prom.js';
import { spawn } from 'node:child_process';

afterEach(closeAll);
afterAll(stopAllDaemons);

const MODERN = '2026-07-28';
const BRIDGE = path.join(ROOT, 'test/fixtures/bridge-upstream.mjs');
const TOOL = 'b__ask_then_work';
const ACCEPT = { q1: { action: 'accept', content: { go: true } } };

const bridge = (events: string): ServerEntry => ({ command: process.execPath, args: [BRIDGE, JSON.stringify({ events })] });

/** A modern request's `_meta`: the envelope, and what this request asks for. */
function meta(extra: { progressToken?: string; logLevel?: string } = {}): object {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } },
    'io.modelcontextprotocol/clientInfo': { name: 'raw-modern', version: '0' },
    ...(extra.progressToken !== undefined && { progressToken: extra.progressToken }),
    ...(extra.logLevel !== undefined && { 'io.modelcontextprotocol/logLevel': extra.logLevel }),
  };
}

const callParams = (args: object, m: Parameters<typeof meta>[0], retry?: { requestState: string }) => ({
  name: TOOL,
  arguments: args,
  _meta: meta(m),
  ...(retry && { requestState: retry.requestState, inputResponses: ACCEPT }),
});

describe('over stdio: what the upstream says after the retry goes with the retry', () => {
  it('progress comes under the retry\'s progressToken (none under the first\'s), log messages at the retry\'s level; the call is answered on the retry', async () => {
    const events = tempFile('bridge.jsonl');
    const peer = startRawMux(await writeConfig({ mcpServers: { b: bridge(events) } }));
    peer.send({ jsonrpc: '2.0', id: 'first', method: 'tools/call', params: callParams({ steps: 2 }, { progressToken: 'old-token' }) });
    const first = await peer.next((m) => m.id === 'first');
    expect(first.result).toMatchObject({ resultType: 'input_required', inputRequests: { q1: { method: 'elicitation/create' } } });

    peer.send({ jsonrpc: '2.0', id: 'retry', method: 'tools/call', params: callParams({ steps: 2 }, { progressToken: 'new-token', logLevel: 'info' }, first.result) });
    const done = await peer.next((m) => m.id === 'retry');
    expect(JSON.parse(done.result.content[0].text)).toEqual({ action: 'accept', content: { go: true } });

    const progress = peer.messages.filter((m) => m.method === 'notifications/progress');
    expect(progress.map((p) => [p.params.progressToken, p.params.progress])).toEqual([
      ['new-token', 1],
      ['new-token', 2],
    ]);
    // The upstream's log messages (over stdio it cannot say which call they belong to; there is
    // one in flight) come because the retry asked for them, though the first request did not.
    const logs = peer.messages.filter((m) => m.method === 'notifications/message');
    expect(logs.map((m) => m.params.data)).toEqual(['step 1', 'step 2']);
    expect(logs[0].params.logger).toBe('b/bridge');
    // Everything came before the answer that ends the call.
    expect(peer.messages.indexOf(progress[1])).toBeLessThan(peer.messages.indexOf(done));
    await peer.close();
  }, 60_000);

  it('cancelling the retry cancels the upstream\'s call: the upstream gets notifications/cancelled', async () => {
    const events = tempFile('bridge.jsonl');
    const peer = startRawMux(await writeConfig({ mcpServers: { b: bridge(events) } }));
    peer.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: callParams({ steps: 1, hold: true }, { progressToken: 'old-token', logLevel: 'debug' }) });
    const first = await peer.next((m) => m.id === 1);
    peer.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: callParams({ steps: 1, hold: true }, { progressToken: 'new-token' }, first.result) });
    // The upstream has its answer and works on (its progress, under the retry's token, says so).
    const step = await peer.next((m) => m.method === 'notifications/progress');
    expect(step.params).toMatchObject({ progressToken: 'new-token', progress: 1 });
    expect(peer.messages.some((m) => m.params?.progressToken === 'old-token')).toBe(false);
    peer.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2, reason: 'the user gave up' } });
    const call = readEvents(events).find((e) => e.type === 'in' && e.method === 'tools/call');
    const cancelled = await waitForEvent(events, (e) => e.type === 'in' && e.method === 'notifications/cancelled');
    expect(cancelled.params.requestId).toBe(call.id);
    await waitForEvent(events, (e) => e.type === 'aborted' && e.id === call.id);
    // A cancelled request gets no answer; the first request's log level went with it (the retry asked for none).
    await peer.request('ping', { _meta: meta() });
    expect(peer.messages.some((m) => m.id === 2)).toBe(false);
    expect(peer.messages.some((m) => m.method === 'notifications/message')).toBe(false);
    await peer.close();
  }, 60_000);
});
