// Issue 19, the migration a desktop user does first: `import`, `install`, re-install and
// `uninstall`, through the real binary, against host files written as the hosts write them
// (comments, trailing commas) in a fake HOME; what the host then runs is the exact command of
// the installed entry under a desktop's bare environment (`env -i HOME=... PATH=/usr/bin:/bin`
// plus the entry's env).

import { spawnSync } from 'node:child_process';
import { chmodSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { fixture, MUX_BIN, processesMentioning, startRawMux, tempDir, waitFor, WAIT_MS, type RawPeer } from './helpers/harness.js';

interface Home {
  dir: string;
  project: string;
  env: NodeJS.ProcessEnv;
  write(rel: string, text: string): string;
  run(...args: string[]): { code: number | null; stdout: string; stderr: string };
}

/** A fake home: HOME there, XDG_CONFIG_HOME unset (hosts' files at their default places), cwd a project in it. */
function home(extraEnv: NodeJS.ProcessEnv = {}): Home {
  const dir = tempDir();
  const project = path.join(dir, 'project');
  mkdirSync(project);
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: dir, ...extraEnv };
  delete env.XDG_CONFIG_HOME;
  delete env.MCPMUX_CONFIG;
  delete env.MCPMUX_PARENT_CONFIGS;
  return {
    dir,
    project,
    env,
    write(rel, text) {
      const file = path.join(dir, rel);
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, text);
      return file;
    },
    run(...args) {
      const r = spawnSync(process.execPath, [MUX_BIN, ...args], { env, cwd: project, encoding: 'utf8', timeout: 60_000 });
      return { code: r.status, stdout: r.stdout, stderr: r.stderr };
    },
  };
}

const fx = fixture({ name: 'fx', tools: 2, specialTools: false });
const j = (v: unknown): string => JSON.stringify(v);

const peers: RawPeer[] = [];
afterEach(async () => {
  await Promise.all(peers.splice(0).map((p) => p.close(WAIT_MS)));
});

/** Starts the host file's mcpmux entry exactly as a desktop host would: bare environment plus the entry's own env. */
function runAsHost(h: Home, entry: { command: string; args: string[]; env?: Record<string, string> }): RawPeer {
  const vars = Object.entries(entry.env ?? {}).map(([k, v]) => `${k}=${v}`);
  const peer = startRawMux({ command: '/usr/bin/env', args: ['-i', `HOME=${h.dir}`, 'PATH=/usr/bin:/bin', ...vars, entry.command, ...entry.args], cwd: h.dir });
  peers.push(peer);
  return peer;
}

async function toolNames(peer: RawPeer): Promise<string[]> {
  const init = await peer.initialize();
  expect(init.result, peer.stderr()).toBeDefined();
  const list = await peer.request('tools/list', {});
  return (list.result.tools as { name: string }[]).map((t) => t.name).sort();
}


const CLAUDE = '.config/Claude/claude_desktop_config.json';

describe('host files are JSONC (point 5)', () => {
  it('imports files with comments and trailing commas, and install edits only the servers key, keeping every comment', async () => {
    const h = home();
    const cursor = h.write('.cursor/mcp.json', `{\n  // my servers\n  "mcpServers": {\n    "files": ${j(fx)}, // the files one\n  },\n}\n`);
    const vscodeText = `// VS Code user MCP file\n{\n\t/* prompted */\n\t"inputs": [],\n\t"servers": {\n\t\t"a": ${j({ type: 'stdio', ...fx })},\n\t},\n\t// keep me\n\t"other": { "x": 1, },\n}\n`;
    const vscode = h.write('.config/Code/User/mcp.json', vscodeText);
    const out = path.join(h.dir, 'mcpmux.json');
    const r = h.run('import', '--from', 'cursor', '--from', 'vscode', '-o', out);
    expect(r.code, r.stderr).toBe(0);
    expect(Object.keys(JSON.parse(readFileSync(out, 'utf8')).mcpServers).sort()).toEqual(['a', 'files']);

    const inst = h.run('install', '--host', 'vscode', '--config', out);
    expect(inst.code, inst.stderr).toBe(0);
    const after = readFileSync(vscode, 'utf8');
    // Everything outside the servers key is as VS Code (or the person) wrote it, tabs, comments and trailing commas included.
    expect(after.startsWith('// VS Code user MCP file\n{\n\t/* prompted */\n\t"inputs": [],\n\t"servers": {')).toBe(true);
    expect(after.endsWith('\t// keep me\n\t"other": { "x": 1, },\n}\n')).toBe(true);
    expect(after).toContain('\t\t"mcpmux": {');
    // Cursor's file was not touched.
    expect(readFileSync(cursor, 'utf8')).toContain('// the files one');
  });

  it('a host file that is not JSONC makes import fail with its name, line and column (at its usual place and with --from FILE)', () => {
    const h = home();
    h.write('.cursor/mcp.json', '{\n  "mcpServers": {\n    "files": { "command": "x" }\n    "second": {}\n  }\n}\n');
    h.write(CLAUDE, j({ mcpServers: { ok: fx } }));
    const all = h.run('import', '-o', path.join(h.dir, 'out.json'));
    expect(all.code).toBe(1);
    expect(all.stderr).toContain(`${path.join(h.dir, '.cursor/mcp.json')}: invalid JSON at line 4, column 5`);
    expect(() => readFileSync(path.join(h.dir, 'out.json'))).toThrow(); // nothing written
    const broken = h.write('broken.json', '{ "mcpServers": { "a": { "command": "x", } ');
    const one = h.run('import', '--from', broken);
    expect(one.code).toBe(1);
    expect(one.stderr).toMatch(new RegExp(`${broken.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: invalid JSON at line 1, column \\d+`));
    expect(one.stdout).toBe('');
  });
});

