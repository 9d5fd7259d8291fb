// Token counting of tool definitions (src/surface/tokens.ts) and `mcpmux tools --tokens`.
// The catalogues are listed live from real servers through the real binary: the reference
// servers installed in node_modules and the test fixtures.

import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { countTokens, estimateTokens, toolDefinitionText } from '../src/surface/tokens.js';
import { closeAll, connectStdio, everything, fixture, MUX_BIN, ROOT, runMux, tempDir, tempFile, WAIT_MS, writeConfig, type ServerEntry } from './helpers/harness.js';

afterEach(closeAll);

const pkg = (name: string, ...args: string[]): ServerEntry => ({
  command: process.execPath,
  args: [path.join(ROOT, 'node_modules/@modelcontextprotocol', name, 'dist/index.js'), ...args],
});

/** Every MCP server package installed in node_modules that lists its tools without credentials. */
function installedServers(): Record<string, ServerEntry> {
  return {
    everything: everything(),
    filesystem: pkg('server-filesystem', tempDir()),
    vanilla: pkg('server-basic-vanillajs', '--stdio'),
    sysmon: pkg('server-system-monitor', '--stdio'),
  };
}

function fixtureServers(): Record<string, ServerEntry> {
  return {
    upstream: fixture({ name: 'upstream', tools: 40 }),
    bridge: { command: process.execPath, args: [path.join(ROOT, 'test/fixtures/bridge-upstream.mjs'), '{}'] },
    modern: { command: process.execPath, args: [path.join(ROOT, 'test/fixtures/modern-upstream.mjs'), 'stdio', '{}'] },
  };
}

interface Report {
  encoding: string;
  servers: { server: string; tools: number; tokens: number }[];
  total: { tools: number; tokens: number };
}

/** `mcpmux tools --json` and `mcpmux tools --tokens --json` on the same config. */
async function listed(servers: Record<string, ServerEntry>): Promise<{ tools: Record<string, unknown>[]; report: Report }> {
  const config = await writeConfig({ mcpServers: servers });
  const [list, priced] = await Promise.all([runMux(['tools', '--json', '--config', config]), runMux(['tools', '--tokens', '--json', '--config', config])]);
  expect(list.status, list.stderr).toBe(0);
  expect(priced.status, priced.stderr).toBe(0);
  return { tools: JSON.parse(list.stdout), report: JSON.parse(priced.stdout) };
}

async function expectEstimateClose(servers: Record<string, ServerEntry>): Promise<void> {
  const { tools, report } = await listed(servers);
  expect(report.servers.map((s) => s.server)).toEqual(Object.keys(servers));
  let exactAll = 0;
  let estimateAll = 0;
  for (const row of report.servers) {
    // Every server is namespaced `<name>__` (more than one server, default separator).
    const mine = tools.filter((t) => String(t.name).startsWith(`${row.server}__`));
    expect(mine.length, row.server).toBeGreaterThan(0);
    expect(row.tools, row.server).toBe(mine.length);
    let exact = 0;
    let estimate = 0;
    for (const t of mine) {
      exact += await countTokens(toolDefinitionText(t));
      estimate += estimateTokens(toolDefinitionText(t));
    }
    // The CLI's count is the exact count of what `tools --json` shows for that server.
    expect(row.tokens, row.server).toBe(exact);
    expect(Math.abs(estimate - exact) / exact, `${row.server}: estimate ${estimate}, exact ${exact}`).toBeLessThanOrEqual(0.1);
    exactAll += exact;
    estimateAll += estimate;
  }
  expect(report.total).toEqual({ tools: tools.length, tokens: exactAll });
  expect(Math.abs(estimateAll - exactAll) / exactAll).toBeLessThanOrEqual(0.1);
}

describe('token counts of tool definitions', () => {
  it('the estimate is within 10 % of the exact count on the installed server packages, per server and in total', async () => {
    await expectEstimateClose(installedServers());
  });

  it("the estimate is within 10 % of the exact count on the test fixtures' tools", async () => {
    await expectEstimateClose(fixtureServers());
  });

  it('counts the JSON a host receives for a tool', async () => {
    const tool = { name: 'read_file', description: 'Read a file', inputSchema: { type: 'object', properties: { path: { type: 'string' } } } };
    expect(toolDefinitionText(tool)).toBe(JSON.stringify(tool));
    // o200k_base: `{"`, `name`, `":"`, `read`, `_file`, ... a known small count, not zero.
    const n = await countTokens(toolDefinitionText(tool));
    expect(n).toBeGreaterThan(15);
    expect(n).toBeLessThan(40);
  });

  it('empty, huge and unicode inputs do not throw', async () => {
    expect(estimateTokens('')).toBe(0);
    expect(await countTokens('')).toBe(0);
    const huge = JSON.stringify({ name: 'x', description: 'lorem ipsum dolor sit amet, '.repeat(40_000) });
    const exactHuge = await countTokens(huge);
    expect(Math.abs(estimateTokens(huge) - exactHuge) / exactHuge).toBeLessThanOrEqual(0.1);
    const odd = [
      'ファイルを読み込みます。パスを指定してください。',
      'Читает файл по указанному пути',
      'emoji 🚀🔥 and a lone surrogate \ud800 and \udfff',
      'special tokens stay text: <|endoftext|> <|im_start|>',
      '\u0000\u0001\t\r\n\u2028\u00a0',
      '9'.repeat(10_000),
      '"'.repeat(10_000),
    ];
    for (const s of odd) {
      const e = estimateTokens(s);
      expect(Number.isInteger(e) && e > 0, JSON.stringify(s)).toBe(true);
      expect(await countTokens(s)).toBeGreaterThan(0);
    }
  });
});

