// `mcpmux import` and `mcpmux install` against host files written by the test into a temporary
// home (HOME, XDG_CONFIG_HOME and the working directory point there), run through the real binary.

import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { fixture, MUX_BIN, tempDir } from './helpers/harness.js';

interface Home {
  dir: string;
  project: string;
  env: NodeJS.ProcessEnv;
  write(rel: string, doc: unknown): string;
  run(...args: string[]): { code: number | null; stdout: string; stderr: string };
}

function home(): Home {
  const dir = tempDir();
  const project = path.join(dir, 'project');
  mkdirSync(project);
  const env = { ...process.env, HOME: dir, XDG_CONFIG_HOME: path.join(dir, '.config'), MCPMUX_INPUT_API_TOKEN: 'from-the-environment' };
  return {
    dir,
    project,
    env,
    write(rel, doc) {
      const file = path.join(rel.startsWith('project/') ? dir : dir, rel);
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, typeof doc === 'string' ? doc : JSON.stringify(doc, null, 2));
      return file;
    },
    run(...args) {
      const r = spawnSync(process.execPath, [MUX_BIN, ...args], { env, cwd: project, encoding: 'utf8', timeout: 60_000 });
      return { code: r.status, stdout: r.stdout, stderr: r.stderr };
    },
  };
}

const fx = fixture({ name: 'fx' });

