// The first hour, logs and counts (issue 19, points 10 and 13), against the real binary:
// - logs a person reads: pretty lines on a terminal (a real pseudo-terminal, from util-linux's
//   `script`), JSON through a pipe, `--log-format` forcing either; one ready line with the URL
//   and counts; an upstream's stderr under its name and with no level, never as mcpmux's error;
// - counts that tell the truth: `status` says a list nobody asked for is not listed yet,
//   `check --probe` says how many items policy denies, HTTP sessions a host left without DELETE
//   are idle, and `/metrics` starts with mcpmux's own metrics.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { closeAll, exitWithin, fixture, MUX_BIN, runMux, startRawMux, waitFor, writeConfig } from './helpers/harness.js';
import { parseProm, total } from './helpers/prom.js';

afterEach(closeAll);
afterAll(stopAllDaemons);

const ESC = '\x1b[';
const STDERR_MSG = "the server's own stderr, relayed (its words, not an mcpmux error)";
/** The fixture's startup line on its stderr (test/fixtures/upstream.mjs). */
const FIXTURE_SAYS = (name: string) => new RegExp(`upstream fixture "${name}" pid=\\d+ ready: tools=`);
const hasScript = spawnSync('script', ['--version'], { encoding: 'utf8' }).status === 0;

/** A process under a pseudo-terminal (`script`): its stdin and stderr are a terminal, as in a person's shell. */
interface Tty {
  /** Everything written to the terminal so far, line ends as "\n". */
  out(): string;
  lines(): string[];
  /** Ctrl-C, as the terminal sends it. */
  interrupt(): void;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const ttys = new Set<{ child: ChildProcess; exited: Promise<unknown> }>();
afterEach(async () => {
  // Ctrl-C first (mcpmux drains and stops its upstreams); SIGKILL to `script` past a bound
  // (the terminal then hangs up on whatever is left).
  await Promise.allSettled(
    [...ttys].map(async (t) => {
      if (t.child.exitCode === null && t.child.signalCode === null) t.child.stdin!.write('\x03');
      await exitWithin(t.child, t.exited, 10_000);
    }),
  );
  ttys.clear();
});

function underTty(args: string[], env: Record<string, string | undefined> = {}): Tty {
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const line = ['exec', process.execPath, MUX_BIN, ...args].map(quote).join(' ');
  const merged: NodeJS.ProcessEnv = { ...process.env, SHELL: '/bin/sh', TERM: 'xterm', ...env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete merged[k];
  const child = spawn('script', ['-qfec', line, '/dev/null'], { env: merged, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c.replace(/\r\n/g, '\n')));
  child.stdin!.on('error', () => {});
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  ttys.add({ child, exited });
  return {
    out: () => out,
    lines: () => out.split('\n').filter((l) => l.trim() !== ''),
    interrupt: () => child.stdin!.write('\x03'),
    exited,
  };
}

const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '');
const twoServers = () => ({ mcpServers: { alpha: fixture({ name: 'alpha' }), beta: fixture({ name: 'beta' }) } });
/** Tools each default fixture lists (generated and special ones), read from its own stderr line. */
const toolsOf = (stderr: string, name: string) => Number(new RegExp(`upstream fixture "${name}" pid=\\d+ ready: tools=(\\d+)`).exec(stderr)?.[1]);

describe('logs for people', () => {
  it.skipIf(!hasScript)('on a terminal: pretty, colored lines; one ready line with the URL, servers and tools; an upstream\'s stderr under its name, with no level', async () => {
    const config = await writeConfig(twoServers());
    const t = underTty(['serve', '--config', config, '--port', '0'], { NO_COLOR: undefined });
    const tools = () => toolsOf(plain(t.out()), 'alpha') + toolsOf(plain(t.out()), 'beta');
    const ready = await waitFor(() => tools() > 0 && t.lines().map(plain).find((l) => /^\d\d:\d\d:\d\d INFO  ready: /.test(l)), { what: 'the ready line', timeoutMs: 30_000 });
    expect(ready).toMatch(new RegExp(`^\\d\\d:\\d\\d:\\d\\d INFO  ready: http://127\\.0\\.0\\.1:\\d+/mcp \\(2 servers, ${tools()} tools\\)$`));
    // Said once; no JSON anywhere; levels colored (a terminal, NO_COLOR unset).
    expect(t.lines().map(plain).filter((l) => l.includes('INFO  ready: '))).toHaveLength(1);
    for (const l of t.lines()) expect(plain(l)).not.toMatch(/^\s*\{/);
    expect(t.out()).toContain(`${ESC}32mINFO `);
    // The fixture's own startup line: its name where the level would be, its words, nothing else.
    const relayed = t.lines().map(plain).find((l) => FIXTURE_SAYS('alpha').test(l))!;
    expect(relayed).toMatch(/^\d\d:\d\d:\d\d \[alpha\] upstream fixture "alpha" pid=\d+ ready: tools=/);
    expect(relayed).not.toMatch(/INFO|WARN|ERROR|msg=|own stderr/);
    // mcpmux's own line about a server carries the same [name] after its level.
    expect(t.lines().map(plain)).toContainEqual(expect.stringMatching(/^\d\d:\d\d:\d\d INFO  \[alpha\] upstream ready /));
    t.interrupt();
    await t.exited;
  }, 60_000);

  it.skipIf(!hasScript)('on a terminal, --log-format json gives JSON lines; NO_COLOR gives pretty lines without colors', async () => {
    const config = await writeConfig(twoServers());
    const json = underTty(['serve', '--config', config, '--port', '0', '--log-format', 'json']);
    await waitFor(() => json.lines().some((l) => l.includes('"msg":"ready: ')), { what: 'the JSON ready line', timeoutMs: 30_000 });
    json.interrupt();
    await json.exited;
    // Every line the terminal got is one JSON object (the pipe case is below).
    // (The terminal echoes the Ctrl-C as "^C" before mcpmux's next line: the terminal's, not mcpmux's.)
    const lines = json.lines().map((l) => l.replace(/^\^C/, ''));
    expect(lines.length).toBeGreaterThan(3);
    for (const l of lines) expect(() => JSON.parse(l), l).not.toThrow();

    const mono = underTty(['check', '--config', config, '--probe', '--log-level', 'info'], { NO_COLOR: '1' });
    await mono.exited;
    expect(mono.out()).toMatch(/^\d\d:\d\d:\d\d INFO  \[alpha\] spawned upstream /m);
    expect(mono.out()).not.toContain(ESC);
  }, 60_000);

  it('through a pipe: JSON lines, today\'s fields kept; the ready line says servers (no tools were listed for it); the relayed stderr keeps its message', async () => {
    const d = await startDaemon(twoServers());
    const readyLine = await waitFor(() => d.stderr().split('\n').find((l) => l.includes('"msg":"ready: ')), { what: 'the ready line' });
    const lines = d.stderr().split('\n').filter((l) => l !== '');
    for (const l of lines) expect(() => JSON.parse(l), l).not.toThrow();
    expect(JSON.parse(readyLine)).toMatchObject({ level: 30, url: d.url, servers: 2, msg: `ready: ${d.url} (2 servers)` });
    expect(JSON.parse(readyLine).tools).toBeUndefined();
    expect(lines.map((l) => JSON.parse(l))).toContainEqual(expect.objectContaining({ msg: 'listening', url: d.url, port: d.port }));
    const relayed = await waitFor(() => d.stderr().split('\n').find((l) => l.includes('upstream fixture \\"beta\\"')), { what: "beta's stderr relayed" });
    expect(JSON.parse(relayed)).toMatchObject({ level: 30, server: 'beta', stderr: expect.stringMatching(FIXTURE_SAYS('beta')), msg: STDERR_MSG });
    // No host listed anything, and the ready line asked for no list: only the read-ahead of tools
    // and prompts (the fixtures announce list changes) reached the upstreams, never resources.
    const status = await waitFor(async () => {
      const s = (await (await fetch(`${d.base}/status`)).json()) as any;
      return s.upstreams.every((u: any) => u.tools !== null && u.prompts !== null) ? s : undefined;
    }, { what: 'tools and prompts read ahead' });
    for (const u of status.upstreams) expect(u).toMatchObject({ state: 'ready', resources: null });
    await d.stop();
  });

  it('--log-format pretty through a pipe (stdio): readable, no JSON, no colors; secrets are redacted as in JSON', async () => {
    const config = await writeConfig({
      mcpServers: {
        alpha: fixture({ name: 'alpha' }),
        // Prints its environment's token on stderr and exits: the relayed line must not carry it.
        leaky: { command: process.execPath, args: ['-e', 'process.stderr.write("token is " + process.env.API_TOKEN + "\\n"); process.exit(3)'], env: { API_TOKEN: '${LEAKY_API_TOKEN}' }, restart: { maxRetries: 0 } },
      },
    });
    const peer = startRawMux(config, { args: ['--log-format', 'pretty'], env: { LEAKY_API_TOKEN: 'sekrit-value-5e2f' } });
    await peer.initialize();
    const ready = await waitFor(() => toolsOf(peer.stderr(), 'alpha') > 0 && peer.stderr().split('\n').find((l) => / INFO  ready \(/.test(l)), { what: 'the ready line' });
    const tools = toolsOf(peer.stderr(), 'alpha');
    expect(ready).toMatch(new RegExp(`^\\d\\d:\\d\\d:\\d\\d INFO  ready \\(1 server, ${tools} tools; not up: leaky \\(failed\\)\\)$`));
    await waitFor(() => peer.stderr().includes('[leaky] token is'), { what: "leaky's stderr relayed" });
    const lines = peer.stderr().split('\n').filter((l) => l !== '');
    for (const l of lines) {
      expect(l).not.toMatch(/^\s*\{/);
      expect(l).toMatch(/^\d\d:\d\d:\d\d /);
    }
    expect(peer.stderr()).not.toContain(ESC);
    expect(peer.stderr()).toMatch(/^\d\d:\d\d:\d\d \[leaky\] token is \[REDACTED\]$/m);
    expect(peer.stderr()).not.toContain('sekrit-value-5e2f');
    // MCP on stdout is untouched: every line is JSON-RPC.
    for (const l of peer.lines) expect(JSON.parse(l).jsonrpc).toBe('2.0');
    expect((await peer.close()).code).toBe(0);
  }, 60_000);

  it('the ready line names a server left unstarted for a missing variable as not up (unavailable)', async () => {
    const config = await writeConfig({
      mcpServers: { alpha: fixture({ name: 'alpha' }), tokened: { ...fixture({ name: 'tokened' }), env: { SOME_TOKEN: '${READY_LINE_MISSING_TOKEN}' } } },
    });
    const peer = startRawMux(config, { args: ['--log-format', 'pretty'] });
    await peer.initialize();
    const ready = await waitFor(() => peer.stderr().split('\n').find((l) => / INFO  ready \(/.test(l)), { what: 'the ready line' });
    expect(ready).toMatch(/^\d\d:\d\d:\d\d INFO  ready \(1 server, \d+ tools; not up: tokened \(unavailable\)\)$/);
    expect((await peer.close()).code).toBe(0);
  }, 60_000);

  it('a --log-format that is neither json nor pretty is a usage error (exit 2), on every command that logs', async () => {
    const config = await writeConfig(twoServers());
    for (const args of [['serve', '--config', config], ['stdio', '--config', config], ['check', '--config', config], ['tools', '--config', config], ['connect']]) {
      const r = await runMux([...args, '--log-format', 'yaml']);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/--log-format.*yaml.*Allowed choices are json, pretty/s);
    }
    expect((await runMux(['check', '--config', config, '--log-format', 'json'])).status).toBe(0);
  }, 60_000);
});

describe('counts that tell the truth', () => {
  it('status: a list nothing has read yet is "not listed yet", not 0; a prefetch or a host\'s list fills the counts in', async () => {
    // Tools without listChanged (never listed ahead of hosts: a page nobody keeps), prompts with
    // it (listed ahead as soon as alpha is ready), resources never listed ahead.
    const alpha = fixture({ name: 'alpha', tools: 4, specialTools: false, prompts: 2, resources: 3, capabilities: { tools: {} } });
    const d = await startDaemon({ mcpServers: { alpha } });
    const status = async () => ((await (await fetch(`${d.base}/status`)).json()) as any).upstreams[0];
    const before = await waitFor(async () => {
      const u = await status();
      return u?.state === 'ready' && u.prompts !== null ? u : undefined;
    }, { what: 'alpha ready and its prompts listed ahead' });
    expect(before).toMatchObject({ tools: null, prompts: 2, resources: null });
    const table = await runMux(['status', '--url', d.base]);
    expect(table.status, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/^alpha\s+ready\s+stdio\s+\d+\s+0\s+0\s+-\s+2\s+-$/m);
    expect(table.stdout).toContain('-: not listed yet');

    const client = new Client({ name: 'counts-test', version: '0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    try {
      expect((await client.listTools()).tools).toHaveLength(4);
      const after = await status();
      expect(after).toMatchObject({ tools: 4, prompts: 2, resources: null });
      const again = await runMux(['status', '--url', d.base]);
      expect(again.stdout).toMatch(/^alpha\s+ready\s+stdio\s+\d+\s+0\s+0\s+4\s+2\s+-$/m);
    } finally {
      await client.close();
    }
    await d.stop();
  });

  it('check --probe says how many items policy denies: the server\'s own lists and the global policy', async () => {
    const config = await writeConfig({
      mcpServers: {
        alpha: { ...fixture({ name: 'alpha', tools: 5, specialTools: false, prompts: 3 }), tools: { allow: ['*'], deny: ['tool_1'] }, prompts: { allow: ['*'], deny: ['prompt_0'] } },
        beta: fixture({ name: 'beta', tools: 2, specialTools: false, prompts: 1 }),
      },
      policy: { tools: { allow: ['*'], deny: ['alpha__tool_2', 'alpha__tool_3', 'beta__nothing'] } },
    });
    const r = await runMux(['check', '--config', config, '--probe']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^ {2}alpha: ok, .*, 5 tools \(3 denied\), 3 prompts \(1 denied\), 2 resources$/m);
    // Nothing denied: no parenthesis.
    expect(r.stdout).toMatch(/^ {2}beta: ok, .*, 2 tools, 1 prompts, 2 resources$/m);
  });

  it('an HTTP session a host never DELETEs is reported idle (in /status, mcpmux status and /metrics); one with an open stream is not', async () => {
    const d = await startDaemon(twoServers(), { MCPMUX_IDLE_REPORT_MS: '1500' });
    // A host that initializes and goes away without DELETE (raw HTTP: no GET stream).
    const init = await fetch(d.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'gone', version: '0' } } }),
    });
    const sid = init.headers.get('mcp-session-id')!;
    await init.text();
    const ack = await fetch(d.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    });
    expect(ack.status).toBe(202);
    // A host that stays: the SDK client keeps its GET stream open.
    const client = new Client({ name: 'stays', version: '0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    try {
      await client.listTools();
      const status = async () => ((await (await fetch(`${d.base}/status`)).json()) as any).sessions;
      const s = await waitFor(async () => {
        const now = await status();
        return now.idle === 1 ? now : undefined;
      }, { what: 'the abandoned session idle' });
      expect(s).toMatchObject({ total: 2, idle: 1 });
      // The host's own session stays active however long it waits, while its stream is open.
      await new Promise((r) => setTimeout(r, 1600));
      expect(await status()).toMatchObject({ total: 2, idle: 1 });
      const samples = parseProm(await (await fetch(`${d.base}/metrics`)).text());
      expect(total(samples, 'mcpmux_sessions', { transport: 'http' })).toBe(2);
      expect(total(samples, 'mcpmux_sessions_idle', { transport: 'http' })).toBe(1);
      const table = await runMux(['status', '--url', d.base]);
      expect(table.stdout).toMatch(/^sessions: 2 \(http 2; clients: anonymous 2\), 1 idle$/m);
      // It is active again as soon as it speaks.
      const ping = await fetch(d.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }),
      });
      await ping.text();
      expect((await status()).idle).toBe(0);
    } finally {
      await client.close();
    }
    await d.stop();
  }, 60_000);

  it("/metrics starts with mcpmux's own metrics; Node's process_ and nodejs_ ones come after", async () => {
    const d = await startDaemon(twoServers());
    const text = await (await fetch(`${d.base}/metrics`)).text();
    const names = text.split('\n').filter((l) => l.startsWith('# HELP ')).map((l) => l.split(' ')[2]!);
    const firstOther = names.findIndex((n) => !n.startsWith('mcpmux_'));
    expect(firstOther).toBeGreaterThan(0);
    expect(names.slice(firstOther).filter((n) => n.startsWith('mcpmux_'))).toEqual([]);
    expect(names.slice(firstOther)).toContainEqual(expect.stringMatching(/^process_/));
    expect(names.slice(firstOther)).toContainEqual(expect.stringMatching(/^nodejs_/));
    await d.stop();
  });
});