describe('mcpmux never runs itself (point 2)', () => {
  it('after install, import again leaves the mcpmux entry out with a note', () => {
    const h = home();
    h.write(CLAUDE, `{\n  // Claude's own file\n  "mcpServers": { "files": ${j(fx)} }\n}\n`);
    const out = path.join(h.dir, 'mcpmux.json');
    expect(h.run('import', '--from', 'claude', '-o', out).code).toBe(0);
    expect(h.run('install', '--host', 'claude', '--config', out).code).toBe(0);
    // npx and bare `mcpmux` spellings are mcpmux too.
    h.write('.cursor/mcp.json', j({ mcpServers: { viaNpx: { command: 'npx', args: ['-y', 'mcpmux', 'stdio', '--config', out] }, bridge: { command: 'mcpmux', args: ['connect'] }, other: fx } }));
    const again = h.run('import', '--from', 'claude', '--from', 'cursor');
    expect(again.code, again.stderr).toBe(0);
    expect(Object.keys(JSON.parse(again.stdout).mcpServers)).toEqual(['other']);
    expect(again.stderr).toMatch(/left out "mcpmux" from .*claude_desktop_config\.json: it runs mcpmux itself \(mcpmux stdio --config .*mcpmux\.json\)/);
    expect(again.stderr).toMatch(/left out "viaNpx" from .*: it runs mcpmux itself/);
    expect(again.stderr).toMatch(/left out "bridge" from .*: it runs mcpmux itself \(mcpmux connect\)/);
  });

  it('check and stdio refuse a config that runs mcpmux on itself, directly or through another config', async () => {
    const h = home();
    const a = path.join(h.dir, 'a.json');
    const b = path.join(h.dir, 'b.json');
    writeFileSync(a, j({ mcpServers: { files: fx, self: { command: process.execPath, args: [MUX_BIN, 'stdio', '--config', a] } } }));
    const check = h.run('check', '--config', a);
    expect(check.code).toBe(1);
    expect(check.stderr).toMatch(/\/mcpServers\/self: runs mcpmux on this same config/);
    const stdio = h.run('stdio', '--config', a);
    expect(stdio.code).toBe(1);
    expect(stdio.stderr).toMatch(/\/mcpServers\/self: runs mcpmux on this same config/);
    // A -> B -> A, B named relative to A's folder through the server's cwd.
    writeFileSync(a, j({ mcpServers: { files: fx, viaB: { command: 'mcpmux', args: ['stdio', '-c', 'b.json'], cwd: h.dir } } }));
    writeFileSync(b, `{ // B runs A\n "mcpServers": { "backToA": { "command": "npx", "args": ["mcpmux", "stdio", "--config=${a}"] }, } }`);
    const chain = h.run('check', '--config', a);
    expect(chain.code).toBe(1);
    expect(chain.stderr).toContain('/mcpServers/viaB: runs mcpmux on a chain of configs that comes back to');
    expect(chain.stderr).toContain(`${j(a)} -> ${j(b)} -> ${j(a)}`);
    // A config that runs mcpmux on another config that does not come back is fine.
    writeFileSync(b, j({ mcpServers: { files: fx } }));
    expect(h.run('check', '--config', a).code).toBe(0);
  });

  it('an mcpmux started by an mcpmux on the same config refuses to start, so no chain of processes grows', async () => {
    const h = home();
    const config = path.join(h.dir, `looping-${process.pid}.json`);
    // A wrapper hides the loop from the config check: only the environment marker can stop it.
    const wrapper = h.write('bin/wrapped-mux.sh', `#!/bin/sh\nexec ${j(process.execPath)} ${j(MUX_BIN)} stdio --config ${j(config)}\n`);
    chmodSync(wrapper, 0o755);
    writeFileSync(config, j({ mcpServers: { files: fx, hidden: { command: wrapper, restart: { maxRetries: 0 } } }, timeouts: { startupMs: 30_000, startupWaitMs: 30_000 } }));
    expect(h.run('check', '--config', config).code).toBe(0); // the check cannot see through the script

    const refused = spawnSync(process.execPath, [MUX_BIN, 'stdio', '--config', config], { env: { ...h.env, MCPMUX_PARENT_CONFIGS: ['/elsewhere.json', config].join(path.delimiter) }, encoding: 'utf8', timeout: 60_000 });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain('refusing to start: this mcpmux was started by another mcpmux running the same config');
    const daemon = spawnSync(process.execPath, [MUX_BIN, 'serve', '--config', config, '--port', '0'], { env: { ...h.env, MCPMUX_PARENT_CONFIGS: config }, encoding: 'utf8', timeout: 60_000 });
    expect(daemon.status).toBe(1);
    expect(daemon.stderr).toContain('refusing to start');

    const parent = runAsHost(h, { command: process.execPath, args: [MUX_BIN, 'stdio', '--config', config] });
    expect(await toolNames(parent)).toEqual(['files__tool_0', 'files__tool_1']);
    // The nested mcpmux said why it would not start, and it is gone: only the parent runs this config.
    await waitFor(() => parent.stderr().includes('refusing to start'), { what: "the nested mcpmux's refusal, relayed" });
    await waitFor(() => processesMentioning(config).length === 1, { what: 'one process left on the config' });
    expect(processesMentioning(config)).toEqual([parent.child.pid]);
  });
});

