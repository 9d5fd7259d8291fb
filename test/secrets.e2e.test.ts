// Secrets never leave mcpmux: a whole scenario with ${VAR} secrets in a server's env, args, URL
// and headers, a bearer token, and a secret argument value, then every byte mcpmux wrote — its
// log at debug level, the audit file, /metrics, /status, and every answer hosts received — is
// searched for them.

import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, expect, it, onTestFinished } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { fixture, freePort, MUX_BIN, tempDir, tempFile, waitFor, writeConfig } from './helpers/harness.js';

afterAll(stopAllDaemons);

const SECRETS = {
  SECRET_ENV: 'env-secret-91bc77',
  SECRET_ARG: 'arg-secret-7f3a21',
  SECRET_URL: 'url-secret-0d9e44',
  SECRET_HDR: 'hdr-secret-55de12',
  MUX_TOKEN: 'tok-secret-c0ffee9',
};
/** A value a host sends as a tool argument, kept out of the audit log by `redact`. */
const ARG_VALUE = 'argument-secret-3b8f6a';
/** Written into the config's args as they are (no ${VAR}), each in a shape that says "secret". */
const LITERAL_ARG = 'literal-arg-secret-e41d0c';
const LITERAL = {
  afterFlag: LITERAL_ARG, // --key VALUE
  equals: 'literal-eq-secret-77aa01', // --api-key=VALUE
  prefixed: 'ghp_literalPrefixSecret1234', // a token by its shape alone
  urlPassword: 'literal-url-pw-5521', // https://user:PW@host
  header: 'literal-hdr-secret-9f8e', // --header "Authorization: Bearer VALUE"
};

it('no secret appears in the log (debug), the audit file, /metrics, /status, check --probe, or anything hosts are told', async () => {
  const audit = tempFile('audit.jsonl');
  const deadPort = await freePort();
  const config = {
    mcpServers: {
      fx: { ...fixture({ name: 'fx' }), env: { API_KEY: '${SECRET_ENV}' } },
      broken: {
        command: 'mcpmux-no-such-command',
        args: ['--token', '${SECRET_ARG}', '--key', LITERAL.afterFlag, `--api-key=${LITERAL.equals}`, LITERAL.prefixed, `https://me:${LITERAL.urlPassword}@example.com/x`, '--header', `Authorization: Bearer ${LITERAL.header}`, '/srv/data'],
        restart: { maxRetries: 0, backoffMs: 10 },
      },
      remote: { url: `http://127.0.0.1:${deadPort}/mcp?key=\${SECRET_URL}`, headers: { authorization: 'Bearer ${SECRET_HDR}' }, restart: { maxRetries: 0, backoffMs: 10 } },
    },
    listen: { auth: { tokens: [{ client: 'ci', tokenEnv: 'MUX_TOKEN' }] } },
    audit: { path: audit, arguments: 'full', redact: ['password'] },
    logLevel: 'debug',
  };
  const file = await writeConfig(config);
  const d = await startDaemon(file, SECRETS);

  const answers: unknown[] = [];
  const client = new Client({ name: 'secrets-host', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: { authorization: `Bearer ${SECRETS.MUX_TOKEN}` } } }));
  const keep = async (p: Promise<unknown>) => answers.push(await p.catch((e: Error) => ({ error: e.message })));
  await keep(client.listTools());
  await keep(client.callTool({ name: 'fx__echo', arguments: { password: ARG_VALUE, note: 'hello' } }));
  // The two failed servers: their reasons reach the host in -31001 errors.
  await keep(client.readResource({ uri: 'broken+file:///x' }));
  await keep(client.readResource({ uri: 'remote+file:///x' }));
  await keep(client.callTool({ name: 'no_such__tool' }));
  const metrics = await (await fetch(`${d.base}/metrics`)).text();
  const status = await (await fetch(`${d.base}/status`, { headers: { authorization: `Bearer ${SECRETS.MUX_TOKEN}` } })).text();
  await client.close();
  expect((await d.stop()).code).toBe(0);

  const probe = spawnSync(process.execPath, [MUX_BIN, 'check', '--config', file, '--probe'], { env: { ...process.env, ...SECRETS }, encoding: 'utf8', timeout: 60_000 });

  const written: Record<string, string> = {
    log: d.stderr(),
    audit: readFileSync(audit, 'utf8'),
    metrics,
    status,
    answers: JSON.stringify(answers),
    'check --probe': probe.stdout + probe.stderr,
  };
  // The scenario really happened: debug logging, audited calls, reasons shown to the host.
  expect(written.log).toMatch(/"level":20/);
  expect(written.audit).toContain('"name":"fx__echo"');
  expect(written.audit).toContain('"password":"[REDACTED]"');
  expect(written.answers).toMatch(/broken.*not available/);
  expect(written['check --probe']).toMatch(/broken/);
  expect(JSON.parse(written.status).upstreams.find((u: any) => u.name === 'broken').lastError).toBeTruthy();
  // Literal arguments are no ${VAR}, but their shape says what they are: the spawn line shows
  // them masked (the rest of the command line stays readable), and nothing else shows them.
  const spawned = written.log.split('\n').find((l) => l.includes('"msg":"spawned upstream"') && l.includes('mcpmux-no-such-command'));
  expect(spawned).toContain('"--key","[REDACTED]"');
  expect(spawned).toContain('"/srv/data"');
  for (const [where, text] of Object.entries(written)) {
    for (const [shape, literal] of Object.entries(LITERAL)) expect(text.includes(literal), `${shape} literal ${literal} in ${where}`).toBe(false);
  }
  for (const [where, text] of Object.entries(written)) {
    for (const secret of [...Object.values(SECRETS), ARG_VALUE]) {
      // The secret argument value may appear only where it belongs: in the host's own answer (the echo).
      if (secret === ARG_VALUE && where === 'answers') continue;
      expect(text.includes(secret), `${secret} in ${where}`).toBe(false);
    }
  }
});

