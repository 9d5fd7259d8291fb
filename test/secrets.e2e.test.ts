// Secrets never leave mcpmux: a whole scenario with ${VAR} secrets in a server's env, args, URL
// and headers, a bearer token, and a secret argument value, then every byte mcpmux wrote — its
// log at debug level, the audit file, /metrics, /status, and every answer hosts received — is
// searched for them.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { fixture, freePort, MUX_BIN, tempFile, writeConfig } from './helpers/harness.js';

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
/** Written into the config as it is (no ${VAR}): only leaving the argument list out keeps it from hosts. */
const LITERAL_ARG = 'literal-arg-secret-e41d0c';

it('no secret appears in the log (debug), the audit file, /metrics, /status, check --probe, or anything hosts are told', async () => {
  const audit = tempFile('audit.jsonl');
  const deadPort = await freePort();
  const config = {
    mcpServers: {
      fx: { ...fixture({ name: 'fx' }), env: { API_KEY: '${SECRET_ENV}' } },
      broken: { command: 'mcpmux-no-such-command', args: ['--token', '${SECRET_ARG}', '--key', LITERAL_ARG], restart: { maxRetries: 0, backoffMs: 10 } },
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
  // The literal argument is no ${VAR}, so no scrubber knows it: the log may hold the command
  // line (it is the admin's own file); what hosts and scrapers read must not.
  for (const where of ['metrics', 'status', 'answers', 'audit', 'check --probe']) expect(written[where]!.includes(LITERAL_ARG), `${LITERAL_ARG} in ${where}`).toBe(false);
  for (const [where, text] of Object.entries(written)) {
    for (const secret of [...Object.values(SECRETS), ARG_VALUE]) {
      // The secret argument value may appear only where it belongs: in the host's own answer (the echo).
      if (secret === ARG_VALUE && where === 'answers') continue;
      expect(text.includes(secret), `${secret} in ${where}`).toBe(false);
    }
  }
});