describe('re-install and undo (point 3)', () => {
  it('a second install is a no-op without a new backup, and uninstall gives back the original file, comments included', async () => {
    const h = home();
    const original = `{\n  // Claude Desktop\n  "globalShortcut": "Ctrl+Space",\n  "mcpServers": {\n    "files": ${j(fx)}\n  }\n}\n`;
    const file = h.write(CLAUDE, original);
    const out = path.join(h.dir, 'mcpmux.json');
    const other = path.join(h.dir, 'other.json');
    expect(h.run('import', '--from', 'claude', '-o', out).code).toBe(0);
    writeFileSync(other, readFileSync(out));
    const backups = () => readdirSync(path.dirname(file)).filter((f) => f.includes('.mcpmux-backup-'));

    const first = h.run('install', '--host', 'claude', '--config', out);
    expect(first.code, first.stderr).toBe(0);
    expect(backups()).toHaveLength(1);
    const backup = path.join(path.dirname(file), backups()[0]!);
    expect(first.stdout).toContain(`To undo: mcpmux uninstall --host claude (restores ${backup})`);
    const installed = readFileSync(file, 'utf8');

    const second = h.run('install', '--host', 'claude', '--config', out);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain('already runs mcpmux');
    expect(second.stdout).toContain('nothing to do');
    expect(second.stdout).toContain(`(restores ${backup})`);
    expect(readFileSync(file, 'utf8')).toBe(installed);
    expect(backups()).toHaveLength(1);

    // Another config: the entry is updated, still no backup of the installed file.
    const third = h.run('install', '--host', 'claude', '--config', other);
    expect(third.code, third.stderr).toBe(0);
    expect(third.stdout).toContain('updated the mcpmux entry');
    expect(backups()).toHaveLength(1);
    expect(JSON.parse(readFileSync(file, 'utf8').replace(/^\s*\/\/.*$/m, '')).mcpServers.mcpmux.args).toEqual([MUX_BIN, 'stdio', '--config', other]);

    const undo = h.run('uninstall', '--host', 'claude');
    expect(undo.code, undo.stderr).toBe(0);
    expect(undo.stdout).toContain(`restored ${file} from ${backup}: 1 server(s) (files)`);
    expect(readFileSync(file, 'utf8')).toBe(original);
    // Nothing left to undo.
    const again = h.run('uninstall', '--host', 'claude');
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('does not run mcpmux; nothing to undo');
  });

  it('uninstall without a backup removes the mcpmux entry and says so; with other keys changed since, only the servers come back', () => {
    const h = home();
    const file = h.write(CLAUDE, `{\n  "theme": "dark", // mine\n  "mcpServers": { "mcpmux": { "command": "mcpmux", "args": ["stdio", "--config", "/x.json"] }, "kept": ${j(fx)} }\n}\n`);
    const r = h.run('uninstall', '--host', 'claude');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('no backup of');
    expect(r.stdout).toContain('removed the mcpmux entry (mcpmux)');
    const text = readFileSync(file, 'utf8');
    expect(text).toContain('"theme": "dark", // mine');
    expect(text).toContain('"kept"');
    expect(text).not.toContain('"mcpmux"');

    // The host changed its other keys after install: uninstall keeps them, and brings back the servers.
    const h2 = home();
    const f2 = h2.write(CLAUDE, j({ numStartups: 1, mcpServers: { files: fx } }));
    const out = path.join(h2.dir, 'mcpmux.json');
    expect(h2.run('import', '--from', 'claude', '-o', out).code).toBe(0);
    expect(h2.run('install', '--host', 'claude', '--config', out).code).toBe(0);
    const now = JSON.parse(readFileSync(f2, 'utf8'));
    writeFileSync(f2, j({ ...now, numStartups: 7 }));
    const undo = h2.run('uninstall', '--host', 'claude');
    expect(undo.code, undo.stderr).toBe(0);
    expect(undo.stdout).toContain('the rest of the file, changed since install, is kept as it is now');
    expect(JSON.parse(readFileSync(f2, 'utf8'))).toEqual({ numStartups: 7, mcpServers: { files: fx } });
  });
});

