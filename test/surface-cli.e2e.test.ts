// `mcpmux tools --tokens / --toolset / --search` (issue 20, "Also"): what each toolset and mode
// would send, and a search as a host sees it, printed by the BUILT binary over real fixture
// upstreams, and checked against what the daemon (`mcpmux stdio`) really sends a real SDK host.
// Run `npm run build` first.
import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, fixture, looseSchema, MUX_BIN, startMux, WAIT_MS, writeConfig } from './helpers/harness.js';
import type { SurfaceCost, TokenReport } from '../src/cli/tools.js';

const running = new Set<ChildProcess>();
afterEach(async () => {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
  await closeAll();
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `node bin/mcpmux.js ...args` to completion; MCPMUX_CONFIG is never inherited. */
function mcpmux(args: string[], extraEnv: Record<string, string> = {}, timeoutMs = 4 * WAIT_MS): Promise<Run> {
  const { MCPMUX_CONFIG: _ignored, ...env } = process.env;
  const child = spawn(process.execPath, [MUX_BIN, ...args], { env: { ...env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) => {
    child.on('close', (code) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Three fixtures of 20 tools each: 60 tools, more than maxDirectTools (40), so auto searches. */
const CONFIG = {
  mcpServers: { alpha: fixture({ name: 'alpha' }), beta: fixture({ name: 'beta' }), gamma: fixture({ name: 'gamma' }) },
  surface: { alwaysVisible: ['gamma__echo'] },
  toolsets: {
    a: { tools: ['alpha__*'] },
    ab: { tools: ['alpha__*', 'beta__*'], surface: 'search' },
  },
};



async function json<T>(args: string[], env: Record<string, string> = {}): Promise<T> {
  const r = await mcpmux(args, env);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as T;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

describe('mcpmux tools --tokens: per toolset and mode', () => {
  it('gives, for no toolset and each toolset, the exact all-mode and search-mode costs and what auto gives, consistent with the per-tool counts', async () => {
    const file = await writeConfig(CONFIG);
    const report = await json<TokenReport>(['tools', '--tokens', '--json', '--config', file]);
    expect(report.encoding).toBe('o200k_base');
    expect(report.client).toBe('anonymous');
    expect(report.total.tools).toBe(60);
    expect(report.tools).toHaveLength(60);
    expect(report.total.tokens).toBe(sum(report.tools.map((t) => t.tokens)));
    expect(report.surfaces.map((s) => s.toolset)).toEqual([null, 'a', 'ab']);
    const [none, a, ab] = report.surfaces as [SurfaceCost, SurfaceCost, SurfaceCost];

    // No toolset: every tool; auto weighs 60 > 40 and gives the search surface.
    expect(none.all.tools).toBe(60);
    expect(none.all.tokens).toBe(report.total.tokens);
    expect(Math.abs(none.all.estimate - none.all.tokens) / none.all.tokens).toBeLessThan(0.1);
    expect(none.search.names).toEqual(['search_tools', 'call_tool', 'gamma__echo']);
    expect(none.search.tokens).toBeLessThan(none.all.tokens / 4);
    expect(none.configured).toBe('auto');
    expect(none.auto.mode).toBe('search');
    expect(none.given).toEqual(none.auto);
    expect(none.given.reason).toContain('maxDirectTools');

    // Toolset a: alpha's 20 tools, exactly their per-tool counts; within both budgets, so auto lists them.
    const alpha = report.tools.filter((t) => t.name.startsWith('alpha__'));
    expect(a.all).toMatchObject({ tools: 20, tokens: sum(alpha.map((t) => t.tokens)) });
    expect(a.search.names).toEqual(['search_tools', 'call_tool']);
    expect(a.given.mode).toBe('all');

    // Toolset ab says "search": that is what a host gets, whatever auto would pick (40 is not more than 40).
    expect(ab.all.tools).toBe(40);
    expect(ab.configured).toBe('search');
    expect(ab.given).toEqual({ mode: 'search', reason: 'toolset "ab" is "search"' });
    expect(ab.auto.mode).toBe('all');
    expect(ab.search.tokens).toBeLessThan(ab.all.tokens);

    // The text form carries the same rows.
    const text = await mcpmux(['tools', '--tokens', '--config', file]);
    expect(text.code, text.stderr).toBe(0);
    const row = (toolset: string, mode: string, tools: number, tokens: number) => new RegExp(`^${toolset.replace(/[()]/g, '\\$&')}\\s+${mode}\\s+${tools}\\s+${tokens}\\b`, 'm');
    expect(text.stdout).toMatch(row('(none)', 'all', 60, none.all.tokens));
    expect(text.stdout).toMatch(new RegExp(`^\\(none\\)\\s+search\\s+3\\s+${none.search.tokens}\\s+<- auto: 60 tools`, 'm'));
    expect(text.stdout).toMatch(new RegExp(`^a\\s+all\\s+20\\s+${a.all.tokens}\\s+<- auto:`, 'm'));
    expect(text.stdout).toMatch(new RegExp(`^ab\\s+search\\s+2\\s+${ab.search.tokens}\\s+<- toolset "ab" is "search"`, 'm'));
    expect(text.stdout).toMatch(/^total\s+60\s+\d+/m);
  });

  it('--toolset narrows the table and the counts to one toolset; the search-mode list is the one the daemon sends that toolset', async () => {
    const file = await writeConfig(CONFIG);
    const report = await json<TokenReport>(['tools', '--tokens', '--json', '--toolset', 'ab', '--config', file]);
    expect(report.toolset).toBe('ab');
    expect(report.servers.map((s) => [s.server, s.tools])).toEqual([
      ['alpha', 20],
      ['beta', 20],
      ['gamma', 0],
    ]);
    expect(report.total.tools).toBe(40);
    expect(report.surfaces.map((s) => s.toolset)).toEqual(['ab']);
    expect(report.surfaces[0]!.all.tokens).toBe(report.total.tokens);

    const table = await json<{ name: string }[]>(['tools', '--json', '--toolset', 'a', '--config', file]);
    expect(table).toHaveLength(20);
    expect(table.every((t) => t.name.startsWith('alpha__'))).toBe(true);

    // The daemon, for a host on toolset ab, sends exactly the list the CLI counted.
    const host = await startMux(file, { args: ['--toolset', 'ab'] });
    const listed = (await host.client.request({ method: 'tools/list', params: {} }, looseSchema)) as { tools: { name: string }[] };
    expect(listed.tools.map((t) => t.name)).toEqual(report.surfaces[0]!.search.names);
  });

  it('--client shows what that client sees: its policy, and the toolset its token names', async () => {
    const file = await writeConfig({
      ...CONFIG,
      policy: { clients: { reader: { deny: ['alpha__echo'] } } },
      listen: { auth: { tokens: [{ client: 'reader', tokenEnv: 'MCPMUX_TEST_READER_TOKEN', toolset: 'a' }] } },
    });
    const env = { MCPMUX_TEST_READER_TOKEN: 'reader-token-0123456789abcdef' };
    const r = await mcpmux(['tools', '--tokens', '--json', '--client', 'reader', '--config', file], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('client reader\'s sessions get toolset "a"');
    const report = JSON.parse(r.stdout) as TokenReport;
    expect(report).toMatchObject({ client: 'reader', toolset: 'a', total: { tools: 19 } });
    expect(report.tools.map((t) => t.name)).not.toContain('alpha__echo');
    expect(report.surfaces.map((s) => [s.toolset, s.all.tools])).toEqual([['a', 19]]);
    // --toolset names another, as ?toolset= would.
    const other = await json<TokenReport>(['tools', '--tokens', '--json', '--client', 'reader', '--toolset', 'ab', '--config', file], env);
    expect(other.surfaces.map((s) => [s.toolset, s.all.tools])).toEqual([['ab', 39]]);
  });
});

describe('mcpmux tools --search', () => {
  it('answers exactly what the daemon\'s search_tools answers a host, the echo tools first', async () => {
    const file = await writeConfig(CONFIG);
    const cli = await json<{ content: { type: string; text: string }[]; structuredContent: { tools: { name: string; server: string; inputSchema: object }[] } }>([
      'tools', '--search', 'echo', '--limit', '5', '--json', '--config', file,
    ]);
    expect(cli.structuredContent.tools.slice(0, 3).map((t) => t.name).sort()).toEqual(['alpha__echo', 'beta__echo', 'gamma__echo']);
    expect(cli.structuredContent.tools.length).toBeLessThanOrEqual(5);
    for (const t of cli.structuredContent.tools) expect(typeof t.inputSchema).toBe('object');

    const host = await startMux(file);
    const listed = (await host.client.request({ method: 'tools/list', params: {} }, looseSchema)) as { tools: { name: string }[] };
    expect(listed.tools.map((t) => t.name)).toEqual(['search_tools', 'call_tool', 'gamma__echo']);
    const answer = await host.client.request({ method: 'tools/call', params: { name: 'search_tools', arguments: { query: 'echo', limit: 5 } } }, looseSchema);
    expect(cli).toEqual(answer);
    // The shared validation still answers a host's bad search as a tool error.
    const bad = (await host.client.request({ method: 'tools/call', params: { name: 'search_tools', arguments: { query: ' ' } } }, looseSchema)) as { isError?: boolean; content: { text: string }[] };
    expect(bad.isError).toBe(true);
    expect(bad.content[0]!.text).toContain('query must be a non-empty string');

    // The text form is the answer's content, as a host that reads only `content` shows its model.
    const text = await mcpmux(['tools', '--search', 'echo', '--limit', '5', '--config', file]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toBe(`${cli.content[0]!.text}\n`);
    expect(text.stdout).toMatch(/^[345] of 60 tools match "echo", best first/);

    // --toolset searches only that toolset's tools.
    const narrowed = await json<typeof cli>(['tools', '--search', 'echo', '--toolset', 'a', '--json', '--config', file]);
    expect(narrowed.structuredContent.tools[0]!.name).toBe('alpha__echo');
    expect(narrowed.structuredContent.tools.every((t) => t.server === 'alpha')).toBe(true);
    expect(narrowed.content[0]!.text).toMatch(/ of 20 tools match "echo"/);
  });

  it('refuses bad input clearly: an empty query, a bad --limit, an unknown toolset or client', async () => {
    const file = await writeConfig(CONFIG);
    const empty = await mcpmux(['tools', '--search', '  ', '--config', file]);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('--search needs a query');
    expect(empty.stdout).toBe('');

    const limit = await mcpmux(['tools', '--search', 'echo', '--limit', 'many', '--config', file]);
    expect(limit.code).toBe(2);
    expect(limit.stderr).toContain('--limit must be a number');
    const lonely = await mcpmux(['tools', '--limit', '3', '--config', file]);
    expect(lonely.code).toBe(2);
    expect(lonely.stderr).toContain('--limit goes with --search');

    const toolset = await mcpmux(['tools', '--tokens', '--toolset', 'abc', '--config', file]);
    expect(toolset.code).toBe(1);
    expect(toolset.stderr).toContain('--toolset: no toolset named "abc" (did you mean "ab"?)');
    expect(toolset.stdout).toBe('');

    const client = await mcpmux(['tools', '--search', 'echo', '--client', 'nobody', '--config', file]);
    expect(client.code).toBe(2);
    expect(client.stderr).toContain('--client: no client named "nobody"');

    const both = await mcpmux(['tools', '--search', 'echo', '--tokens', '--config', file]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--search cannot be combined with --tokens');
  });
});