describe('the daemon never loads the tokenizer', () => {
  // A module hook (run in the child, `node --import`) that writes every resolved URL to a file:
  // what the daemon's module graph pulled in, whatever path it took.
  function tracer(): { hooks: string; log: string } {
    const log = tempFile('resolved.log');
    writeFileSync(log, '');
    const hooksFile = tempFile('hooks.mjs');
    writeFileSync(
      hooksFile,
      `import { appendFileSync } from 'node:fs';\n` +
        `export async function resolve(spec, ctx, next) { const r = await next(spec, ctx); appendFileSync(${JSON.stringify(log)}, r.url + '\\n'); return r; }\n`,
    );
    const hooks = tempFile('register.mjs');
    writeFileSync(hooks, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooksFile).href)});\n`);
    return { hooks, log };
  }

  function runNode(args: string[]): Promise<{ status: number | null; stderr: string }> {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), WAIT_MS * 2);
    return new Promise((resolve) => child.once('close', (status) => (clearTimeout(timer), resolve({ status, stderr }))));
  }

  const script = (imports: string[], then = '') =>
    imports.map((m) => `await import(${JSON.stringify(pathToFileURL(path.join(ROOT, m)).href)});`).join('') + then;

  it("importing the daemon's modules does not resolve gpt-tokenizer; counting does (the trace works)", async () => {
    const daemon = tracer();
    const r1 = await runNode(['--import', daemon.hooks, '--input-type=module', '-e', script(['dist/cli/main.js', 'dist/cli/serve.js', 'dist/cli/stdio.js', 'dist/cli/stdio-runtime.js', 'dist/router/router.js', 'dist/surface/tokens.js'])]);
    expect(r1.status, r1.stderr).toBe(0);
    const seen = readFileSync(daemon.log, 'utf8');
    expect(seen).toContain('/dist/router/router.js');
    expect(seen).toContain('/dist/surface/tokens.js');
    expect(seen).not.toContain('gpt-tokenizer');

    const counting = tracer();
    const r2 = await runNode(['--import', counting.hooks, '--input-type=module', '-e', script(['dist/surface/tokens.js'], `const m = await import(${JSON.stringify(pathToFileURL(path.join(ROOT, 'dist/surface/tokens.js')).href)}); if ((await m.countTokens('hello world')) !== 2) process.exit(3);`)]);
    expect(r2.status, r2.stderr).toBe(0);
    expect(readFileSync(counting.log, 'utf8')).toContain('gpt-tokenizer');
  });

  it('a running stdio daemon serving tools/list does not load gpt-tokenizer', async () => {
    const { hooks, log } = tracer();
    const config = await writeConfig({ mcpServers: { upstream: fixture({ tools: 10 }) } });
    // `mcpmux stdio` under the trace, started by the SDK client as a host would, plus `--import`.
    const traced = await connectStdio({ command: process.execPath, args: ['--import', hooks, MUX_BIN, 'stdio', '--config', config] });
    try {
      const { tools } = await traced.client.listTools();
      expect(tools.length).toBeGreaterThanOrEqual(10);
    } finally {
      await traced.close();
    }
    const seen = readFileSync(log, 'utf8');
    expect(seen).toContain('/dist/cli/stdio.js');
    expect(seen).not.toContain('gpt-tokenizer');
  });
});

describe('mcpmux tools --tokens', () => {
  it('prints a table of servers, tools and tokens with a total, after policy', async () => {
    const config = await writeConfig({
      mcpServers: { alpha: fixture({ name: 'alpha', tools: 5, specialTools: false }), beta: fixture({ name: 'beta', tools: 12, specialTools: false }) },
    });
    const all = await runMux(['tools', '--tokens', '--json', '--config', config]);
    expect(all.status, all.stderr).toBe(0);
    const report = JSON.parse(all.stdout) as Report;
    expect(report.encoding).toBe('o200k_base');
    expect(report.servers.map((s) => [s.server, s.tools])).toEqual([['alpha', 5], ['beta', 12]]);
    expect(report.total.tokens).toBe(report.servers[0]!.tokens + report.servers[1]!.tokens);
    expect(report.servers[1]!.tokens).toBeGreaterThan(report.servers[0]!.tokens);

    const table = await runMux(['tools', '--tokens', '--config', config]);
    expect(table.status, table.stderr).toBe(0);
    const lines = table.stdout.split('\n');
    expect(lines[0]).toMatch(/^SERVER\s+TOOLS\s+TOKENS$/);
    expect(lines[1]).toMatch(new RegExp(`^alpha\\s+5\\s+${report.servers[0]!.tokens}$`));
    expect(lines[2]).toMatch(new RegExp(`^beta\\s+12\\s+${report.servers[1]!.tokens}$`));
    expect(lines[3]).toMatch(new RegExp(`^total\\s+17\\s+${report.total.tokens}$`));

    // A policy that hides beta's tools from the client hides their cost too.
    const denied = await writeConfig({
      policy: { tools: { deny: ['beta__*'] } },
      mcpServers: { alpha: fixture({ name: 'alpha', tools: 5, specialTools: false }), beta: fixture({ name: 'beta', tools: 12, specialTools: false }) },
    });
    const after = await runMux(['tools', '--tokens', '--json', '--config', denied]);
    expect(after.status, after.stderr).toBe(0);
    const r = JSON.parse(after.stdout) as Report;
    expect(r.servers).toEqual([report.servers[0], { server: 'beta', tools: 0, tokens: 0 }]);
    expect(r.total).toEqual({ tools: 5, tokens: report.servers[0]!.tokens });
  });

  it('refuses --tokens with --approve', async () => {
    const config = await writeConfig({ mcpServers: { alpha: fixture({ tools: 1 }) } });
    const r = await runMux(['tools', '--tokens', '--approve-all', '--config', config]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--tokens cannot be combined');
  });
});
