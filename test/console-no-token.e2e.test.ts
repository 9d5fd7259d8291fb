// The web console's routes on a daemon WITHOUT tokens (everyone on loopback is an operator) and
// with `allowedOrigins: ["*"]` (any site passes the Origin check, as an MCP browser host may
// need): another page in the user's browser still cannot act. No browser here: the requests
// carry the headers a browser sends for such a page (Origin, Sec-Fetch-Site; a <form> or a
// `no-cors` fetch adds no other header), exactly; test/console.e2e.test.ts drives chromium.

import { request } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { estimateTokens, toolDefinitionText } from '../src/surface/tokens.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { fixture, looseSchema, runMux, tempDir, tempFile, WAIT_MS, waitFor } from './helpers/harness.js';

let d: Daemon;

/** One request with exactly these headers; resolves to its status and body. */
function raw(method: string, pathname: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: d.port, method, path: pathname, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const status = async (): Promise<any> => (await fetch(`${d.base}/status`)).json();
const restarts = async (): Promise<number> => (await status()).upstreams.find((u: any) => u.name === 'fx').restarts;

beforeAll(async () => {
  d = await startDaemon(
    {
      mcpServers: { fx: fixture({ name: 'fx' }) },
      listen: { allowedOrigins: ['*'] },
      audit: { path: tempFile('audit.jsonl') },
    },
    { MCPMUX_STATE_DIR: tempDir() },
  );
  await waitFor(async () => (await status()).upstreams[0].state === 'ready', { what: 'fx ready', timeoutMs: WAIT_MS });
}, 60_000);

afterAll(stopAllDaemons);

describe('console routes without tokens', () => {
  it("refuses another page's actions (another loopback port, any site under \"*\"); the console's own page and the CLI may act", async () => {
    const self = `127.0.0.1:${d.port}`;
    const actions = ['/status/restart?server=fx', '/status/reload', '/status/approve?server=fx&tool=echo'];
    for (const target of actions) {
      // A page on another loopback port (a local dev server): fetch(url, {method:'POST', mode:'no-cors'}).
      const otherPort = await raw('POST', target, { host: self, origin: 'http://127.0.0.1:3000', 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'no-cors' });
      expect(otherPort.status, target).toBe(403);
      expect(otherPort.body).toContain('another origin');
      // Any site, a <form method=post> (cross-site), in a browser that sends Origin only.
      expect((await raw('POST', target, { host: self, origin: 'http://evil.example', 'content-type': 'application/x-www-form-urlencoded' })).status, target).toBe(403);
      // A browser that sends no Origin and no Sec-Fetch-Site at all: still no header it could add without a preflight.
      const bare = await raw('POST', target, { host: self, 'content-type': 'text/plain' });
      expect(bare.status, target).toBe(403);
      expect(bare.body).toContain('x-mcpmux-operator');
    }
    expect(await restarts()).toBe(0);

    // The console's own page (same origin: what its script sends) acts.
    const page = { host: self, origin: `http://${self}`, 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'cors', 'x-mcpmux-operator': '1' };
    expect((await raw('POST', '/status/restart?server=fx', page)).status).toBe(202);
    await waitFor(async () => (await restarts()) === 1, { what: 'fx restarted', timeoutMs: WAIT_MS });
    const reload = await raw('POST', '/status/reload', page);
    expect(reload.status).toBe(200);
    expect(JSON.parse(reload.body)).toMatchObject({ result: 'applied', trigger: 'http' });
    // The header alone does not let another origin through.
    expect((await raw('POST', '/status/restart?server=fx', { ...page, origin: 'http://127.0.0.1:3000', 'sec-fetch-site': 'same-site' })).status).toBe(403);
    expect((await raw('POST', '/status/restart?server=fx', { host: self, origin: 'http://127.0.0.1:3000', 'x-mcpmux-operator': '1' })).status).toBe(403);
    // `mcpmux restart` (no browser) sends the header.
    const cli = await runMux(['restart', 'fx', '--url', d.base], { env: { ...process.env, MCPMUX_TOKEN: '' } });
    expect(cli.stderr).toBe('');
    expect(cli.status).toBe(0);
    await waitFor(async () => (await restarts()) === 2, { what: 'fx restarted by the CLI', timeoutMs: WAIT_MS });
  }, 60_000);

  it('keeps the audit lines (a 0600 file) from whoever reaches the port: they need an admin token', async () => {
    const res = await fetch(`${d.base}/status/audit`, { headers: { 'x-mcpmux-operator': '1' } });
    expect(res.status).toBe(403);
    expect(await res.text()).toContain('audit lines need an admin token');
  });

  it("estimates a server's tool tokens when /status asks, from the pages the catalogue holds: the sum over the tools hosts are shown", async () => {
    // The first test restarted fx: list once it is back, not while it is starting (an empty list).
    await waitFor(async () => (await status()).upstreams[0].state === 'ready', { what: 'fx ready again', timeoutMs: WAIT_MS });
    const host = new Client({ name: 'console-tokens-host', version: '1.0.0' });
    await host.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    try {
      const listed = (await host.request({ method: 'tools/list', params: {} }, looseSchema)) as { tools: object[] };
      const expected = listed.tools.reduce((sum, t) => sum + estimateTokens(toolDefinitionText(t)), 0);
      expect(expected).toBeGreaterThan(0);
      const fx = (await status()).upstreams.find((u: any) => u.name === 'fx');
      expect(fx.toolTokens).toBe(expected);
    } finally {
      await host.close();
    }
  });
});
