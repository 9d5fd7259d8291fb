// Where a shared upstream's log messages go (issue 18, item 11): what a server logs during one
// client's call is that client's, not every session's, unless its config says
// `"logs": "broadcast"`. Two clients with their own tokens on `mcpmux serve`, one shared stdio
// upstream that logs 50 lines during a call.

import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { ROOT, waitFor } from './helpers/harness.js';

afterAll(stopAllDaemons);
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => void (await Promise.allSettled(cleanups.splice(0).map((f) => f()))));

const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');
const TOKENS = { MUX_T_ALICE: 'token-alice-1', MUX_T_BOB: 'token-bob-2' };

async function daemon(logs?: 'broadcast'): Promise<Daemon> {
  return startDaemon(
    {
      mcpServers: { loud: { command: process.execPath, args: [BAD, '{}'], ...(logs && { logs }) } },
      listen: { auth: { tokens: [{ client: 'alice', tokenEnv: 'MUX_T_ALICE' }, { client: 'bob', tokenEnv: 'MUX_T_BOB' }] } },
    },
    TOKENS,
  );
}

/** A host with its own token, collecting the text of every log message it hears. */
async function host(d: Daemon, token: string): Promise<{ client: Client; lines: string[] }> {
  const lines: string[] = [];
  const client = new Client({ name: 'log-host', version: '0.0.0' });
  client.fallbackNotificationHandler = async (n) => {
    if (n.method === 'notifications/message') lines.push(String((n.params as { data?: unknown }).data));
  };
  await client.connect(new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  cleanups.push(() => client.close());
  return { client, lines };
}

const flood = (c: Client, tag: string, n: number) => c.callTool({ name: 'loud__misbehave', arguments: { mode: 'notify-flood', n, tag } });
const tagged = (lines: string[], tag: string) => lines.filter((l) => l.startsWith(`${tag} `)).length;

describe('a shared upstream\'s log messages', () => {
  it('go to the client whose call they came with: bob hears none of the 50 lines logged during alice\'s call', async () => {
    const d = await daemon();
    const alice = await host(d, TOKENS.MUX_T_ALICE);
    const bob = await host(d, TOKENS.MUX_T_BOB);
    await flood(alice.client, 'alice', 50);
    await waitFor(() => tagged(alice.lines, 'alice') === 50, { what: "alice's 50 lines" });
    // Bob's own line comes down his stream after anything queued for him before it.
    await flood(bob.client, 'bob', 1);
    await waitFor(() => tagged(bob.lines, 'bob') === 1, { what: "bob's own line" });
    expect(tagged(bob.lines, 'alice')).toBe(0);
    expect(tagged(alice.lines, 'bob')).toBe(0);
    await d.stop();
  }, 60_000);

  it('with "logs": "broadcast" reach every session', async () => {
    const d = await daemon('broadcast');
    const alice = await host(d, TOKENS.MUX_T_ALICE);
    const bob = await host(d, TOKENS.MUX_T_BOB);
    await flood(alice.client, 'alice', 50);
    await waitFor(() => tagged(alice.lines, 'alice') === 50 && tagged(bob.lines, 'alice') === 50, { what: 'the 50 lines at both' });
    await d.stop();
  }, 60_000);
});
