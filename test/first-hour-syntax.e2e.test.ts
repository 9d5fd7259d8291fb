// The first hour, syntax: mcpmux's own config is JSONC (comments and trailing commas, as the
// README's examples are written), through the real binary: `check` and `serve` accept it, a reload
// reads it the same way, and a broken one is refused with its line and column; an unknown key
// says which one was meant (issue 19 points 5 and 15).

import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { closeAll, fixture, runMux, startMux, tempDir, waitFor } from './helpers/harness.js';

afterAll(async () => {
  await stopAllDaemons();
  await closeAll();
});

/** A server entry as one line of JSON (the fixture's own options are a JSON string argument). */
const entry = (name: string) => JSON.stringify({ ...fixture({ name, tools: 2, specialTools: false }), prefix: name });

/** A config as a person writes it: a BOM, comments of both kinds, trailing commas everywhere. */
function commented(servers: string[]): string {
  return `\uFEFF// mcpmux config, written by hand
{
  "$schema": "./schema/config.schema.json",
  /* Servers. The URL-like args below are strings, not comments: http://x, /* and // stay. */
  "mcpServers": {
${servers.map((s) => `    "${s}": ${entry(s)}, // ${s}, with a trailing comma`).join('\n')}
  },
  "namespace": { "separator": "__", },
  "timeouts": {
    "requestMs": 60000,
    "startupWaitMs": 10000, // the machine may be slow
  },
}
`;
}

async function configFile(text: string): Promise<string> {
  const file = path.join(tempDir(), 'mcpmux.jsonc.json');
  await writeFile(file, text);
  return file;
}

describe('JSONC config through the real binary', () => {
  it('check and check --probe accept a config with comments and trailing commas', async () => {
    const file = await configFile(commented(['notes']));
    const r = await runMux(['check', '--config', file]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(file);
    expect(r.stdout).toMatch(/\bok\b/);
    const probe = await runMux(['check', '--probe', '--config', file]);
    expect(probe.status, probe.stderr).toBe(0);
    expect(probe.stdout).toMatch(/notes:.*\b2 tools\b/);
  });

  it('stdio (what a desktop host runs) serves its servers', async () => {
    const mux = await startMux(await configFile(commented(['notes', 'todo'])));
    try {
      const names = (await mux.client.listTools()).tools.map((t) => t.name).sort();
      expect(names).toHaveLength(4);
      expect(names.filter((n) => n.startsWith('notes__'))).toHaveLength(2);
      expect(names.filter((n) => n.startsWith('todo__'))).toHaveLength(2);
    } finally {
      await mux.close();
    }
  });

  it('serve starts with it and serves its servers; a reload reads the file the same way, and refuses a broken edit with line and column', async () => {
    const file = await configFile(commented(['notes']));
    const d = await startDaemon(file);
    const client = new Client({ name: 'syntax-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(d.url)));
    try {
      const names = (await client.listTools()).tools.map((t) => t.name);
      expect(names).toHaveLength(2);
      for (const n of names) expect(n).toMatch(/^notes__/);

      // An edit in the same style adds a server (the file watcher reloads).
      await writeFile(file, commented(['notes', 'todo']));
      await waitFor(() => /"msg":"config reloaded"/.test(d.stderr()) && d.stderr(), { what: 'the reload' });
      expect(d.stderr()).toMatch(/"added":\["todo"\][^\n]*"msg":"config reloaded"/);

      // A broken edit: refused with where and why, and the daemon keeps its config.
      await writeFile(file, '{\n  // oops\n  "mcpServers": {\n    "notes": {}]\n}\n');
      const status = async () => (await (await fetch(`${d.base}/status`)).json()) as { lastReload: { result: string; error?: string } | null; upstreams: unknown[] };
      const refused = await waitFor(async () => { const s = await status(); return s.lastReload?.result === 'refused' && s; }, { what: 'the refusal' });
      expect(refused.lastReload!.error).toBe(`invalid config ${file}:\n  /: invalid JSON at line 4, column 16: Unexpected ']' (comma expected)`);
      expect(refused.upstreams).toHaveLength(2);
    } finally {
      await client.close();
    }
    expect((await d.stop()).code).toBe(0);
  }, 90_000);

  it('an invalid file: check and serve exit 1 naming the file, the line and the column; a cut-off one points at its end', async () => {
    const stray = await configFile('// servers\n{\n  "mcpServers": {\n    "a": { "command": "x", },\n  ],\n}\n');
    for (const command of ['check', 'serve']) {
      const r = await runMux([command, '--config', stray, ...(command === 'serve' ? ['--port', '0'] : [])], { timeoutMs: 30_000 });
      expect(r.status, command).toBe(1);
      expect(r.stderr).toContain(`invalid config ${stray}:\n  /: invalid JSON at line 5, column 3: Unexpected ']' (property name expected)`);
      expect(r.stderr).not.toContain('"msg":"listening"');
      expect(r.stdout).toBe('');
    }
    const cut = await configFile('{\n  "mcpServers": {\n    "a": { "command": "x" } // the rest went missing\n');
    const r = await runMux(['check', '--config', cut]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('/: invalid JSON at line 3, column 53: Unexpected end of file (close brace expected)');
    const empty = await configFile('');
    expect((await runMux(['check', '--config', empty])).stderr).toContain('/: invalid JSON at line 1, column 1: Empty file');
  });

  it('an unknown key says which key was meant, at its JSON path, and exits 1', async () => {
    const file = await configFile(`{
  "mcpServers": { "a": { "comand": "x", }, },
  "ratelimits": [], // a typo of rateLimits
  "listen": { "prot": 7330 },
  "frobnicate": true,
}`);
    const r = await runMux(['check', '--config', file]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('  /mcpServers/a/comand: unknown key "comand" (did you mean "command"?)');
    expect(r.stderr).toContain('  /ratelimits: unknown key "ratelimits" (did you mean "rateLimits"?)');
    expect(r.stderr).toContain('  /listen/prot: unknown key "prot" (did you mean "port"?)');
    expect(r.stderr).toMatch(/ {2}\/frobnicate: unknown key "frobnicate"\n/);
  });
});
