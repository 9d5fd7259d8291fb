// Every combination of host era x upstream era x transport (issue 13, scope 4): a legacy host
// (SDK 1.x) and a modern host (SDK 2.x, pinned to 2026-07-28), each over stdio (`mcpmux stdio`)
// and Streamable HTTP (`mcpmux serve`), against a legacy upstream (the SDK 1.x fixture) and a
// modern one (the SDK 2.x stateless fixture), each over stdio and HTTP. Each cell lists, calls,
// reads and gets a prompt. Test names read as the matrix: <host> -> <upstream>.

import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernHttp } from '@modelcontextprotocol/client';
import { StdioClientTransport as ModernStdio } from '@modelcontextprotocol/client/stdio';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport as LegacyStdio } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport as LegacyHttp } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { awaitJsonLine, fixture, MUX_BIN, ROOT, tempFile, writeConfig } from './helpers/harness.js';
import { startHttpFixture, type Fixture } from './helpers/http-fixture.js';

const MODERN_FIXTURE = path.join(ROOT, 'test/fixtures/modern-upstream.mjs');

/** What each upstream offers, as a host sees it through mcpmux. */
interface Upstream {
  label: string;
  server: string;
  call: { name: string; arguments: Record<string, unknown>; text: RegExp };
  prompt: { name: string; arguments: Record<string, string> };
  uri: string;
}

const UPSTREAMS: Upstream[] = [
  { label: 'legacy stdio upstream', server: 'ls', call: { name: 'ls__echo', arguments: { v: 1 }, text: /"v":1/ }, prompt: { name: 'ls__prompt_0', arguments: {} }, uri: 'ls+fixture://ls/res/0' },
  { label: 'legacy HTTP upstream', server: 'lh', call: { name: 'lh__echo', arguments: { v: 2 }, text: /"v":2/ }, prompt: { name: 'lh__prompt_0', arguments: {} }, uri: 'lh+fixture://lh/res/0' },
  { label: 'modern stdio upstream', server: 'ms', call: { name: 'ms__echo', arguments: { text: 'three' }, text: /^echo: three$/ }, prompt: { name: 'ms__review', arguments: { code: 'x' } }, uri: 'ms+file:///readme.txt' },
  { label: 'modern HTTP upstream', server: 'mh', call: { name: 'mh__echo', arguments: { text: 'four' }, text: /^echo: four$/ }, prompt: { name: 'mh__review', arguments: { code: 'y' } }, uri: 'mh+file:///readme.txt' },
];

/** The calls every host makes, whatever its SDK. */
interface Host {
  listTools(): Promise<string[]>;
  call(name: string, args: Record<string, unknown>): Promise<string>;
  read(uri: string): Promise<string>;
  prompt(name: string, args: Record<string, string>): Promise<number>;
  close(): Promise<void>;
}

let legacyHttp: Fixture;
let modernHttpChild: ChildProcess;
let config: string;
let d: Daemon;

beforeAll(async () => {
  legacyHttp = await startHttpFixture({ name: 'lh' });
  modernHttpChild = spawn(process.execPath, [MODERN_FIXTURE, 'http', JSON.stringify({ events: tempFile('mh.jsonl') })], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  modernHttpChild.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<void>((resolve) => modernHttpChild.once('exit', () => resolve()));
  const port = await awaitJsonLine(modernHttpChild.stderr!, exited, (j) => j.port as number | undefined, { ms: 15_000, what: 'the modern HTTP fixture', log: () => err });
  config = await writeConfig({
    mcpServers: {
      ls: fixture({ name: 'ls' }),
      lh: { url: `${legacyHttp.url}/mcp` },
      ms: { command: process.execPath, args: [MODERN_FIXTURE, 'stdio', JSON.stringify({ events: tempFile('ms.jsonl') })] },
      mh: { url: `http://127.0.0.1:${port}/mcp` },
    },
    // Every host checks each upstream's tool in the whole list: surface "all" (the four upstreams
    // offer more than 40 tools, so under the default "auto" a host would get the search surface).
    surface: { mode: 'all' },
  });
  d = await startDaemon(config);
}, 60_000);

afterAll(async () => {
  await stopAllDaemons();
  await legacyHttp?.close();
  modernHttpChild?.kill('SIGKILL');
});

/** The calls both SDKs' clients make alike (their results have the same shapes). */
interface AnyClient {
  listTools(): Promise<{ tools: { name: string }[] }>;
  callTool(p: { name: string; arguments: Record<string, unknown> }): Promise<{ content: unknown }>;
  readResource(p: { uri: string }): Promise<{ contents: unknown[] }>;
  getPrompt(p: { name: string; arguments: Record<string, string> }): Promise<{ messages: unknown[] }>;
  close(): Promise<void>;
}

function adapt(c: AnyClient): Host {
  return {
    listTools: async () => (await c.listTools()).tools.map((t) => t.name),
    call: async (name, args) => ((await c.callTool({ name, arguments: args })).content as { text: string }[])[0]!.text,
    read: async (uri) => ((await c.readResource({ uri })).contents[0] as { text: string }).text,
    prompt: async (name, args) => (await c.getPrompt({ name, arguments: args })).messages.length,
    close: () => c.close(),
  };
}

const HOSTS: { label: string; connect(): Promise<Host> }[] = [
  {
    label: 'legacy host over stdio',
    connect: async () => {
      const c = new LegacyClient({ name: 'legacy-stdio', version: '0' });
      await c.connect(new LegacyStdio({ command: process.execPath, args: [MUX_BIN, 'stdio', '--config', config], stderr: 'ignore' }));
      return adapt(c as unknown as AnyClient);
    },
  },
  {
    label: 'legacy host over Streamable HTTP',
    connect: async () => {
      const c = new LegacyClient({ name: 'legacy-http', version: '0' });
      await c.connect(new LegacyHttp(new URL(d.url)));
      return adapt(c as unknown as AnyClient);
    },
  },
  {
    label: 'modern host over stdio',
    connect: async () => {
      const c = new ModernClient({ name: 'modern-stdio', version: '0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
      await c.connect(new ModernStdio({ command: process.execPath, args: [MUX_BIN, 'stdio', '--config', config], stderr: 'ignore' }));
      return adapt(c as unknown as AnyClient);
    },
  },
  {
    label: 'modern host over Streamable HTTP',
    connect: async () => {
      const c = new ModernClient({ name: 'modern-http', version: '0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
      await c.connect(new ModernHttp(new URL(d.url)));
      return adapt(c as unknown as AnyClient);
    },
  },
];

describe.each(HOSTS)('$label', (host) => {
  let h: Host;
  beforeAll(async () => {
    h = await host.connect();
  });
  afterAll(() => h?.close());

  it.each(UPSTREAMS)(`${host.label} -> $label: lists, calls, reads, gets a prompt`, async (u) => {
    expect(await h.listTools()).toContain(u.call.name);
    expect(await h.call(u.call.name, u.call.arguments)).toMatch(u.call.text);
    expect((await h.read(u.uri)).length).toBeGreaterThan(0);
    expect(await h.prompt(u.prompt.name, u.prompt.arguments)).toBeGreaterThan(0);
  });
});
