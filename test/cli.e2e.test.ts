// The command line of the BUILT binary (DESIGN section 2): `check`, `tools`, usage errors and the
// exit codes 0 ok, 1 invalid config or failed check, 2 usage error. Run `npm run build` first.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, everything, fixture, MUX_BIN, startRawMux, tempFile, waitFor, writeConfig } from './helpers/harness.js';
import { generatedTool } from './fixtures/upstream-items.mjs';

// ---- local helpers ----------------------------------------------------------------------------

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

const running = new Set<ChildProcess>();
afterEach(async () => {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
  await closeAll();
});

/**
 * Runs `node bin/mcpmux.js ...args` to completion (killed after timeoutMs). MCPMUX_CONFIG from
 * the test's own environment is never inherited; pass it in `env` to test it.
 */
function mcpmux(args: string[], { env = {}, timeoutMs = 20_000, onSpawn }: { env?: Record<string, string>; timeoutMs?: number; onSpawn?: (c: ChildProcess) => void } = {}): Promise<Run> {
  const { MCPMUX_CONFIG: _ignored, ...inherited } = process.env;
  const child = spawn(process.execPath, [MUX_BIN, ...args], { env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  onSpawn?.(child);
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** `mcpServers` entries: fixture(), everything() or plain objects with extra mcpmux keys. */
type Servers = Record<string, object>;
const config = (mcpServers: Servers, extra: object = {}) => ({ mcpServers, ...extra });
const two = (): Servers => ({ alpha: fixture({ name: 'alpha' }), beta: fixture({ name: 'beta' }) });
const ghost = { command: '/nonexistent/mcp-ghost-server', args: [], restart: { maxRetries: 0 } };

/** Writes raw text (not JSON-encoded) as a config file. */
async function writeRaw(text: string): Promise<string> {
  const file = tempFile('mcpmux.json');
  await writeFile(file, text);
  return file;
}

/** Public names in `mcpmux tools` table output (first column, header skipped). */
const tableNames = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .slice(1)
    .map((l) => l.split(/\s+/)[0]);

const SPECIAL_COUNT = 17;

// ---- check ------------------------------------------------------------------------------------------

describe('cli: mcpmux check', () => {
  it('a valid config exits 0 and says ok with the file path', async () => {
    const file = await writeConfig(config(two()));
    const r = await mcpmux(['check', '--config', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(file);
    expect(r.stdout).toMatch(/\bok\b/);
  });

  it.each([
    ['an unknown key', { mcpServers: { a: { command: 'x', bogus: 1 } } }, '/mcpServers/a/bogus', /bogus/],
    ['a wrong type', { mcpServers: { a: { command: 'x', args: 'not-an-array' } } }, '/mcpServers/a/args', /array/],
    // (outside a server's entry: there it disables the server alone, test/first-hour-env.e2e.test.ts)
    ['a missing ${VAR}', { mcpServers: {}, audit: { path: '${MCPMUX_TEST_SURELY_UNSET}' } }, '/audit/path', /MCPMUX_TEST_SURELY_UNSET/],
    ['a wrong type in mcpmux keys', { mcpServers: {}, namespace: { maxNameLength: 'long' } }, '/namespace/maxNameLength', /integer|number/],
  ])('%s exits 1 naming the file, the JSON path and what was expected', async (_what, cfg, jsonPath, expected) => {
    const file = await writeConfig(cfg);
    const r = await mcpmux(['check', '--config', file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(file);
    expect(r.stderr).toContain(jsonPath);
    expect(r.stderr).toMatch(expected);
    expect(r.stdout).not.toMatch(/\bok\b/);
  });

  it('every error of a config is reported at once', async () => {
    const file = await writeConfig({ mcpServers: { a: { command: 'x', bogus: 1, args: 'str' } }, listen: { host: '${MCPMUX_TEST_SURELY_UNSET}' } });
    const r = await mcpmux(['check', '--config', file]);
    expect(r.code).toBe(1);
    for (const p of ['/mcpServers/a/bogus', '/mcpServers/a/args', '/listen/host']) expect(r.stderr).toContain(p);
  });

  it.each([
    ['malformed JSON', () => writeRaw('{ "mcpServers": { "a": '), /JSON|Unexpected|parse|end/i],
    ['a missing file', async () => tempFile('does-not-exist.json'), /not found|ENOENT|no such file/i],
  ])('%s exits 1 naming the file', async (_what, make, expected) => {
    const file = await make();
    const r = await mcpmux(['check', '--config', file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(file);
    expect(r.stderr).toMatch(expected);
  });

  it('MCPMUX_CONFIG is used when --config is absent', async () => {
    const file = await writeConfig(config(two()));
    const r = await mcpmux(['check'], { env: { MCPMUX_CONFIG: file } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(file);
  });

  it('--probe exits 0 and reports each upstream\'s capabilities and item counts', async () => {
    const file = await writeConfig(config({ alpha: fixture({ name: 'alpha', tools: 5, prompts: 3, resources: 4 }), every: everything() }));
    const r = await mcpmux(['check', '--probe', '--config', file]);
    expect(r.code, r.stderr).toBe(0);
    const alphaLine = r.stdout.split('\n').find((l) => l.includes('alpha:'));
    expect(alphaLine).toBeDefined();
    expect(alphaLine).toMatch(/\btools\b/);
    expect(alphaLine).toMatch(/\bprompts\b/);
    expect(alphaLine).toContain(`${5 + SPECIAL_COUNT} tools`);
    expect(alphaLine).toContain('3 prompts');
    expect(alphaLine).toContain('4 resources');
    expect(r.stdout.split('\n').find((l) => l.includes('every:'))).toMatch(/\d+ tools/);
  });

  it('--probe exits 1 when an upstream cannot start, naming it, and still reports the others', async () => {
    const file = await writeConfig(config({ ghost, alpha: fixture({ name: 'alpha' }) }));
    const r = await mcpmux(['check', '--probe', '--config', file]);
    expect(r.code).toBe(1);
    const out = r.stdout + r.stderr;
    expect(out).toMatch(/ghost[^\n]*(FAIL|fail|not available|ENOENT)/);
    expect(r.stdout).toContain(`${3 + SPECIAL_COUNT} tools`);
  });
});

// ---- tools ------------------------------------------------------------------------------------------

describe('cli: mcpmux tools', () => {
  it('prints the merged table of two upstreams, every tool once, and exits 0', async () => {
    const file = await writeConfig(config(two()));
    const r = await mcpmux(['tools', '--config', file]);
    expect(r.code, r.stderr).toBe(0);
    const names = tableNames(r.stdout);
    expect(names).toHaveLength(2 * (3 + SPECIAL_COUNT));
    expect(new Set(names).size).toBe(names.length);
    expect(names).toEqual(expect.arrayContaining(['alpha__tool_0', 'alpha__echo', 'beta__tool_2', 'beta__crash']));
    expect(r.stdout).toContain('Generated tool 0 of alpha');
  });

  it('--json prints every tool with all its fields, only the name namespaced', async () => {
    const file = await writeConfig(config(two()));
    const r = await mcpmux(['tools', '--json', '--config', file]);
    expect(r.code, r.stderr).toBe(0);
    const tools = JSON.parse(r.stdout) as any[];
    expect(tools).toHaveLength(2 * (3 + SPECIAL_COUNT));
    expect(tools.find((t) => t.name === 'beta__tool_1')).toEqual({ ...generatedTool('beta', 1), name: 'beta__tool_1' });
  });

  it('applies a per-server tools.deny on the upstream\'s own names', async () => {
    const file = await writeConfig(config({ alpha: fixture({ name: 'alpha' }), beta: { ...fixture({ name: 'beta' }), tools: { deny: ['crash', 'f*'] } } }));
    const names = tableNames((await mcpmux(['tools', '--config', file])).stdout);
    expect(names).not.toContain('beta__crash');
    expect(names).not.toContain('beta__fail');
    expect(names).toContain('beta__echo');
    expect(names).toContain('alpha__crash');
  });

  it('applies the global policy deny on public names', async () => {
    const file = await writeConfig(config(two(), { policy: { tools: { deny: ['alpha__c*'] } } }));
    const r = await mcpmux(['tools', '--config', file]);
    expect(r.code, r.stderr).toBe(0);
    const names = tableNames(r.stdout);
    expect(names).not.toContain('alpha__crash');
    expect(names).not.toContain('alpha__cancel_own_sample');
    expect(names).toContain('alpha__echo');
    expect(names).toContain('beta__crash');
  });

  it('with one upstream that cannot start, still prints the others and names the missing one on stderr', async () => {
    const file = await writeConfig(config({ ghost, alpha: fixture({ name: 'alpha' }) }));
    const r = await mcpmux(['tools', '--config', file]);
    expect(tableNames(r.stdout)).toContain('alpha__echo');
    expect(tableNames(r.stdout).some((n) => n.startsWith('ghost'))).toBe(false);
    expect(r.stderr).toContain('ghost');
  });

  it('an invalid config exits 1 with the JSON path', async () => {
    const file = await writeConfig({ mcpServers: { a: { command: 'x', bogus: true } } });
    const r = await mcpmux(['tools', '--config', file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('/mcpServers/a/bogus');
    expect(r.stdout).toBe('');
  });

  it('a reader that closes early (as `mcpmux tools | head` does) does not crash mcpmux with an EPIPE stack trace', async () => {
    const file = await writeConfig(config(two()));
    const r = await mcpmux(['tools', '--config', file], { onSpawn: (c) => c.stdout!.destroy() });
    expect(r.stderr).not.toMatch(/EPIPE|Unhandled 'error' event/);
  });
});

// ---- usage errors and exit codes ------------------------------------------------------------------------------

describe('cli: usage and exit codes', () => {
  it.each([
    ['an unknown command', ['frobnicate']],
    ['an unknown flag', ['check', '--no-such-flag']],
    ['check without --config or MCPMUX_CONFIG', ['check']],
    ['tools without --config or MCPMUX_CONFIG', ['tools']],
    ['a flag without its value', ['check', '--config']],
    ['an invalid --log-level', ['check', '--config', '/dev/null', '--log-level', 'loud']],
  ])('%s exits 2 with a message on stderr and nothing on stdout', async (_what, args) => {
    const r = await mcpmux(args);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).not.toBe('');
    expect(r.stdout).toBe('');
  });

  it('--version exits 0 and prints the package version', async () => {
    const r = await mcpmux(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe('0.1.0');
  });

  it('--help exits 0 and lists the commands', async () => {
    const r = await mcpmux(['--help']);
    expect(r.code).toBe(0);
    for (const cmd of ['stdio', 'check', 'tools']) expect(r.stdout).toContain(cmd);
  });

  it('--log-level is accepted by check, tools and stdio', async () => {
    const file = await writeConfig(config({ alpha: fixture({ name: 'alpha' }) }));
    expect((await mcpmux(['check', '--config', file, '--log-level', 'debug'])).code).toBe(0);
    expect((await mcpmux(['tools', '--config', file, '--log-level', 'error'])).code).toBe(0);
    const peer = startRawMux(file, { args: ['--log-level', 'silent'] });
    expect((await peer.initialize()).result.serverInfo.name).toBe('mcpmux');
    expect(peer.stderr()).toBe('');
    expect((await peer.close()).code).toBe(0);
  });

  it('stdio with an invalid config exits 1 without writing anything to stdout', async () => {
    const file = await writeConfig({ mcpServers: { a: { command: 'x', bogus: 1 } } });
    const r = await mcpmux(['stdio', '--config', file]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('/mcpServers/a/bogus');
  });

  it("an upstream's stderr is relayed at info as that server's own words, not as an mcpmux error", async () => {
    const peer = startRawMux(await writeConfig(config(two())));
    await peer.initialize();
    const line = await waitFor(() => peer.stderr().split('\n').find((l) => l.includes('upstream fixture \\"alpha\\"')), { what: "alpha's stderr relayed" });
    expect(JSON.parse(line)).toMatchObject({ level: 30, server: 'alpha', msg: "the server's own stderr, relayed (its words, not an mcpmux error)" });
  });

  it('stdio exits 0 after SIGTERM (clean drain) and stops its upstreams', async () => {
    const file = await writeConfig(config(two()));
    const peer = startRawMux(file);
    await peer.initialize();
    const pid = JSON.parse((await peer.request('tools/call', { name: 'alpha__whoami' })).result.content[0].text).pid as number;
    peer.child.kill('SIGTERM');
    expect(await peer.exited).toEqual({ code: 0, signal: null });
    expect(() => process.kill(pid, 0), `upstream pid ${pid} outlived mcpmux`).toThrow();
  });
});
