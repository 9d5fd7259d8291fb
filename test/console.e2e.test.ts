// The web console (issue 24.2) in a real browser: Debian's chromium driven by playwright-core,
// against one `mcpmux serve` with tokens, tool pinning and an audit log. The page asks for the
// token, shows the daemon live (an upstream killed, then back), restarts an upstream and approves
// a held tool through its confirmation dialog; requests without the token, from another page,
// with a foreign Origin or Host are refused as the API refuses them.
//
// MCPMUX_CONSOLE_SCREENSHOT=docs/console.png writes the README's screenshot on the way.

import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { ROOT, tempDir, tempFile, WAIT_MS, waitFor, writeConfig } from './helpers/harness.js';

const CHROMIUM = '/usr/bin/chromium';
const OPS = 'ops-token-5d2c9a7e41';
const CI = 'ci-token-81f0b3c6d2';
const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');
/** A name the browser resolves to loopback: a foreign site as far as Origin and Host go. */
const FOREIGN = 'evil.example';
/** What a hostile upstream says as its error: must show as text, never become an element. */
const HOSTILE = '<img src=x onerror="window.__x=1">';

let d: Daemon;
let browser: Browser;
let page: Page;
let host: Client;
let hostTransport: StreamableHTTPClientTransport;
let other: Server;
let otherPort: number;
let auditFile: string;
let configFile: string;

const status = async (): Promise<any> => (await fetch(`${d.base}/status`, { headers: { authorization: `Bearer ${OPS}` } })).json();
const srv = async (): Promise<any> => (await status()).upstreams.find((u: any) => u.name === 'srv');
const row = (name: string) => page.locator(`#upstreams tr[data-upstream="${name}"]`);

/** A request with exactly these headers (fetch will not send a Host of our choosing). */
function raw(pathname: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: d.port, path: pathname, headers }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    });
    req.on('error', reject);
    req.end();
  });
}

/** Accepts the page's confirmation dialog (an HTML <dialog>, not window.confirm). */
async function confirm(expected: RegExp): Promise<void> {
  const dialog = page.locator('#confirm');
  await dialog.waitFor({ state: 'visible', timeout: WAIT_MS });
  await expect(page.locator('#confirm-text').textContent()).resolves.toMatch(expected);
  await page.locator('#confirm-ok').click();
  await dialog.waitFor({ state: 'hidden', timeout: WAIT_MS });
}

beforeAll(async () => {
  // Another page on this machine (another origin): a site the user has open beside the console.
  // Its /mcp answers 500 with a JSON-RPC error whose message is markup: the upstream `evil`'s
  // last error.
  other = createServer((req, res) => {
    if (req.url?.startsWith('/mcp')) {
      res.writeHead(500, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: HOSTILE } }));
    }
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><title>other</title>');
  });
  await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
  otherPort = (other.address() as AddressInfo).port;
  auditFile = tempFile('audit.jsonl');
  const config = {
      mcpServers: {
        // Back after 4 s when it dies: twice the page's poll, so the page sees it down even when loaded.
        srv: { command: process.execPath, args: [BAD, '{}'], pinTools: true, restart: { maxRetries: 5, backoffMs: 4000 } },
        evil: { url: `http://127.0.0.1:${otherPort}/mcp`, restart: { maxRetries: 0 } },
      },
      listen: { auth: { tokens: [{ client: 'ops', tokenEnv: 'CONSOLE_OPS_TOKEN', admin: true }, { client: 'ci', tokenEnv: 'CONSOLE_CI_TOKEN' }] } },
      audit: { path: auditFile, arguments: 'redacted' },
      // One call of ci's to srv a minute: after one, its bucket is empty (near its limit).
      rateLimits: [{ client: 'ci', server: 'srv', tool: '*', perMinute: 1, burst: 1 }],
  };
  configFile = await writeConfig(config);
  d = await startDaemon(
    configFile,
    { CONSOLE_OPS_TOKEN: OPS, CONSOLE_CI_TOKEN: CI, MCPMUX_STATE_DIR: tempDir() },
  );
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    // Each launch has a fresh, temporary profile. FOREIGN resolves to loopback, nothing else does.
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', `--host-resolver-rules=MAP ${FOREIGN} 127.0.0.1`],
  });
  page = await browser.newPage({ viewport: { width: 1200, height: 860 } });
  host = new Client({ name: 'console-test-host', version: '1.0.0' });
  hostTransport = new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: { authorization: `Bearer ${CI}` } } });
  await host.connect(hostTransport);
}, 90_000);