describe('VS Code and Claude Code (point 4)', () => {
  it("resolves VS Code's predefined variables from the file's location; the user file's ${workspaceFolder} is left out with a note", () => {
    const h = home();
    const ws = path.join(h.project, '.vscode', 'mcp.json');
    mkdirSync(path.dirname(ws), { recursive: true });
    writeFileSync(
      ws,
      `{\n  "servers": {\n    "local": { "command": "node", "args": ["\${workspaceFolder}\${pathSeparator}server.js", "\${workspaceFolderBasename}", "\${userHome}/data"], "cwd": "\${workspaceFolder}", },\n  },\n}\n`,
    );
    h.write('.config/Code/User/mcp.json', `{ "servers": { "needsFolder": { "command": "node", "args": ["\${workspaceFolder}/x.js"] }, "plain": ${j(fx)}, } }`);
    const r = h.run('import', '--from', 'vscode');
    expect(r.code, r.stderr).toBe(0);
    const servers = JSON.parse(r.stdout).mcpServers;
    expect(servers.local).toEqual({ command: 'node', args: [`${h.project}${path.sep}server.js`, 'project', `${h.dir}/data`], cwd: h.project });
    expect(servers.plain).toEqual(fx);
    expect(servers.needsFolder).toBeUndefined();
    expect(r.stderr).toMatch(/left out "needsFolder" from .*User\/mcp\.json: \$\{workspaceFolder\} has no value in a user-level file/);
    expect(r.stderr).not.toMatch(/set (workspaceFolder|userHome)/);
  });

  it('install --host vscode edits the file the servers came from and says which other file still runs servers', async () => {
    const h = home();
    const ws = path.join(h.project, '.vscode', 'mcp.json');
    mkdirSync(path.dirname(ws), { recursive: true });
    writeFileSync(ws, `{\n  // workspace servers\n  "servers": { "local": ${j(fx)}, },\n}\n`);
    const out = path.join(h.dir, 'mcpmux.json');
    expect(h.run('import', '--from', 'vscode', '-o', out).code).toBe(0);
    // Only the workspace file has servers: that is the one edited (no user file is created).
    const r = h.run('install', '--host', 'vscode', '--config', out);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`${ws} now runs mcpmux`);
    expect(readFileSync(ws, 'utf8')).toContain('// workspace servers');
    expect(() => readFileSync(path.join(h.dir, '.config/Code/User/mcp.json'))).toThrow();
    const entry = JSON.parse(readFileSync(ws, 'utf8').replace(/\/\/.*$/gm, '').replace(/,(\s*[}\]])/g, '$1')).servers.mcpmux;
    expect(entry.type).toBe('stdio');
    expect(await toolNames(runAsHost(h, entry))).toEqual(['local__tool_0', 'local__tool_1']);

    // Both files have servers: the user file is edited, and the workspace's are named as still running.
    const h2 = home();
    const ws2 = path.join(h2.project, '.vscode', 'mcp.json');
    mkdirSync(path.dirname(ws2), { recursive: true });
    writeFileSync(ws2, j({ servers: { local: fx } }));
    const user = h2.write('.config/Code/User/mcp.json', j({ servers: { global: fx } }));
    const out2 = path.join(h2.dir, 'mcpmux.json');
    expect(h2.run('import', '--from', 'vscode', '-o', out2).code).toBe(0);
    const r2 = h2.run('install', '--host', 'vscode', '--config', out2);
    expect(r2.code, r2.stderr).toBe(0);
    expect(r2.stdout).toContain(`${user} now runs mcpmux`);
    expect(r2.stdout).toContain(`Note: ${ws2} still runs 1 server(s) (local) beside mcpmux; to move those too: mcpmux install --host vscode --file ${j(ws2)}`);
  });

  it('install --host claude-code replaces only the top-level mcpServers of ~/.claude.json and says the projects\' servers still run', async () => {
    const h = home();
    const doc = { numStartups: 12, tipsHistory: { a: 1 }, mcpServers: { cc: fx }, projects: { '/some/project': { allowedTools: [], mcpServers: { projected: fx } } } };
    const file = h.write('.claude.json', JSON.stringify(doc, null, 2));
    const out = path.join(h.dir, 'mcpmux.json');
    expect(h.run('import', '--from', 'claude-code', '-o', out).code).toBe(0);
    const r = h.run('install', '--host', 'claude-code', '--config', out);
    expect(r.code, r.stderr).toBe(0);
    const after = JSON.parse(readFileSync(file, 'utf8'));
    expect(after).toEqual({ ...doc, mcpServers: { mcpmux: { command: process.execPath, args: [MUX_BIN, 'stdio', '--config', out] } } });
    expect(r.stdout).toContain('Claude Code still runs the servers of project /some/project (projected');
    expect(await toolNames(runAsHost(h, after.mcpServers.mcpmux))).toEqual(['cc__tool_0', 'cc__tool_1', 'projected__tool_0', 'projected__tool_1']);
    const undo = h.run('uninstall', '--host', 'claude-code');
    expect(undo.code, undo.stderr).toBe(0);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual(doc);
  });
});

