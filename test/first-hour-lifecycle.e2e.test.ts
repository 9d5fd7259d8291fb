// Issue 19, points 9 and 11, through the real binary: a stdio host that closes mcpmux (the SDK's
// StdioClientTransport, as Inspector does) sees it exit 0 by itself, every child gone, before the
// SDK's own SIGTERM; a signal during that stop still ends in 0; and a server that cannot start
// says why: its own last stderr lines in `check --probe`, /status and `mcpmux status`, a missing
// command at once (never retried), and a port in use before any server is spawned.

import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer, type ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterEach, describe, expect, it } from 'vitest';
import type { StdioServerConfig } from '../src/config/types.js';
import { createLogger } from '../src/observe/logger.js';
import { execaLoaded, spawnChild } from '../src/upstream/child.js';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { closeAll, isAlive, MUX_BIN, readEvents, ROOT, startRawMux, tempDir, tempFile, waitFor, waitForEvent, writeConfig } from './helpers/harness.js';

const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');
const bad = (opts: object) => ({ command: process.execPath, args: [BAD, JSON.stringify(opts)] });

type Exit = { code: number | null; signal: NodeJS.Signals | null };
const running = new Set<ChildProcess>();
const servers = new Set<Server>();
const httpServers = new Set<HttpServer>();

afterEach(async () => {
  for (const c of running) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  running.clear();
  for (const s of servers) s.close();
  servers.clear();
  for (const s of httpServers) s.closeAllConnections(), s.close();
  httpServers.clear();
  await closeAll();
  await stopAllDaemons();
});

/** The pids a fixture with `pidFile` wrote, once there are `n`. */
const pidsIn = (file: string, n: number) =>
  waitFor(() => {
    const pids = existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number) : [];
    return pids.length >= n ? pids : undefined;
  }, { what: `${n} pids in ${file}` });

/** Runs `mcpmux ARGS` to its end with a desktop's bare environment (plus `env`). */
function mcpmux(args: string[], env: Record<string, string> = {}): Promise<Exit & { stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [MUX_BIN, ...args], { env: { HOME: tempDir(), PATH: '/usr/bin:/bin', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, signal, stdout, stderr });
    }),
  );
}

/**
 * `mcpmux stdio` under the SDK's own stdio client, as Inspector runs it: the client, the mcpmux
 * process (the transport's, for its exit and whether the SDK had to signal it) and its stderr.
 */