afterAll(async () => {
  await host?.close().catch(() => {});
  await browser?.close();
  await new Promise((resolve) => (other ? other.close(resolve) : resolve(undefined)));
  await stopAllDaemons();
});

describe('web console', () => {
  it('refuses what the API refuses: no token, a page of another origin without a bearer header, a foreign Origin or Host', async () => {
    // No token: the data and the actions are refused; the page itself holds nothing.
    expect((await fetch(`${d.base}/status`)).status).toBe(401);
    expect((await fetch(`${d.base}/status/audit`)).status).toBe(401);
    expect((await fetch(`${d.base}/status/restart?server=srv`, { method: 'POST' })).status).toBe(401);
    expect((await fetch(`${d.base}/status/approve?server=srv&tool=misbehave`, { method: 'POST' })).status).toBe(401);
    expect((await fetch(`${d.base}/status/reload`, { method: 'POST' })).status).toBe(401);
    // A client that is no admin may look, not act (nor read the audit log).
    const ci = { authorization: `Bearer ${CI}` };
    expect((await fetch(`${d.base}/status`, { headers: ci })).status).toBe(200);
    expect((await fetch(`${d.base}/status/audit`, { headers: ci })).status).toBe(403);
    expect((await fetch(`${d.base}/status/restart?server=srv`, { method: 'POST', headers: ci })).status).toBe(403);
    expect((await fetch(`${d.base}/status/reload`, { method: 'POST', headers: ci })).status).toBe(403);
    // DNS rebinding and cross-site requests: a foreign Host or Origin, even with the right token.
    expect(await raw('/ui', { host: `${FOREIGN}:${d.port}` })).toBe(403);
    expect(await raw('/status', { host: `${FOREIGN}:${d.port}`, authorization: `Bearer ${OPS}` })).toBe(403);
    expect(await raw('/ui', { origin: `http://${FOREIGN}` })).toBe(403);
    expect(await raw('/status', { origin: `http://${FOREIGN}`, authorization: `Bearer ${OPS}` })).toBe(403);

    // In the browser: another page makes the user's browser send requests to the daemon.
    // Without the console's bearer header a read gets nothing (401); an action from another
    // origin, even another loopback port that listen.allowedOrigins lets through, is refused
    // before the token is looked at (403: Sec-Fetch-Site / Origin).
    const refusedFrom = async (origin: string, post: number): Promise<void> => {
      const p = await browser.newPage();
      await p.goto(`${origin}/`);
      for (const [method, target] of [['GET', '/status'], ['POST', '/status/restart?server=srv'], ['POST', '/status/reload']] as const) {
        const seen = p.waitForResponse((r) => r.url() === `${d.base}${target}`, { timeout: WAIT_MS });
        await p.evaluate(([m, url]) => fetch(url, { method: m, mode: 'no-cors', credentials: 'include' }).then(() => {}, () => {}), [method, `${d.base}${target}`]);
        expect((await seen).status(), `${method} ${target} from ${origin}`).toBe(method === 'POST' ? post : 401);
      }
      // The browser opened on the daemon under a foreign name (rebinding): refused too.
      const rebound = await p.goto(`http://${FOREIGN}:${d.port}/ui`);
      expect(rebound?.status()).toBe(403);
      await p.close();
    };
    await refusedFrom(`http://127.0.0.1:${otherPort}`, 403);
    await refusedFrom(`http://${FOREIGN}:${otherPort}`, 403);
    expect((await srv()).restarts).toBe(0);
  }, 90_000);

  it('loads after the token is entered once, kept in sessionStorage (never a cookie or the URL), with strict headers', async () => {
    const res = await page.goto(`${d.base}/ui`);
    const h = res!.headers();
    const strict = (h: Record<string, string>): void => {
      expect(h['content-security-policy']).toBe("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'; require-trusted-types-for 'script'");
      expect(h['x-content-type-options']).toBe('nosniff');
      expect(h['referrer-policy']).toBe('no-referrer');
      expect(h['cache-control']).toBe('no-store');
      expect(h['cross-origin-opener-policy']).toBe('same-origin');
      expect(h['cross-origin-resource-policy']).toBe('same-origin');
    };
    strict(h);
    for (const asset of ['/ui/console.js', '/ui/console.css']) strict(Object.fromEntries((await fetch(`${d.base}${asset}`)).headers));
    // The JSON answers carry upstream-controlled strings: never sniffed as anything else.
    expect((await fetch(`${d.base}/status`, { headers: { authorization: `Bearer ${OPS}` } })).headers.get('x-content-type-options')).toBe('nosniff');
    // No token yet: the page asks for one and shows nothing of the daemon.
    await page.locator('#login').waitFor({ state: 'visible', timeout: WAIT_MS });
    expect(await page.locator('#main').isHidden()).toBe(true);
    await page.locator('#token').fill('wrong-token');
    await page.locator('#signin').click();
    await page.locator('#login-error').getByText('refused').waitFor({ timeout: WAIT_MS });
    await page.locator('#token').fill(OPS);
    await page.locator('#signin').click();
    await row('srv').locator('td.state').getByText('ready', { exact: true }).waitFor({ timeout: WAIT_MS });
    expect(await page.evaluate(() => [sessionStorage.getItem('mcpmux.console.token'), document.cookie, location.href])).toEqual([OPS, '', `${d.base}/ui`]);
    const cookies = await page.context().cookies();
    expect(cookies).toEqual([]);
    // The host's session is listed with its client and era, its id cut to 8 characters: the
    // full Streamable HTTP session id is nowhere in /status.
    const session = page.locator('#sessions tbody tr').filter({ hasText: 'ci' }).filter({ hasText: 'legacy' });
    await session.waitFor({ timeout: WAIT_MS });
    const full = hostTransport.sessionId!;
    expect(full.length).toBeGreaterThan(8);
    await expect(session.locator('td').first().textContent()).resolves.toMatch(/^[^…]{8}…$/);
    expect(JSON.stringify(await status())).not.toContain(full);
    // A hostile upstream's error is shown as the text it is: no element made of it, no script run.
    const evil = row('evil').locator('td.wrap');
    await evil.getByText(HOSTILE, { exact: false }).waitFor({ timeout: WAIT_MS });
    expect(await page.locator('#upstreams img, #main img').count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { __x?: number }).__x)).toBeUndefined();
  }, 90_000);

  it('shows an upstream going down and coming back, live', async () => {
    const before = await srv();
    expect(before.state).toBe('ready');
    await row('srv').locator('td.pid').getByText(String(before.pid), { exact: true }).waitFor({ timeout: WAIT_MS });
    process.kill(before.pid, 'SIGKILL');
    // Down (failed, waiting for its backoff), then up again with a new child: no page reload.
    await page.locator('#upstreams tr[data-upstream="srv"]:not([data-state="ready"])').waitFor({ timeout: WAIT_MS });
    await page.locator('#upstreams tr[data-upstream="srv"][data-state="ready"]').waitFor({ timeout: WAIT_MS });
    const after = await srv();
    expect(after.pid).not.toBe(before.pid);
    await row('srv').locator('td.pid').getByText(String(after.pid), { exact: true }).waitFor({ timeout: WAIT_MS });
  }, 90_000);

  it('restarts an upstream from its button, after the confirmation, and the audit lines show who did', async () => {
    const before = await srv();
    // Cancelled: nothing is asked of the daemon.
    await row('srv').getByRole('button', { name: 'Restart' }).click();
    await page.locator('#confirm').waitFor({ state: 'visible', timeout: WAIT_MS });
    await page.locator('#confirm-cancel').click();
    await page.locator('#confirm').waitFor({ state: 'hidden', timeout: WAIT_MS });
    await page.locator('body[data-updated]').waitFor({ timeout: WAIT_MS });
    expect((await srv()).restarts).toBe(before.restarts);
    await row('srv').getByRole('button', { name: 'Restart' }).click();
    await confirm(/Restart upstream srv/);
    await row('srv').locator('td.restarts').getByText(String(before.restarts + 1), { exact: true }).waitFor({ timeout: WAIT_MS });
    await page.locator('#upstreams tr[data-upstream="srv"][data-state="ready"]').waitFor({ timeout: WAIT_MS });
    expect((await srv()).pid).not.toBe(before.pid);
    await page.locator('#audit li').filter({ hasText: '"client":"ops","action":"restart","server":"srv","outcome":"ok"' }).waitFor({ timeout: WAIT_MS });
  }, 90_000);

  it('approves a tool held by pinning from its button: hosts see it again', async () => {
    const names = async () => (await host.listTools()).tools.map((t) => t.name);
    expect(await names()).toContain('srv__misbehave');
    // srv's pages are not cached (no listChanged): its tools are estimated in a window as they are shown.
    expect((await srv()).toolTokens).toBeGreaterThan(0);
    // A rug pull: the tool's definition changes; the next listing holds it.
    await host.callTool({ name: 'srv__misbehave', arguments: { mode: 'rug-pull' } });
    await waitFor(async () => !(await names()).includes('srv__misbehave'), { what: 'the changed tool held', timeoutMs: WAIT_MS });
    const held = page.locator('#held tr[data-held="srv/misbehave"]');
    await held.waitFor({ timeout: WAIT_MS });
    // That call emptied ci's bucket for srv's misbehave: shown as near its limit.
    await page.locator('#limits tbody tr').filter({ hasText: 'ci' }).filter({ hasText: 'misbehave' }).waitFor({ timeout: WAIT_MS });
    await expect(held.textContent()).resolves.toContain('description, inputSchema');
    // The new description is shown, as text: what the operator approves.
    await expect(held.locator('td.description').textContent()).resolves.toBe('Now also reads ~/.ssh and sends it along');
    // An approval of another definition than the one held now (it changed again since it was shown): 409, still held.
    const ops = { authorization: `Bearer ${OPS}` };
    const approveAs = (q: string, headers: Record<string, string> = ops) => fetch(`${d.base}/status/approve?${q}`, { method: 'POST', headers });
    const shown = (await status()).held.find((h: any) => h.tool === 'misbehave');
    expect(shown.fingerprint).toMatch(/^[0-9a-f]{16}$/);
    const stale = await approveAs('server=srv&tool=misbehave&fingerprint=0123456789abcdef');
    expect(stale.status).toBe(409);
    expect(await stale.text()).toContain('changed again');
    expect((await approveAs('server=srv&tool=misbehave', { authorization: `Bearer ${CI}` })).status).toBe(403);
    expect((await approveAs('server=srv&tool=nothing-held')).status).toBe(404);
    expect((await approveAs('server=srv')).status).toBe(400);
    expect((await status()).held.map((h: any) => h.tool)).toEqual(['misbehave']);
    if (process.env.MCPMUX_CONSOLE_SCREENSHOT) await page.screenshot({ path: path.resolve(ROOT, process.env.MCPMUX_CONSOLE_SCREENSHOT), fullPage: true });
    await held.getByRole('button', { name: 'Approve' }).click();
    await confirm(/Approve .*srv\/misbehave/);
    await page.locator('#held-none').waitFor({ state: 'visible', timeout: WAIT_MS });
    await waitFor(async () => (await names()).includes('srv__misbehave'), { what: 'the approved tool listed again', timeoutMs: WAIT_MS });
    await page.locator('#audit li').filter({ hasText: '"action":"approve","server":"srv","tool":"misbehave","outcome":"ok"' }).waitFor({ timeout: WAIT_MS });
    // The console's audit lines are the file's, byte for byte: redacted as the file is.
    await page.locator('#audit li').filter({ hasText: '"method":"tools/call"' }).filter({ hasText: '"arguments":{"mode":"[REDACTED]"}' }).waitFor({ timeout: WAIT_MS });
    expect(await page.locator('#audit').textContent()).not.toContain('rug-pull');
    const { lines } = (await (await fetch(`${d.base}/status/audit`, { headers: { authorization: `Bearer ${OPS}` } })).json()) as { lines: string[] };
    const inFile = await waitFor(() => {
      const text = readFileSync(auditFile, 'utf8');
      return text.includes(lines.at(-1)!) && text.split('\n');
    }, { what: 'the last ring line in the file', timeoutMs: WAIT_MS });
    expect(inFile).toEqual(expect.arrayContaining(lines));
  }, 90_000);

  it("shows a client that is no admin only its own sessions and buckets", async () => {
    const opsHost = new Client({ name: 'console-ops-host', version: '1.0.0' });
    await opsHost.connect(new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: { authorization: `Bearer ${OPS}` } } }));
    try {
      const asCi = await (await fetch(`${d.base}/status`, { headers: { authorization: `Bearer ${CI}` } })).json();
      expect(asCi.sessionList.list.map((x: any) => x.client)).toEqual(['ci']);
      expect(asCi.rateLimits.near.length).toBeGreaterThan(0);
      expect(asCi.rateLimits.near.every((b: any) => b.client === 'ci')).toBe(true);
      const asOps = await status();
      expect(asOps.sessionList.list.map((x: any) => x.client).sort()).toEqual(['ci', 'ops']);
    } finally {
      await opsHost.close();
    }
  }, 90_000);

  it('reloads from its button; a reload that redacts otherwise clears the audit lines kept; ?last= bounds them', async () => {
    const ops = { authorization: `Bearer ${OPS}` };
    const audit = async (q = ''): Promise<string[]> => ((await (await fetch(`${d.base}/status/audit${q}`, { headers: ops })).json()) as { lines: string[] }).lines;
    expect(await audit('?last=2')).toHaveLength(2);
    expect((await fetch(`${d.base}/status/audit?last=lots`, { headers: ops })).status).toBe(400);
    expect((await audit()).length).toBeLessThanOrEqual(50);
    // Full arguments from now on (and no rate limit for ci), by the page's Reload button.
    const written = JSON.parse(readFileSync(configFile, 'utf8'));
    writeFileSync(configFile, JSON.stringify({ ...written, audit: { path: auditFile, arguments: 'full' }, rateLimits: [] }));
    await page.locator('#reload').click();
    await confirm(/Reload the config/);
    await page.locator('#notice').getByText('config reloaded').waitFor({ timeout: WAIT_MS });
    expect((await status()).lastReload).toMatchObject({ result: 'applied', trigger: 'http' });
    await page.locator('#audit li').filter({ hasText: '"client":"ops","action":"reload"' }).filter({ hasText: '"outcome":"ok"' }).waitFor({ timeout: WAIT_MS });
    await host.callTool({ name: 'srv__misbehave', arguments: { mode: 'ok', note: 'marker-7f3e' } });
    await waitFor(async () => (await audit()).some((l) => l.includes('marker-7f3e')), { what: 'the full argument in the audit lines', timeoutMs: WAIT_MS });
    // Back to redacted: the line with the value is no longer served (the file keeps it: it was written under "full").
    writeFileSync(configFile, JSON.stringify(written));
    const r = await fetch(`${d.base}/status/reload`, { method: 'POST', headers: ops });
    expect(await r.json()).toMatchObject({ result: 'applied', trigger: 'http' });
    expect((await audit('?last=200')).join('\n')).not.toContain('marker-7f3e');
  }, 90_000);
});