describe("install checks the host's environment (point 1)", () => {
  /** A home whose Claude runs a server needing API_TOKEN beside one that needs nothing. */
  function withTokenServer(shellToken: string | undefined): { h: Home; out: string; file: string } {
    const h = home(shellToken === undefined ? {} : { API_TOKEN: shellToken });
    if (shellToken === undefined) delete h.env.API_TOKEN;
    const file = h.write(CLAUDE, j({ mcpServers: { plain: fx, tokened: { ...fixture({ name: 'tokened', tools: 1, specialTools: false }), env: { TOKEN: '${API_TOKEN}' } } } }));
    const out = path.join(h.dir, 'mcpmux.json');
    expect(h.run('import', '--from', 'claude', '-o', out).code).toBe(0);
    return { h, out, file };
  }

  it('refuses, naming the server and the variable the host would not give mcpmux, even when this shell has it', () => {
    const { h, out, file } = withTokenServer('s3cret-value');
    const before = readFileSync(file, 'utf8');
    const r = h.run('install', '--host', 'claude', '--config', out);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('1 server(s) would not start in the environment the host gives mcpmux');
    expect(r.stderr).toContain('tokened: environment variable API_TOKEN is not set');
    expect(r.stderr).toContain('This shell has API_TOKEN: --env-from-shell copies them');
    expect(r.stderr).not.toContain('s3cret-value');
    expect(readFileSync(file, 'utf8')).toBe(before);
  });

  it('--env-from-shell puts the value into the entry, and the host then starts every server', async () => {
    const { h, out, file } = withTokenServer('s3cret-value');
    const r = h.run('install', '--host', 'claude', '--config', out, '--env-from-shell');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('copied API_TOKEN from this shell into the host entry');
    const entry = JSON.parse(readFileSync(file, 'utf8')).mcpServers.mcpmux;
    expect(entry.env).toEqual({ API_TOKEN: 's3cret-value' });
    expect(await toolNames(runAsHost(h, entry))).toEqual(['plain__tool_0', 'plain__tool_1', 'tokened__tool_0']);
    // Re-installing keeps the copied value (and is a no-op).
    const again = h.run('install', '--host', 'claude', '--config', out);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('nothing to do');
  });

  it('--force installs anyway: the host gets the servers that need nothing', async () => {
    const { h, out, file } = withTokenServer(undefined);
    const plain = h.run('install', '--host', 'claude', '--config', out, '--env-from-shell');
    expect(plain.code).toBe(1);
    expect(plain.stderr).toContain('Not set in this shell either: API_TOKEN');
    const r = h.run('install', '--host', 'claude', '--config', out, '--force');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('installing anyway (--force)');
    const entry = JSON.parse(readFileSync(file, 'utf8')).mcpServers.mcpmux;
    expect(entry.env).toBeUndefined();
    expect(await toolNames(runAsHost(h, entry))).toEqual(['plain__tool_0', 'plain__tool_1']);
  });
});

describe('review fixes', () => {
  it('import leaves out mcpmux behind cmd /c, npx -p mcpmux, and nodejs (point 10)', () => {
    const h = home();
    const cfg = path.join(h.dir, 'mcpmux.json');
    h.write(
      CLAUDE,
      j({
        mcpServers: {
          cmdLine: { command: 'cmd', args: ['/c', `npx -y mcpmux stdio --config ${cfg}`] },
          cmdExe: { command: 'C:\\Windows\\System32\\cmd.exe', args: ['/C', 'npx', '-y', 'mcpmux', 'stdio', '--config', cfg] },
          npxPackage: { command: 'npx', args: ['-y', '-p', 'mcpmux', 'mcpmux', 'stdio', '--config', cfg] },
          npxLongPackage: { command: 'npx', args: ['--package', 'mcpmux@latest', 'mcpmux', 'connect'] },
          debianNode: { command: '/usr/bin/nodejs', args: ['/opt/mcpmux/bin/mcpmux.js', 'stdio', '-c', cfg] },
          cmdOther: { command: 'cmd', args: ['/c', 'npx', '-y', 'some-server'] },
          files: fx,
        },
      }),
    );
    const r = h.run('import', '--from', 'claude');
    expect(r.code, r.stderr).toBe(0);
    expect(Object.keys(JSON.parse(r.stdout).mcpServers).sort()).toEqual(['cmdOther', 'files']);
    for (const name of ['cmdLine', 'cmdExe', 'npxPackage', 'debianNode']) expect(r.stderr).toMatch(new RegExp(`left out "${name}" from .*: it runs mcpmux itself \\(mcpmux stdio --config ${cfg}\\)`));
    expect(r.stderr).toMatch(/left out "npxLongPackage" from .*: it runs mcpmux itself \(mcpmux connect\)/);
  });
});

