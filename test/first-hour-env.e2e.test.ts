// Issue 19, points 1 and 12, as a desktop host meets them: mcpmux started with the host's bare
// environment (`env -i HOME=... PATH=...`), where the variables a config names may be missing.
// A missing variable in one server's entry disables that server alone (log, /status,
// instructions, check); anywhere else it is still a config error. And only secrets are
// redacted: a folder or a word from the environment stays readable.

import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { awaitJsonLine, closeAll, exitWithin, fixture, MUX_BIN, startRawMux, tempDir, UPSTREAM_FIXTURE, waitFor, writeConfig, type ServerEntry } from './helpers/harness.js';

/** What a desktop host gives the process it starts: a home and a short PATH (with node on it). */
function desktopEnv(home: string, extra: Record<string, string> = {}): string[] {
  const vars = { HOME: home, PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`, ...extra };
  return ['-i', ...Object.entries(vars).map(([k, v]) => `${k}=${v}`)];
}

/** `env -i HOME=... PATH=... node bin/mcpmux.js ARGS` as a server entry (for startRawMux). */
function desktop(home: string, args: string[], extra?: Record<string, string>): ServerEntry {
  return { command: '/usr/bin/env', args: [...desktopEnv(home, extra), 'node', MUX_BIN, ...args] };
}

/** Runs a one-shot command the desktop way, to its end. */
function runDesktop(home: string, args: string[], extra?: Record<string, string>): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn('/usr/bin/env', [...desktopEnv(home, extra), 'node', MUX_BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve, reject) => {
    child.once('error', (err) => (clearTimeout(timer), reject(err)));
    child.once('close', (status) => (clearTimeout(timer), resolve({ status, stdout, stderr })));
  });
}

/** Three servers: one needs ${SOME_TOKEN} in its env, one ${MISSING_DIR} in its args, one nothing. */
function threeServers(): Record<string, ServerEntry> {
  const good = fixture({ name: 'good' });
  return {
    tokened: { ...fixture({ name: 'tokened' }), env: { SOME_TOKEN: '${SOME_TOKEN}' } },
    foldered: { command: process.execPath, args: [UPSTREAM_FIXTURE, JSON.stringify({ name: 'foldered' }), '${MISSING_DIR}/notes'] },
    good,
  };
}

const json = (stderr: string): any[] =>
  stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));

afterEach(closeAll);

describe('a missing variable disables only its server (issue 19, point 1)', () => {
  it('stdio, as a desktop host runs it: the good server works, the others are named with their variables', async () => {
    const home = tempDir();
    const file = await writeConfig({ mcpServers: threeServers() });
    const mux = startRawMux(desktop(home, ['stdio', '--config', file]));

    const init = await mux.initialize();
    expect(init.error).toBeUndefined();
    const instructions: string = init.result.instructions;
    expect(instructions).toContain('Server "tokened" is unavailable (not started): environment variable SOME_TOKEN is not set');
    expect(instructions).toContain('Server "foldered" is unavailable (not started): environment variable MISSING_DIR is not set');
    expect(instructions).not.toContain('"good"');

    const tools: string[] = (await mux.request('tools/list')).result.tools.map((t: any) => t.name);
    expect(tools).toContain('good__echo');
    expect(tools.filter((n) => !n.startsWith('good__'))).toEqual([]);
    const call = await mux.request('tools/call', { name: 'good__echo', arguments: { hello: 'desktop' } });
    expect(call.result.structuredContent).toEqual({ hello: 'desktop' });
    const gone = await mux.request('tools/call', { name: 'tokened__echo', arguments: {} });
    expect(gone.error ?? gone.result?.isError).toBeTruthy();

    // The log says which servers and which variables (names only), once each.
    const warned = json(mux.stderr()).filter((l) => l.level === 40 && l.missing);
    expect(warned.map((l) => [l.server, l.missing])).toEqual([
      ['tokened', ['SOME_TOKEN']],
      ['foldered', ['MISSING_DIR']],
    ]);
    expect(warned[0].msg).toMatch(/tokened.*SOME_TOKEN/);

    // A 2026-07-28 host hears the same in server/discover.
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'modern', version: '0' } };
    const modern = startRawMux(desktop(home, ['stdio', '--config', file]));
    const discover = await modern.request('server/discover', { _meta: meta });
    expect(discover.result.instructions).toContain('environment variable SOME_TOKEN is not set');
    expect(discover.result.instructions).toContain('environment variable MISSING_DIR is not set');

    expect((await mux.close()).code).toBe(0);
    await modern.close();
  }, 60_000);

  it('serve: /status and mcpmux status name them; a reload that loses or gains a variable disables or starts the server', async () => {
    const home = tempDir();
    const file = await writeConfig({ mcpServers: threeServers() });
    const child = spawn('/usr/bin/env', [...desktopEnv(home), 'node', MUX_BIN, 'serve', '--config', file, '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    const exited = new Promise<{ code: number | null }>((resolve) => child.once('exit', (code) => resolve({ code })));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
    try {
      const port = await awaitJsonLine(child.stderr, exited, (j) => (j.msg === 'listening' ? (j.port as number) : undefined), { ms: 20_000, what: 'listening', log: () => err });
      const base = `http://127.0.0.1:${port}`;
      const status = async () => (await fetch(`${base}/status`)).json() as Promise<any>;
      const upstream = async (name: string) => (await status()).upstreams.find((u: any) => u.name === name);

      // Never started: its counts are unknown (null, "-" in the table), not 0.
      expect(await upstream('tokened')).toMatchObject({ state: 'unavailable', unavailable: { missing: ['SOME_TOKEN'], reason: 'environment variable SOME_TOKEN is not set' }, tools: null, prompts: null, resources: null });
      expect(await upstream('foldered')).toMatchObject({ state: 'unavailable', unavailable: { missing: ['MISSING_DIR'] } });
      await waitFor(async () => (await upstream('good'))?.state === 'ready', { what: 'good ready' });

      const table = await runDesktop(home, ['status', '--url', base]);
      expect(table.status).toBe(0);
      expect(table.stdout).toMatch(/^tokened\s+unavailable\s+stdio\s+0\s+0\s+-\s+-\s+-\s+environment variable SOME_TOKEN is not set$/m);
      expect(table.stdout).toMatch(/^foldered\s+unavailable\s.*environment variable MISSING_DIR is not set$/m);

      const host = new Client({ name: 'http-host', version: '0' }, { capabilities: {} });
      await host.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`)));
      expect(host.getInstructions()).toContain('Server "tokened" is unavailable');
      expect((await host.listTools()).tools.map((t) => t.name).every((n) => n.startsWith('good__'))).toBe(true);

      // A reload that makes `good` need a missing variable stops it and names it, like at start.
      const servers = threeServers();
      writeFileSync(file, JSON.stringify({ mcpServers: { ...servers, good: { ...servers.good, cwd: '${GOOD_DIR}' } } }));
      child.kill('SIGHUP');
      await waitFor(async () => (await status()).lastReload?.removed?.includes('good'), { what: 'the reload applied' });
      expect((await status()).lastReload).toMatchObject({ result: 'applied', removed: ['good'], added: [] });
      expect(await upstream('good')).toMatchObject({ state: 'unavailable', unavailable: { missing: ['GOOD_DIR'] } });
      expect(json(err).filter((l) => l.level === 40 && l.server === 'good').map((l) => l.missing)).toEqual([['GOOD_DIR']]);
      await waitFor(async () => (await host.listTools()).tools.length === 0, { what: 'good tools gone' });
      // ...and back: it starts again.
      writeFileSync(file, JSON.stringify({ mcpServers: threeServers() }));
      child.kill('SIGHUP');
      await waitFor(async () => (await status()).lastReload?.added?.includes('good'), { what: 'the second reload applied' });
      expect((await status()).lastReload).toMatchObject({ result: 'applied', added: ['good'], removed: [] });
      await waitFor(async () => (await upstream('good'))?.state === 'ready', { what: 'good started again' });
      expect((await host.listTools()).tools.map((t) => t.name)).toContain('good__echo');
      // The others, still missing their variables, are not warned about again.
      expect(json(err).filter((l) => l.level === 40 && l.server === 'tokened')).toHaveLength(1);
      await host.close();
    } finally {
      child.kill('SIGTERM');
      await exitWithin(child, exited, 10_000);
    }
  }, 90_000);

  it('check lists them disabled with the reason and exits 0; --strict exits 1', async () => {
    const home = tempDir();
    const file = await writeConfig({ mcpServers: threeServers() });
    const ok = await runDesktop(home, ['check', '--config', file]);
    expect(ok.stderr).toBe('');
    expect(ok.status).toBe(0);
    expect(ok.stdout).toContain('ok (1 server(s) enabled, 2 disabled)');
    expect(ok.stdout).toContain('  tokened: disabled (environment variable SOME_TOKEN is not set)');
    expect(ok.stdout).toContain('  foldered: disabled (environment variable MISSING_DIR is not set)');

    const strict = await runDesktop(home, ['check', '--strict', '--config', file]);
    expect(strict.status).toBe(1);
    expect(strict.stdout).toContain('  tokened: disabled (environment variable SOME_TOKEN is not set)');
    expect(strict.stderr).toMatch(/--strict: 2 server\(s\) disabled for a missing environment variable: tokened, foldered/);

    // With the variables set, --strict passes.
    const set = await runDesktop(home, ['check', '--strict', '--config', file], { SOME_TOKEN: 't', MISSING_DIR: home });
    expect(set.status).toBe(0);
    expect(set.stdout).toContain('ok (3 server(s) enabled, 0 disabled)');
  }, 60_000);

  it('login refuses a server disabled for a missing variable, naming it', async () => {
    const home = tempDir();
    const file = await writeConfig({ mcpServers: { remote: { url: 'https://${REMOTE_HOST}/mcp' } } });
    const r = await runDesktop(home, ['login', 'remote', '--no-browser', '--config', file]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('server remote is disabled: environment variable REMOTE_HOST is not set');
  }, 60_000);

  it('a missing variable in listen or audit is still a config error (exit 1), in stdio and check alike', async () => {
    const home = tempDir();
    for (const [extra, at, name] of [
      [{ listen: { host: '${BIND_HOST}' } }, '/listen/host', 'BIND_HOST'],
      [{ audit: { path: '${AUDIT_DIR}/audit.jsonl' } }, '/audit/path', 'AUDIT_DIR'],
    ] as const) {
      const file = await writeConfig({ mcpServers: threeServers(), ...extra });
      for (const command of ['stdio', 'check']) {
        const r = await runDesktop(home, [command, '--config', file]);
        expect(r.status).toBe(1);
        expect(r.stderr).toContain(`${at}: environment variable ${name} is not set`);
        // Only the real error: servers missing a variable are not errors.
        expect(r.stderr).not.toContain('SOME_TOKEN');
      }
    }
  }, 60_000);
});

describe('redact secrets, not words (issue 19, point 12)', () => {
  const values = {
    HOME_DIR: '/home/desk/user-files',
    MODE: 'stdio',
    GITHUB_TOKEN: 'plain-words-not-token-shaped',
    HDR_VALUE: 'header-only-value',
    LISTED: 'listed-in-secrets',
  };

  it('folders and words stay readable in logs and the audit log; secret-named, header and listed values never appear', async () => {
    const home = tempDir();
    const audit = path.join(home, 'audit.jsonl');
    const args = [UPSTREAM_FIXTURE, JSON.stringify({ name: 'fx' }), '${HOME_DIR}/notes', '--mode', '${MODE}', '${GITHUB_TOKEN}', '${HDR_VALUE}', '${LISTED}'];
    const file = await writeConfig({
      mcpServers: {
        fx: { command: process.execPath, args },
        remote: { url: 'https://remote.example/mcp', headers: { 'X-Api': '${HDR_VALUE}' }, disabled: true },
      },
      secrets: ['LISTED'],
      audit: { path: audit, arguments: 'full' },
    });
    const mux = startRawMux(desktop(home, ['stdio', '--config', file, '--log-level', 'debug'], values));
    await mux.initialize();
    const call = await mux.request('tools/call', { name: 'fx__echo', arguments: { where: `${values.HOME_DIR}/notes`, all: Object.values(values).join(' ') } });
    expect(call.error).toBeUndefined();
    expect((await mux.close()).code).toBe(0);

    const logs = mux.stderr();
    const spawned = json(logs).find((l) => l.msg === 'spawned upstream');
    expect(spawned.args).toContain(`${values.HOME_DIR}/notes`);
    expect(spawned.args).toContain('stdio');
    expect(spawned.args.filter((a: string) => a === '[REDACTED]')).toHaveLength(3);
    const auditText = await waitFor(() => readFileSync(audit, 'utf8').includes('fx__echo') && readFileSync(audit, 'utf8'), { what: 'the audit line' });
    expect(auditText).toContain(`${values.HOME_DIR}/notes`);
    for (const text of [logs, auditText]) {
      for (const secret of [values.GITHUB_TOKEN, values.HDR_VALUE, values.LISTED]) expect(text).not.toContain(secret);
    }
  }, 60_000);

  it('config errors quote ordinary values and hide secret ones', async () => {
    const home = tempDir();
    const file = await writeConfig({
      mcpServers: {
        a: { command: 'x', era: '${MODE}' },
        b: { command: 'x', era: '${GITHUB_TOKEN}' },
        c: { command: 'x', era: '${LISTED}' },
        d: { command: 'x', prefix: 'd__${HDR_VALUE}' },
        remote: { url: 'https://remote.example/mcp', headers: { 'X-Api': '${HDR_VALUE}' } },
      },
      secrets: ['LISTED'],
    });
    const r = await runDesktop(home, ['check', '--config', file], values);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('/mcpServers/a/era: must be one of "auto", "modern", "legacy", got "stdio"');
    expect(r.stderr).toContain('/mcpServers/b/era');
    expect(r.stderr).toContain('/mcpServers/c/era');
    expect(r.stderr).toContain('/mcpServers/d/prefix');
    for (const secret of [values.GITHUB_TOKEN, values.HDR_VALUE, values.LISTED]) expect(r.stderr).not.toContain(secret);
  }, 60_000);

  it('"secrets" must be a list of variable names', async () => {
    const home = tempDir();
    for (const [secrets, message] of [
      ['GITHUB_TOKEN', '/secrets: expected array, got string'],
      [['${X}'], '/secrets/0: must be the name of an environment variable'],
      [[5], '/secrets/0: expected string, got number'],
    ] as const) {
      const r = await runDesktop(home, ['check', '--config', await writeConfig({ mcpServers: {}, secrets })]);
      expect(r.status).toBe(1);
      expect(r.stderr).toContain(message);
    }
  }, 60_000);
});