it('OAuth tokens got at run time (a stored login) are scrubbed from the log, even when the server echoes them', async () => {
  const ACCESS = 'oauth-access-secret-4b1d77';
  const REFRESH = 'oauth-refresh-secret-99ce01';
  // A server that refuses every request, quoting the Authorization header it got.
  const seen: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c)).on('end', () => {
      seen.push(String(req.headers.authorization));
      const id = (() => { try { return JSON.parse(body).id ?? null; } catch { return null; } })();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32603, message: `not for you: ${req.headers.authorization} (refresh with ${REFRESH})` } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onTestFinished(() => void server.close());
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  // What `mcpmux login` leaves behind: the login file in the state folder.
  const state = tempDir();
  mkdirSync(join(state, 'oauth'), { recursive: true });
  writeFileSync(
    join(state, 'oauth', 'remote.json'),
    JSON.stringify({ server: url, resource: url, as: { issuer: 'http://127.0.0.1:1', token_endpoint: 'http://127.0.0.1:1/token' }, client: { client_id: 'c' }, tokens: { access_token: ACCESS, refresh_token: REFRESH } }),
    { mode: 0o600 },
  );
  const d = await startDaemon({ mcpServers: { remote: { url, restart: { maxRetries: 0, backoffMs: 10 } } }, logLevel: 'debug' }, { MCPMUX_STATE_DIR: state });
  await waitFor(() => d.stderr().includes('not for you'), { what: "the server's refusal in the log" });
  expect((await d.stop()).code).toBe(0);
  // The premise: the token was sent, and the refusal quoting it reached the log.
  expect(seen).toContain(`Bearer ${ACCESS}`);
  const log = d.stderr();
  expect(log).toContain('not for you: Bearer [REDACTED]');
  expect(log.includes(ACCESS), 'access token in the log').toBe(false);
  expect(log.includes(REFRESH), 'refresh token in the log').toBe(false);
});
