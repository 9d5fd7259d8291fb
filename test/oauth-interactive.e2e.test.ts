// The desktop login that opens itself (issue 22, point 5): under `mcpmux stdio`, an upstream
// that needs a login (401) or more scope (403 insufficient_scope) opens the browser itself
// ($BROWSER: a recorder that counts its openings, then completes the flow or leaves it), the
// host's call waits for the login and is answered; at most one opening a minute; a step-up
// opens again at once and the call is retried; `interactive: false` and `serve` never open.
// Against the real OAuth fixture (test/fixtures/oauth-upstream.mjs, with a step-up tool).

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { awaitJsonLine, closeAll, readEvents, ROOT, startMux, startRawMux, tempDir, tempFile, waitFor, WAIT_MS, writeConfig } from './helpers/harness.js';

const OAUTH = path.join(ROOT, 'test/fixtures/oauth-upstream.mjs');
const RECORDER = path.join(ROOT, 'test/fixtures/recording-browser.mjs');

let server: ChildProcess;
let url: string;
let events: string;

beforeAll(async () => {
  events = tempFile('oauth-interactive.jsonl');
  server = spawn(process.execPath, [OAUTH, JSON.stringify({ events, stepUp: true })], { stdio: ['pipe', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  url = await awaitJsonLine(server.stdout!, exited, (j) => j.url as string | undefined, { ms: 15_000, what: 'the OAuth fixture URL', log: () => '' });
});

afterEach(async () => {
  await closeAll();
  await stopAllDaemons();
});

afterAll(() => {
  server?.kill('SIGKILL');
});

/** A fresh state folder and browser recorder; `mode`: what the "person" does with the window. */
function desktop(mode: 'complete' | `complete-after-${number}` | 'ignore', extra: Record<string, string> = {}) {
  const log = tempFile('browser.jsonl');
  return {
    log,
    opened: (): { t: number; url: string }[] => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []),
    env: { MCPMUX_STATE_DIR: tempDir(), BROWSER: `${process.execPath} ${RECORDER} ${log} ${mode}`, ...extra },
  };
}

const text = (r: unknown) => ((r as { content: { text: string }[] }).content[0]!.text);
const message = (p: Promise<unknown>) => p.then(() => 'answered', (e: Error) => e.message);

describe('mcpmux stdio: the login opens itself', () => {
  it('holds a call until the login lands and answers it; a step-up opens again at once and the call is retried', async () => {
    // The "person" takes a moment: the call is already waiting when the login lands.
    const d = desktop('complete-after-800');
    const config = await writeConfig({ mcpServers: { secure: { url } } });
    const mux = await startMux(config, { env: d.env });
    // The host is told tools exist (they come with list_changed once the login lands), not an empty server.
    expect(mux.client.getServerCapabilities()?.tools).toEqual({ listChanged: true });
    const t0 = performance.now();
    // Never listed: known by its server's prefix, held for the login, then found and called.
    const who = await mux.client.callTool({ name: 'secure__whoami', arguments: {} });
    expect(text(who)).toMatch(/^[0-9a-f-]{36}$/);
    expect(performance.now() - t0).toBeLessThan(WAIT_MS);
    expect(d.opened()).toHaveLength(1);
    expect(d.opened()[0]!.url).toMatch(/code_challenge_method=S256/);
    expect(mux.stderr()).toMatch(/server secure needs a login: opening the browser to log in/);
    expect(mux.stderr()).toMatch(/logged in to secure/);
    // Now listed too.
    expect((await mux.client.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(['secure__whoami', 'secure__admin']));

    // Step-up: the server wants mcp:admin; the browser opens again at once, the call is retried once and answered.
    const admin = await mux.client.callTool({ name: 'secure__admin', arguments: {} });
    expect(text(admin)).toBe('admin with mcp:tools mcp:admin');
    expect(d.opened()).toHaveLength(2);
    expect(d.opened()[1]!.url).toMatch(/scope=mcp%3Atools(\+|%20)mcp%3Aadmin/);
    expect(readEvents(events).filter((e) => e.auth === 'insufficient_scope')).toHaveLength(1);
    // The token with the wider scope serves the plain tool as well; no other opening.
    expect(text(await mux.client.callTool({ name: 'secure__whoami', arguments: {} }))).toMatch(/^[0-9a-f-]{36}$/);
    expect(d.opened()).toHaveLength(2);
  }, 60_000);

  it('opens at most once a minute (MCPMUX_LOGIN_REOPEN_MS shortens it here); a wait that runs out says the browser is open', async () => {
    const d = desktop('ignore', { MCPMUX_LOGIN_REOPEN_MS: '3000' });
    const config = await writeConfig({ mcpServers: { secure: { url, oauth: { interactiveWaitMs: 300 } } } });
    const mux = await startMux(config, { env: d.env });
    await waitFor(() => d.opened().length === 1, { what: 'the browser opened at start' });
    // A list does not wait for the login: the other servers' items now, this one's with list_changed later.
    expect((await mux.client.listTools()).tools.map((t) => t.name)).toEqual([]);
    expect(mux.client.getServerCapabilities()?.tools).toEqual({ listChanged: true });
    const call = () => message(mux.client.callTool({ name: 'secure__whoami', arguments: {} }));
    // The login is under way (the window left open): each call waits its 300 ms, then fails saying so.
    for (let i = 0; i < 3; i++) {
      const m = await call();
      expect(m).toMatch(/server "secure", which is not available: needs a login: run mcpmux login secure; a browser window is open to log in/);
    }
    expect(d.opened()).toHaveLength(1);
    // Past the minute (3 s here), a call opens it once more: never more often than that.
    await waitFor(async () => (await call(), d.opened().length === 2), { what: 'a second opening after the minute', timeoutMs: WAIT_MS });
    const [first, second] = d.opened();
    // (Stamped by the recorder as it starts: a process start's jitter apart from mcpmux's clock.)
    expect(second!.t - first!.t).toBeGreaterThan(2500);
    expect(d.opened()).toHaveLength(2);
  }, 60_000);

  it('a host cancelling its call ends the wait', async () => {
    const d = desktop('ignore');
    // One request in flight per session: a held call takes the slot until its wait ends.
    const config = await writeConfig({ mcpServers: { secure: { url, oauth: { interactiveWaitMs: 60_000 } } }, limits: { maxInFlightPerSession: 1 } });
    const raw = startRawMux(config, { env: d.env });
    await raw.initialize();
    await waitFor(() => d.opened().length === 1, { what: 'the browser opened at start' });
    raw.send({ jsonrpc: '2.0', id: 'held', method: 'tools/call', params: { name: 'secure__whoami', arguments: {} } });
    await waitFor(async () => /Too many requests in flight/.test((await raw.request('ping')).error?.message ?? ''), { what: 'the call held' });
    raw.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'held', reason: 'the person gave up' } });
    await waitFor(async () => (await raw.request('ping')).result !== undefined, { what: 'the slot free again', timeoutMs: 5000 });
    // A cancelled request gets no answer; the browser did not open again.
    expect(raw.messages.some((m) => m.id === 'held')).toBe(false);
    expect(d.opened()).toHaveLength(1);
  }, 60_000);

  it('"interactive": false never opens: the call fails at once with run mcpmux login', async () => {
    const d = desktop('complete');
    const config = await writeConfig({ mcpServers: { secure: { url, oauth: { interactive: false } } } });
    const mux = await startMux(config, { env: d.env });
    await waitFor(async () => /needs a login/.test(await message(mux.client.callTool({ name: 'secure__whoami', arguments: {} }))), { what: 'needs-login' });
    const t0 = performance.now();
    const m = await message(mux.client.callTool({ name: 'secure__whoami', arguments: {} }));
    expect(m).toMatch(/needs a login: run mcpmux login secure$/);
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(mux.stderr()).not.toMatch(/opening the browser/);
    expect(d.opened()).toHaveLength(0);
  }, 60_000);

  it('serve never opens a browser, interactive or not', async () => {
    const d = desktop('complete');
    const config = await writeConfig({ mcpServers: { secure: { url, oauth: { interactive: true } } } });
    const daemon = await startDaemon(config, d.env);
    await waitFor(async () => (await (await fetch(`${daemon.base}/status`)).json()).upstreams[0].state === 'needs-login', { what: 'needs-login' });
    const host = new Client({ name: 'host', version: '0' });
    await host.connect(new StreamableHTTPClientTransport(new URL(daemon.url)));
    expect(await message(host.callTool({ name: 'secure__whoami', arguments: {} }))).toMatch(/needs a login: run mcpmux login secure$/);
    await host.close();
    expect(daemon.stderr()).not.toMatch(/opening the browser/);
    expect(d.opened()).toHaveLength(0);
  }, 60_000);
});