async function underSdkHost(config: string) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [MUX_BIN, 'stdio', '--config', config],
    env: { HOME: tempDir(), PATH: '/usr/bin:/bin' },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr!.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const client = new Client({ name: 'inspector-like', version: '0.0.0' });
  await client.connect(transport);
  // The SDK forgets its process in close(): kept here to see how it ended.
  const proc = (transport as unknown as { _process: ChildProcess })._process;
  running.add(proc);
  const exited = new Promise<Exit>((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  return { client, proc, exited, stderr: () => stderr };
}

describe('stdio: the host closes, mcpmux stops its children at once and exits 0 (issue 19, point 9)', () => {
  it('client.close() as Inspector does: exit code 0 and no signal, before the SDK SIGTERMs it; no child left', async () => {
    const pidFile = tempFile('pids');
    const lifeLog = tempFile('life.jsonl');
    const config = await writeConfig({
      mcpServers: {
        // Exits when its stdin ends, as the spec asks.
        polite: bad({ name: 'polite', pidFile, lifeLog }),
        // Ignores its stdin's end: needs SIGTERM.
        deaf: bad({ name: 'deaf', pidFile, lifeLog, ignoreEof: true }),
        // Ignores SIGTERM too: needs SIGKILL.
        stubborn: bad({ name: 'stubborn', pidFile, lifeLog, ignoreEof: true, ignoreTerm: true }),
        // The host session's own copy, stopped when the session ends (before the shutdown).
        mine: { ...bad({ name: 'mine', pidFile, lifeLog, ignoreEof: true, ignoreTerm: true }), sharing: 'session' },
      },
    });
    const host = await underSdkHost(config);
    expect((await host.client.listTools()).tools.map((t) => t.name).sort()).toEqual(['deaf__misbehave', 'mine__misbehave', 'polite__misbehave', 'stubborn__misbehave']);
    const pids = await pidsIn(pidFile, 4);

    await host.client.close();
    const exit = await host.exited;
    expect(exit, host.stderr()).toEqual({ code: 0, signal: null });
    // The SDK signals only a process still running 2 s after it ended its stdin: it never had to.
    expect(host.proc.killed, 'the SDK had to SIGTERM mcpmux').toBe(false);
    expect(host.stderr()).not.toContain('second signal');
    expect(host.stderr()).toContain('"why":"host closed the connection"');
    // Each child was stopped (the stubborn one by SIGKILL) before mcpmux exited.
    expect(pids.filter(isAlive), 'children alive after mcpmux exited').toEqual([]);
    const life = readEvents(lifeLog);
    expect(life.filter((e) => e.event === 'term').map((e) => e.name).sort()).toEqual(['deaf', 'mine', 'stubborn']);
  });

  it('three upstreams that ignore stdin EOF are stopped together, not one after the other', async () => {
    const pidFile = tempFile('pids');
    const lifeLog = tempFile('life.jsonl');
    const config = await writeConfig({
      mcpServers: Object.fromEntries(['a', 'b', 'c'].map((n) => [n, bad({ name: n, pidFile, lifeLog, ignoreEof: true })])),
    });
    const host = await underSdkHost(config);
    const pids = await pidsIn(pidFile, 3);
    await host.client.close();
    expect(await host.exited, host.stderr()).toEqual({ code: 0, signal: null });
    expect(host.proc.killed).toBe(false);
    expect(pids.filter(isAlive)).toEqual([]);
    // One after the other would be eof, term, eof, term...: all at once, every child's stdin ends
    // before the first SIGTERM (sent only after the grace all of them share).
    const life = readEvents(lifeLog).map((e) => e.event as string);
    expect(life).toEqual(['eof', 'eof', 'eof', 'term', 'term', 'term']);
  });

  it('a SIGTERM while mcpmux is stopping its children waits for that stop and exits 0, not 1', async () => {
    const pidFile = tempFile('pids');
    const lifeLog = tempFile('life.jsonl');
    const config = await writeConfig({
      mcpServers: {
        // Signals mcpmux the moment its stdin ends, and then needs SIGKILL: the signal surely
        // arrives while mcpmux is still stopping it.
        stubborn: bad({ name: 'stubborn', pidFile, lifeLog, ignoreEof: true, ignoreTerm: true, signalParentOnEof: 'SIGTERM' }),
      },
    });
    const peer = startRawMux(config, { env: { HOME: tempDir(), PATH: '/usr/bin:/bin' } });
    await peer.initialize();
    const [pid] = await pidsIn(pidFile, 1);
    peer.child.stdin!.end();
    expect(await peer.exited, peer.stderr()).toEqual({ code: 0, signal: null });
    await waitForEvent(lifeLog, (e) => e.event === 'eof');
    // The signal was heard during the drain (not after mcpmux had already gone).
    const said = peer.stderr().split('\n').filter((l) => l.includes('"msg":"shutting down"'));
    expect(said.map((l) => JSON.parse(l))).toMatchObject([{ signal: 'SIGTERM', draining: true }]);
    expect(isAlive(pid!)).toBe(false);
  });

  it('an HTTP upstream whose session DELETE never answers: mcpmux still exits 0 before the SDK\'s 2 s', async () => {
    // A minimal Streamable HTTP server (JSON answers, one session) that takes the DELETE and
    // never answers it.
    const deletes: string[] = [];
    const held = new Set<ServerResponse>();
    const web = createHttpServer((req, res) => {
      if (req.method === 'DELETE') return void (deletes.push(String(req.headers['mcp-session-id'])), held.add(res));
      if (req.method !== 'POST') return void res.writeHead(405).end();
      let body = '';
      req.setEncoding('utf8').on('data', (c: string) => (body += c));
      req.on('end', () => {
        const msg = JSON.parse(body);
        if (msg.id === undefined) return void res.writeHead(202).end();
        const result =
          msg.method === 'initialize'
            ? { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'web', version: '0' } }
            : msg.method === 'tools/list'
              ? { tools: [{ name: 'hello', inputSchema: { type: 'object' } }] }
              : undefined;
        const answer = result ? { jsonrpc: '2.0', id: msg.id, result } : { jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'Method not found' } };
        res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'web-session' }).end(JSON.stringify(answer));
      });
    });
    httpServers.add(web);
    const port = await new Promise<number>((resolve) => web.listen(0, '127.0.0.1', () => resolve((web.address() as { port: number }).port)));
    const config = await writeConfig({ mcpServers: { web: { url: `http://127.0.0.1:${port}/mcp` } } });
    const host = await underSdkHost(config);
    expect((await host.client.listTools()).tools.map((t) => t.name)).toEqual(['web__hello']);
    const t0 = performance.now();
    await host.client.close();
    const exit = await host.exited;
    const tookMs = performance.now() - t0;
    expect(exit, host.stderr()).toEqual({ code: 0, signal: null });
    expect(host.proc.killed, 'the SDK had to SIGTERM mcpmux').toBe(false);
    expect(deletes).toEqual(['web-session']);
    expect(tookMs).toBeLessThan(2000);
    for (const r of held) r.destroy();
  });
});

