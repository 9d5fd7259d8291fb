// The official MCP inspector (2.12, CLI) in 2026-07-28 mode against mcpmux (issue 13): a modern
// host nobody here wrote lists, calls, reads and gets a prompt of a legacy upstream through
// `mcpmux stdio` and `mcpmux serve`. It needs Node >= 22.19 (test/setup/node22.mjs installs one
// before the tests; on linux-x64 its absence fails this test, elsewhere it is skipped).

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { fixture, MUX_BIN, writeConfig } from './helpers/harness.js';
import { haveNode22, INSPECTOR, node22 } from './helpers/node22.js';

const run = promisify(execFile);

afterAll(stopAllDaemons);

/** One inspector CLI run in modern mode; its JSON answer. `target`: the server part of its command line. */
async function inspect(node: string, target: string[], method: string[]): Promise<any> {
  const { stdout } = await run(node, [INSPECTOR, '--cli', '--protocol-era', 'modern', '--format', 'json', ...method, ...target], { timeout: 60_000 });
  return JSON.parse(stdout);
}

describe('the MCP inspector in 2026-07-28 mode', () => {
  let config: string;
  let d: Daemon;
  beforeAll(async () => {
    if (!haveNode22) return; // the test says why it skips or fails
    config = await writeConfig({ mcpServers: { fx: fixture({ name: 'fx' }) } });
    d = await startDaemon(config);
  });

  const targets = (): [string, string[]][] => [
    ['mcpmux stdio', ['--', process.execPath, MUX_BIN, 'stdio', '--config', config]],
    ['mcpmux serve (Streamable HTTP)', ['--transport', 'http', d.url]],
  ];

  it('modern inspector -> mcpmux stdio and serve -> legacy stdio upstream: lists, calls, reads, gets a prompt', async (ctx) => {
    const node = node22(ctx);
    for (const [label, target] of targets()) {
      const tools = await inspect(node, target, ['--method', 'tools/list']);
      expect(tools.result.tools.map((t: { name: string }) => t.name), label).toContain('fx__echo');
      const call = await inspect(node, target, ['--method', 'tools/call', '--tool-name', 'fx__echo', '--tool-arg', 'via=inspector']);
      expect(call.result.structuredContent, label).toEqual({ via: 'inspector' });
      const read = await inspect(node, target, ['--method', 'resources/read', '--uri', 'fx+fixture://fx/res/0']);
      expect(read.result.contents[0].uri, label).toBe('fx+fixture://fx/res/0');
      const prompt = await inspect(node, target, ['--method', 'prompts/get', '--prompt-name', 'fx__prompt_0']);
      expect(prompt.result.messages.length, label).toBeGreaterThan(0);
    }
  }, 120_000);
});