describe("Cursor's user file has no workspace folder (point 3)", () => {
  it("${workspaceFolder} in ~/.cursor/mcp.json is left out, in a workspace's .cursor/mcp.json it is the workspace", () => {
    const h = home();
    h.write('.cursor/mcp.json', j({ mcpServers: { userLevel: { command: 'node', args: ['${workspaceFolder}/x.js'] }, plain: fx } }));
    const ws = path.join(h.project, '.cursor', 'mcp.json');
    mkdirSync(path.dirname(ws), { recursive: true });
    writeFileSync(ws, j({ mcpServers: { local: { command: 'node', args: ['${workspaceFolder}/y.js', '${workspaceFolderBasename}'] } } }));
    const r = h.run('import', '--from', 'cursor');
    expect(r.code, r.stderr).toBe(0);
    const servers = JSON.parse(r.stdout).mcpServers;
    expect(servers.userLevel).toBeUndefined();
    expect(r.stderr).toMatch(/left out "userLevel" from .*\.cursor\/mcp\.json: \$\{workspaceFolder\} has no value in a user-level file/);
    expect(servers.local).toEqual({ command: 'node', args: [`${h.project}/y.js`, 'project'] });
    expect(servers.plain).toEqual(fx);
    // The same user file named with --from FILE is still the user file.
    const direct = h.run('import', '--from', path.join(h.dir, '.cursor/mcp.json'));
    expect(direct.code, direct.stderr).toBe(0);
    expect(JSON.parse(direct.stdout).mcpServers.userLevel).toBeUndefined();
  });
});

describe('a symlinked host file stays a symlink (point 8)', () => {
  it('install and uninstall write through the link to the file it points at', () => {
    const h = home();
    const original = j({ mcpServers: { files: fx } });
    const real = h.write('dotfiles/claude.json', original);
    const link = path.join(h.dir, CLAUDE);
    mkdirSync(path.dirname(link), { recursive: true });
    symlinkSync(real, link);
    const out = path.join(h.dir, 'mcpmux.json');
    expect(h.run('import', '--from', 'claude', '-o', out).code).toBe(0);
    const r = h.run('install', '--host', 'claude', '--config', out);
    expect(r.code, r.stderr).toBe(0);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(Object.keys(JSON.parse(readFileSync(real, 'utf8')).mcpServers)).toEqual(['mcpmux']);
    const undo = h.run('uninstall', '--host', 'claude');
    expect(undo.code, undo.stderr).toBe(0);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readFileSync(real, 'utf8')).toBe(original);
  });
});

describe('host files that are not JSONC (point 9)', () => {
  it('uninstall passes over an unreadable first file to the one that runs mcpmux', () => {
    const h = home();
    const broken = h.write('.cursor/mcp.json', '{ "mcpServers": { oops ');
    const ws = path.join(h.project, '.cursor', 'mcp.json');
    mkdirSync(path.dirname(ws), { recursive: true });
    writeFileSync(ws, j({ mcpServers: { mcpmux: { command: 'mcpmux', args: ['stdio', '--config', '/x.json'] }, kept: fx } }));
    const r = h.run('uninstall', '--host', 'cursor');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`removed the mcpmux entry (mcpmux)`);
    expect(JSON.parse(readFileSync(ws, 'utf8'))).toEqual({ mcpServers: { kept: fx } });
    expect(readFileSync(broken, 'utf8')).toBe('{ "mcpServers": { oops ');
  });

  it('install and uninstall on a host file that is not JSONC exit 1 and leave it untouched', () => {
    const h = home();
    const text = '{\n  "mcpServers": {\n    "mcpmux": { "command": "mcpmux", "args": ["stdio"] }\n    "files": {}\n  }\n}\n';
    const file = h.write(CLAUDE, text);
    const out = h.write('mcpmux.json', j({ mcpServers: { files: fx } }));
    const inst = h.run('install', '--host', 'claude', '--config', out, '--force');
    expect(inst.code).toBe(1);
    expect(inst.stderr).toContain(`${file}: invalid JSON at line 4`);
    expect(inst.stderr).toContain('not touching it');
    const undo = h.run('uninstall', '--host', 'claude');
    expect(undo.code).toBe(1);
    expect(undo.stderr).toContain(`${file}: invalid JSON at line 4`);
    const named = h.run('uninstall', '--host', 'claude', '--file', file);
    expect(named.code).toBe(1);
    expect(readFileSync(file, 'utf8')).toBe(text);
    expect(readdirSync(path.dirname(file))).toEqual(['claude_desktop_config.json']);
  });
});