describe('a stop under way (issue 19, point 9)', () => {
  it('takes a later, shorter grace: a reload\'s 2 s stop, then the host closes and gives 100 ms', async () => {
    const pidFile = tempFile('pids');
    const lifeLog = tempFile('life.jsonl');
    const entry = bad({ name: 'stubborn', pidFile, lifeLog, ignoreEof: true, ignoreTerm: true });
    const cfg = { name: 'stubborn', transport: 'stdio', command: entry.command, args: entry.args, env: {}, inheritEnv: true, cwd: undefined } as unknown as StdioServerConfig;
    await execaLoaded();
    const conn = spawnChild(cfg, 1 << 20, createLogger('silent'));
    const [pid] = await pidsIn(pidFile, 1);
    const slow = conn.stop(); // the default: 2 s after EOF, 2 s after SIGTERM
    await waitForEvent(lifeLog, (e) => e.event === 'eof');
    const t0 = performance.now();
    await conn.stop({ afterEofMs: 100, afterTermMs: 100 });
    // Without the shortening: what is left of 2 s, then 2 s more after SIGTERM.
    expect(performance.now() - t0).toBeLessThan(1500);
    await slow;
    expect(isAlive(pid!)).toBe(false);
    expect(readEvents(lifeLog).map((e) => e.event)).toContain('term');
  }, 30_000);
});

/** A server that writes eight lines and a secret on stderr, then exits 3. */
const dying = (extra: object = {}) => ({
  command: process.execPath,
  args: ['-e', "for (let i = 1; i <= 8; i++) console.error('line ' + i); console.error('token ' + process.env.MY_API_TOKEN); process.exit(3)"],
  env: { MY_API_TOKEN: '${LIFECYCLE_TEST_TOKEN}' },
  ...extra,
});
const SECRET = 'sk-lifecycle-0123456789';
const LAST_WORDS = ['line 5', 'line 6', 'line 7', 'line 8', 'token [REDACTED]'];