it('imports every host\'s files, converts what mcpmux can express, reports the rest, and check accepts the result', async () => {
  const h = home();
  h.write('.config/Claude/claude_desktop_config.json', { mcpServers: { files: { ...fx, env: { ROOT: '/srv' } }, 'weird name!': fx } });
  h.write('.cursor/mcp.json', { mcpServers: { files: { ...fx, env: { ROOT: '/srv' } }, remote: { url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer ${env:CURSOR_TOKEN}' } } } });
  // VS Code: JSON with comments, `servers`, `inputs`, an SSE server and a stdio server with a prompted input.
  h.write(
    '.config/Code/User/mcp.json',
    `{
      // prompted values
      "inputs": [{ "type": "promptString", "id": "api-token", "description": "API token", "password": true }],
      "servers": {
        "legacy": { "type": "sse", "url": "http://127.0.0.1:9/sse" },
        "tokened": { "type": "stdio", "command": ${JSON.stringify(fx.command)}, "args": ${JSON.stringify(fx.args)}, "env": { "TOKEN": "\${input:api-token}" } },
        "withfile": { "command": "node", "envFile": "\${workspaceFolder}/.env" },
      },
    }`,
  );
  h.write('.codeium/windsurf/mcp_config.json', { mcpServers: { files: { ...fx, args: [...fx.args, '--other'] }, ws: { serverUrl: 'https://windsurf.example.com/mcp' } } });
  h.write('.claude.json', { numStartups: 12, mcpServers: { cc: fx }, projects: { '/some/project': { mcpServers: { projected: fx } } } });
  h.write('project/.mcp.json', { mcpServers: { local: { type: 'http', url: 'http://127.0.0.1:9/mcp' } } });

  const out = path.join(h.dir, 'mcpmux.json');
  const r = h.run('import', '-o', out);
  expect(r.code, r.stderr).toBe(0);
  const config = JSON.parse(readFileSync(out, 'utf8'));
  const servers = config.mcpServers;
  expect(Object.keys(servers).sort()).toEqual(['cc', 'files', 'files-windsurf', 'legacy', 'local', 'projected', 'remote', 'tokened', 'weird-name-', 'ws'].sort());
  expect(servers.files).toEqual({ ...fx, env: { ROOT: '/srv' } });
  expect(servers['files-windsurf'].args.at(-1)).toBe('--other');
  expect(servers.remote).toEqual({ url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer ${CURSOR_TOKEN}' } });
  expect(servers.legacy).toEqual({ url: 'http://127.0.0.1:9/sse', type: 'sse' });
  expect(servers.tokened.env).toEqual({ TOKEN: '${MCPMUX_INPUT_API_TOKEN}' });
  expect(servers.ws).toEqual({ url: 'https://windsurf.example.com/mcp' });
  expect(servers.local).toEqual({ url: 'http://127.0.0.1:9/mcp', type: 'http' });
  // Reported: the clash, the rename, what was left out and why, the variable to set.
  expect(r.stderr).toContain('"files" from');
  expect(r.stderr).toMatch(/"files" from .*cursor.* is the same as one already imported; kept once/);
  expect(r.stderr).toMatch(/"files" from .*windsurf.* differs from the one already imported; imported as "files-windsurf"/);
  expect(r.stderr).toMatch(/"weird name!" from .* imported as "weird-name-"/);
  expect(r.stderr).toMatch(/left out "withfile" from .*: envFile is not supported/);
  expect(r.stderr).toContain('set MCPMUX_INPUT_API_TOKEN before starting mcpmux (VS Code input "api-token": API token)');
  expect(r.stderr).toContain('set CURSOR_TOKEN before starting mcpmux (used by "remote")');
  h.env.CURSOR_TOKEN = 'a-cursor-token';

  const check = h.run('check', '--config', out);
  expect(check.code, check.stdout + check.stderr).toBe(0);

  // Never over an existing file without --force.
  expect(h.run('import', '-o', out).code).toBe(1);
  expect(h.run('import', '-o', out, '--force').code).toBe(0);
  // Without -o: the config on stdout.
  const one = h.run('import', '--from', 'cursor');
  expect(Object.keys(JSON.parse(one.stdout).mcpServers).sort()).toEqual(['files', 'remote']);
  // An unknown source is a usage error.
  expect(h.run('import', '--from', 'notahost').code).toBe(2);
});

it('install --dry-run shows the change and writes nothing; install keeps a backup, and the new host file parses', async () => {
  const h = home();
  const original = { globalShortcut: 'Ctrl+Space', mcpServers: { files: fx } };
  const hostFile = h.write('.config/Claude/claude_desktop_config.json', original);
  const out = path.join(h.dir, 'mcpmux.json');
  expect(h.run('import', '--from', 'claude', '-o', out).code).toBe(0);

  const dry = h.run('install', '--host', 'claude', '--config', out, '--dry-run');
  expect(dry.code, dry.stderr).toBe(0);
  expect(dry.stdout).toMatch(/^- {5}"files": \{/m);
  expect(dry.stdout).toMatch(/^\+ {5}"mcpmux": \{/m);
  expect(JSON.parse(readFileSync(hostFile, 'utf8'))).toEqual(original);
  expect(readdirSync(path.dirname(hostFile))).toEqual(['claude_desktop_config.json']);

  const done = h.run('install', '--host', 'claude', '--config', out);
  expect(done.code, done.stderr).toBe(0);
  const installed = JSON.parse(readFileSync(hostFile, 'utf8'));
  expect(installed.globalShortcut).toBe('Ctrl+Space');
  expect(installed.mcpServers).toEqual({ mcpmux: { command: process.execPath, args: [MUX_BIN, 'stdio', '--config', out] } });
  const backups = readdirSync(path.dirname(hostFile)).filter((f) => f.includes('.mcpmux-backup-'));
  expect(backups).toHaveLength(1);
  expect(JSON.parse(readFileSync(path.join(path.dirname(hostFile), backups[0]!), 'utf8'))).toEqual(original);
  expect(done.stdout).toContain(`To undo: mcpmux uninstall --host claude (restores ${path.join(path.dirname(hostFile), backups[0]!)})`);

  // VS Code keeps its servers under "servers", with a type.
  const vs = h.write('.config/Code/User/mcp.json', { inputs: [], servers: { a: fx } });
  expect(h.run('install', '--host', 'vscode', '--config', out).code).toBe(0);
  expect(JSON.parse(readFileSync(vs, 'utf8')).servers).toEqual({ mcpmux: { type: 'stdio', command: process.execPath, args: [MUX_BIN, 'stdio', '--config', out] } });
  // Usage errors: an unknown host, a missing config.
  expect(h.run('install', '--host', 'emacs', '--config', out).code).toBe(2);
  expect(h.run('install', '--host', 'claude', '--config', path.join(h.dir, 'nope.json')).code).toBe(2);
});