describe("Claude Code's servers get the shell's environment (point 5 of the review)", () => {
  it('install --host claude-code checks in this shell, so a variable the shell has needs no --env-from-shell', async () => {
    const h = home({ API_TOKEN: 'from-the-shell' });
    const file = h.write('.claude.json', j({ mcpServers: { tokened: { ...fx, env: { TOKEN: '${API_TOKEN}' } } } }));
    const out = path.join(h.dir, 'mcpmux.json');
    expect(h.run('import', '--from', 'claude-code', '-o', out).code).toBe(0);
    const r = h.run('install', '--host', 'claude-code', '--config', out);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain("checked in this shell's environment (Claude Code runs from a terminal and passes it on): 1 server(s) will start");
    // Nothing copied into ~/.claude.json: the value stays in the shell.
    expect(JSON.parse(readFileSync(file, 'utf8')).mcpServers.mcpmux.env).toBeUndefined();
    expect(readFileSync(file, 'utf8')).not.toContain('from-the-shell');

    // Without the variable in the shell, it is refused and named, as for the other hosts.
    const h2 = home();
    delete h2.env.API_TOKEN;
    h2.write('.claude.json', j({ mcpServers: { tokened: { ...fx, env: { TOKEN: '${API_TOKEN}' } } } }));
    const out2 = path.join(h2.dir, 'mcpmux.json');
    expect(h2.run('import', '--from', 'claude-code', '-o', out2).code).toBe(0);
    const r2 = h2.run('install', '--host', 'claude-code', '--config', out2);
    expect(r2.code).toBe(1);
    expect(r2.stderr).toContain("would not start in this shell's environment");
    expect(r2.stderr).toContain('tokened: environment variable API_TOKEN is not set');
  });
});

describe('install --dry-run shows no secret (review point 4)', () => {
  it('env values copied from the shell, and ones already in the file, are [REDACTED] in the diff', () => {
    const h = home({ API_TOKEN: 's3cret-value' });
    const file = h.write(CLAUDE, j({ mcpServers: { plain: fx, tokened: { ...fx, env: { TOKEN: '${API_TOKEN}', OWN: 'own-secret' } } } }));
    const out = path.join(h.dir, 'mcpmux.json');
    expect(h.run('import', '--from', 'claude', '-o', out).code).toBe(0);
    const before = readFileSync(file, 'utf8');
    const dry = h.run('install', '--host', 'claude', '--config', out, '--env-from-shell', '--dry-run');
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('"API_TOKEN": "[REDACTED]"');
    expect(dry.stdout + dry.stderr).not.toContain('s3cret-value');
    expect(dry.stdout).not.toContain('own-secret');
    expect(readFileSync(file, 'utf8')).toBe(before);

    // Installed for real, the value is stored; a re-install's dry run does not print it either.
    expect(h.run('install', '--host', 'claude', '--config', out, '--env-from-shell').code).toBe(0);
    expect(readFileSync(file, 'utf8')).toContain('s3cret-value');
    const other = h.write('other.json', readFileSync(out, 'utf8'));
    const again = h.run('install', '--host', 'claude', '--config', other, '--dry-run');
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain(other);
    expect(again.stdout).toContain('"API_TOKEN": "[REDACTED]"');
    expect(again.stdout).not.toContain('s3cret-value');
  });
});