describe('a server that fails says why (issue 19, point 11)', () => {
  it('check --probe shows its last stderr lines (the last 5, secrets redacted) under the failure', async () => {
    const config = await writeConfig({ mcpServers: { dying: dying() } });
    const r = await mcpmux(['check', '--probe', '--config', config], { LIFECYCLE_TEST_TOKEN: SECRET });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toContain('dying: FAILED (exited with code 3)');
    const lines = r.stdout.split('\n').filter((l) => l.includes('stderr|')).map((l) => l.replace(/^\s*stderr\| /, ''));
    expect(lines).toEqual(LAST_WORDS);
    expect(r.stdout + r.stderr).not.toContain(SECRET);
  });

  it('/status has them on the upstream entry, and mcpmux status prints them', async () => {
    const d = await startDaemon({ mcpServers: { dying: dying({ restart: { maxRetries: 0 } }) } }, { LIFECYCLE_TEST_TOKEN: SECRET });
    const entry = await waitFor(async () => {
      const s = (await (await fetch(`${d.base}/status`)).json()) as { upstreams: Record<string, unknown>[] };
      const up = s.upstreams.find((u) => u.name === 'dying');
      return up?.gaveUp ? up : undefined;
    }, { what: 'dying given up in /status' });
    expect(entry).toMatchObject({ state: 'failed', lastError: 'exited with code 3', stderr: LAST_WORDS });

    const r = await mcpmux(['status', '--url', d.base]);
    expect(r.code, r.stderr).toBe(0);
    const out = r.stdout.split('\n');
    const at = out.indexOf('dying: its last stderr lines');
    expect(at, r.stdout).toBeGreaterThan(0);
    expect(out.slice(at + 1, at + 6)).toEqual(LAST_WORDS.map((l) => `  stderr| ${l}`));
    expect(r.stdout + d.stderr()).not.toContain(SECRET);
  });

  it('a command not found fails at once with the reason and the PATH, and is never started again', async () => {
    const d = await startDaemon({ mcpServers: { ghost: { command: 'mcpmux-test-no-such-command', args: [], restart: { maxRetries: 5, backoffMs: 1 } } } }, { PATH: '/usr/bin:/bin' });
    // Whichever comes first: a retry (the old way), or the failure that is not retried.
    const first = await waitFor(() => d.stderr().split('\n').find((l) => /"msg":"(restarting upstream|upstream cannot start, not retried[^"]*)"/.test(l)), { what: 'a retry or a permanent failure' });
    expect(JSON.parse(first).msg).toMatch(/^upstream cannot start, not retried/);
    const s = (await (await fetch(`${d.base}/status`)).json()) as { upstreams: Record<string, unknown>[] };
    expect(s.upstreams[0]).toMatchObject({
      name: 'ghost',
      state: 'failed',
      gaveUp: true,
      restarts: 0,
      lastError: `command not found: mcpmux-test-no-such-command (not on PATH=/usr/bin:/bin; give its full path, or set PATH in the server's "env")`,
    });
    const spawned = d.stderr().split('\n').filter((l) => l.includes('"msg":"spawned upstream"'));
    expect(spawned).toHaveLength(1);
  });

  it('check --probe: command not found, not executable, a missing #! interpreter, a missing cwd: each said as such, exit 1', async () => {
    const dir = tempDir();
    const script = path.join(dir, 'server.sh');
    writeFileSync(script, '#!/bin/sh\nexit 0\n');
    chmodSync(script, 0o644);
    const shebang = path.join(dir, 'shebang.sh');
    writeFileSync(shebang, '#!/nonexistent/interpreter\n');
    chmodSync(shebang, 0o755);
    const config = await writeConfig({
      mcpServers: {
        ghost: { command: 'mcpmux-test-no-such-command', args: [] },
        noexec: { command: script, args: [] },
        shebang: { command: shebang, args: [] },
        nocwd: { command: process.execPath, args: [], cwd: path.join(dir, 'gone') },
      },
    });
    const r = await mcpmux(['check', '--probe', '--config', config, '--log-level', 'info']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toContain(`ghost: FAILED (command not found: mcpmux-test-no-such-command (not on PATH=/usr/bin:/bin; give its full path`);
    expect(r.stdout).toContain(`noexec: FAILED (permission denied: ${script} (not executable`);
    expect(r.stdout).toContain(`shebang: FAILED (cannot run ${shebang}: the interpreter on its #! line was not found)`);
    expect(r.stdout).toContain(`nocwd: FAILED (working folder not found: ${path.join(dir, 'gone')}`);
    // Started once each, never retried.
    expect(r.stderr.split('\n').filter((l) => l.includes('"msg":"spawned upstream"'))).toHaveLength(4);
    expect(r.stderr).not.toContain('"msg":"restarting upstream"');
  });

  it('serve on a port in use: exit 1 saying so, before any server was spawned', async () => {
    const busy = createServer();
    servers.add(busy);
    const port = await new Promise<number>((resolve) => busy.listen(0, '127.0.0.1', () => resolve((busy.address() as { port: number }).port)));
    const marker = tempFile('started');
    const config = await writeConfig({ mcpServers: { marked: bad({ name: 'marked', pidFile: marker }) } });
    const r = await mcpmux(['serve', '--config', config, '--port', String(port), '--log-level', 'info']);
    expect(r.code, r.stderr).toBe(1);
    // The JSON line keeps today's message; the explanation is its `hint`.
    const said = r.stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)).find((j) => j.level === 50);
    expect(said).toMatchObject({ msg: 'cannot listen', code: 'EADDRINUSE', port });
    expect(said.hint).toContain(`port ${port} is in use (EADDRINUSE)`);
    // For a person, one clear line: the message and its explanation together.
    const pretty = await mcpmux(['serve', '--config', config, '--port', String(port), '--log-format', 'pretty']);
    expect(pretty.code).toBe(1);
    expect(pretty.stderr).toMatch(new RegExp(`^\\d\\d:\\d\\d:\\d\\d ERROR cannot listen: port ${port} is in use \\(EADDRINUSE\\) on 127\\.0\\.0\\.1: `, 'm'));
    expect(r.stderr).not.toContain('"msg":"spawned upstream"');
    expect(existsSync(marker), 'the upstream was started').toBe(false);
  });
});