describe("install never takes a host's servers away (review point 1)", () => {
  it('refuses when the config would start no server while the host file has its own (all left out by import)', async () => {
    const h = home();
    const text = j({ mcpServers: { withEnvFile: { ...fx, envFile: '/x/.env' }, withOauth: { url: 'https://example.invalid/mcp', oauth: { clientId: 'x' } } } });
    const file = h.write(CLAUDE, text);
    const out = path.join(h.dir, 'mcpmux.json');
    const imp = h.run('import', '--from', 'claude', '-o', out);
    expect(imp.code, imp.stderr).toBe(0);
    expect(JSON.parse(readFileSync(out, 'utf8')).mcpServers).toEqual({});
    const r = h.run('install', '--host', 'claude', '--config', out);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`2 of the server(s) in ${file} are not in ${out}`);
    expect(r.stderr).toContain('withEnvFile: import cannot bring it over (envFile is not supported');
    expect(r.stderr).toContain('withOauth: import cannot bring it over (OAuth settings are not supported yet)');
    expect(r.stderr).toContain(`${out} starts no server at all, and ${file} has 2 (withEnvFile, withOauth): claude would be left with none`);
    expect(r.stderr).toContain('not installing');
    expect(readFileSync(file, 'utf8')).toBe(text);
    expect(readdirSync(path.dirname(file))).toHaveLength(1);
    // --force does it anyway, and uninstall gives them back.
    const forced = h.run('install', '--host', 'claude', '--config', out, '--force');
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stderr).toContain('installing anyway (--force)');
    expect(h.run('uninstall', '--host', 'claude').code).toBe(0);
    expect(readFileSync(file, 'utf8')).toBe(text);
  });

  it("refuses when one of the host file's servers is not in the config, by name or definition, and names it", () => {
    const h = home();
    const b = fixture({ name: 'b', tools: 1, specialTools: false });
    const text = j({ mcpServers: { 'a server': fx, b } });
    const file = h.write(CLAUDE, text);
    // A config written by hand with only one of them (under another name: the same definition counts).
    const out = h.write('mcpmux.json', j({ mcpServers: { renamed: fx } }));
    const r = h.run('install', '--host', 'claude', '--config', out);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`1 of the server(s) in ${file} is not in ${out}; installing would take it away from claude:`);
    expect(r.stderr).toContain('  b: not in the config');
    expect(r.stderr).not.toContain('a server:');
    expect(readFileSync(file, 'utf8')).toBe(text);
    // With b in the config (by name), install goes ahead.
    writeFileSync(out, j({ mcpServers: { renamed: fx, b } }));
    const ok = h.run('install', '--host', 'claude', '--config', out);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain('instead of its 2 server(s) (a server, b)');
  });
});

describe('servers added to a host after install (review point 2)', () => {
  it('import keeps the config, install over the mixed file keeps the env, and uninstall gives back the original and the added server', async () => {
    const h = home({ API_TOKEN: 's3cret-value' });
    const a = { ...fixture({ name: 'a', tools: 1, specialTools: false }), env: { TOKEN: '${API_TOKEN}' } };
    const c = fixture({ name: 'c', tools: 1, specialTools: false });
    const original = `{\n  // mine\n  "mcpServers": { "a": ${j(a)} }\n}\n`;
    const file = h.write(CLAUDE, original);
    const out = path.join(h.dir, 'mcpmux.json');
    expect(h.run('import', '--from', 'claude', '-o', out).code).toBe(0);
    const first = h.run('install', '--host', 'claude', '--config', out, '--env-from-shell');
    expect(first.code, first.stderr).toBe(0);
    const backups = () => readdirSync(path.dirname(file)).filter((f) => f.includes('.mcpmux-backup-')).sort();
    const [originalBackup] = backups();

    // The user adds C to Claude's own file, beside mcpmux.
    const installed = JSON.parse(readFileSync(file, 'utf8').replace(/^\s*\/\/.*$/gm, ''));
    writeFileSync(file, j({ mcpServers: { ...installed.mcpServers, c } }));
    // Re-import into the config the mcpmux entry runs: A stays, C is added.
    const again = h.run('import', '--from', 'claude', '-o', out, '--force');
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain(`${out} is the config a host's mcpmux entry runs: kept its 1 server(s) and added 1 (c)`);
    expect(Object.keys(JSON.parse(readFileSync(out, 'utf8')).mcpServers)).toEqual(['a', 'c']);
    // Without --force too (nothing is overwritten): C is already there, nothing added.
    const third = h.run('import', '--from', 'claude', '-o', out);
    expect(third.code, third.stderr).toBe(0);
    expect(Object.keys(JSON.parse(readFileSync(out, 'utf8')).mcpServers)).toEqual(['a', 'c']);

    // Install over the mixed file, from a shell that no longer has API_TOKEN: the stored env is kept.
    delete h.env.API_TOKEN;
    const second = h.run('install', '--host', 'claude', '--config', out);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain(`To undo: mcpmux uninstall --host claude (restores ${path.join(path.dirname(file), originalBackup!)} and gives back c)`);
    expect(backups()).toHaveLength(2);
    const entry = JSON.parse(readFileSync(file, 'utf8')).mcpServers.mcpmux;
    expect(entry.env).toEqual({ API_TOKEN: 's3cret-value' });
    expect(await toolNames(runAsHost(h, entry))).toEqual(['a__tool_0', 'c__tool_0']);

    // Undo: A from the original backup, and C.
    const undo = h.run('uninstall', '--host', 'claude');
    expect(undo.code, undo.stderr).toBe(0);
    expect(undo.stdout).toContain(`from ${path.join(path.dirname(file), originalBackup!)}: 1 server(s) (a); kept 1 server(s) you added beside mcpmux since (c)`);
    expect(JSON.parse(readFileSync(file, 'utf8').replace(/^\s*\/\/.*$/gm, '')).mcpServers).toEqual({ a, c });
    // Uninstall again does nothing; a backup with an mcpmux entry is never taken for the original.
    expect(h.run('uninstall', '--host', 'claude').stdout).toContain('does not run mcpmux');
  });
});
