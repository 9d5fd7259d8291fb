// The first hour, packaging and start (issue 19, points 6 to 8): the example config from any
// folder, a tarball that installs and runs with no registry, and Ctrl-C under `npm start`.
//
// Every command is the one a person would type, run with a desktop's bare environment where a
// host would run it (`env -i HOME=... PATH=<node>:/usr/bin:/bin`). npm runs with a HOME of its
// own and the machine's npm cache, so nothing global is touched.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { awaitJsonLine, exitWithin, freePort, MUX_BIN, ROOT, tempDir, UPSTREAM_FIXTURE, writeConfig } from './helpers/harness.js';

const PKG = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  optionalDependencies: Record<string, string>;
};
const NODE_DIR = path.dirname(process.execPath);
const EXAMPLE_SERVERS = ['@modelcontextprotocol/server-everything', '@modelcontextprotocol/server-filesystem'];

/** A desktop's bare environment: a fake HOME and a PATH that has node and the system's tools. */
function desktopEnv(home: string): NodeJS.ProcessEnv {
  return { HOME: home, PATH: `${NODE_DIR}:/usr/bin:/bin` };
}

/** Runs a command to its end without blocking the event loop; SIGKILL past `timeoutMs`. */
function run(
  command: string,
  args: string[],
  opts: { env: NodeJS.ProcessEnv; cwd: string; timeoutMs?: number },
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, { env: opts.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
  return new Promise((resolve, reject) => {
    child.once('error', (err) => (clearTimeout(timer), reject(err)));
    child.once('close', (status) => (clearTimeout(timer), resolve({ status, stdout, stderr })));
  });
}

const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    try {
      // Started detached (a process group of its own): end the whole group.
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  }
});

describe('the example config works from any folder (issue 19.6)', () => {
  it('a copy in a fake HOME passes `check --probe` run from another folder, both servers ok', async () => {
    const home = tempDir();
    const elsewhere = tempDir();
    copyFileSync(path.join(ROOT, 'config.example.json'), path.join(home, 'x.json'));
    const r = await run(process.execPath, [MUX_BIN, 'check', '--config', path.join(home, 'x.json'), '--probe'], {
      env: desktopEnv(home),
      cwd: elsewhere,
    });
    expect(r.stdout).toMatch(/^ {2}everything: ok, /m);
    expect(r.stdout).toMatch(/^ {2}fs: ok, .*\d+ tools/m);
    expect(r.status, r.stdout + r.stderr).toBe(0);
  }, 120_000);

  it('${MCPMUX_HOME} from the environment wins over the built-in one', async () => {
    const home = tempDir();
    const r = await run(process.execPath, [MUX_BIN, 'check', '--config', path.join(ROOT, 'config.example.json'), '--probe'], {
      env: { ...desktopEnv(home), MCPMUX_HOME: path.join(home, 'no-such-mcpmux') },
      cwd: home,
    });
    expect(r.stdout).toMatch(/everything: FAILED/);
    expect(r.status).toBe(1);
  }, 120_000);
});

// ---- npm pack + npm install -g ----------------------------------------------------------------

/** What the package needs to be built and packed: the tracked sources, not this clone's dist/. */
const SOURCES = ['package.json', 'package-lock.json', 'tsconfig.json', 'README.md', 'LICENSE', 'config.example.json', 'bin', 'src', 'schema', 'systemd', 'test'];

/** Every `.js` file under `dir`. */
function jsFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.js'))
    .map((f) => path.join(dir, f));
}

/** The packages `file` imports (bare specifiers, static or dynamic), without node's own modules. */
function importedPackages(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const found = new Set<string>();
  for (const m of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"]([^'"./][^'"]*)['"]/g)) {
    const spec = m[1]!;
    if (spec.startsWith('node:') || builtinModules.includes(spec.split('/')[0]!)) continue;
    found.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
  }
  return [...found];
}

/** What the pack test leaves outside its temp folder (the copy of the sources, beside node_modules). */
const cleanups: (() => void)[] = [];

describe('npm pack gives a package that installs and runs with the network off (issue 19.7)', () => {
  it('pack (prepack builds dist/), install -g into a fresh prefix --offline, then --version and the example config from another folder', async () => {
    const work = tempDir();
    try {
      await packInstallAndRun(work);
    } finally {
      rmSync(work, { recursive: true, force: true }); // ~60 MB: the tarball, the prefix
      for (const clean of cleanups.splice(0)) clean();
    }
  }, 420_000);
});

/** The whole path of a person installing from a clone: pack, install -g into a fresh prefix, run. */
async function packInstallAndRun(work: string): Promise<void> {
  const npmHome = path.join(work, 'npm-home');
  mkdirSync(npmHome);
  const cache = spawnSync('npm', ['config', 'get', 'cache'], { encoding: 'utf8' }).stdout.trim();
  expect(cache).not.toBe('');
  // npm with a home of its own: no user .npmrc, no global state; the machine's cache, and no
  // registry at all (--offline): what the package needs must come in the tarball.
  const npmEnv = { ...process.env, HOME: npmHome, npm_config_cache: cache, npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false' };

  // Pack a copy of the sources, so this clone's dist/ (which other test files are using)
  // is left alone while prepack clears and prepare rebuilds the copy's.
  // The copy's node_modules is a real tree, as in a clone: npm pack does not bundle through a
  // symlinked node_modules reliably (a CI run's tarball lacked execa's own dependencies). Hard
  // links make it cheap, so the copy sits beside node_modules, on its file system.
  mkdirSync(path.join(ROOT, '.cache'), { recursive: true });
  const src = mkdtempSync(path.join(ROOT, '.cache', 'pack-src-'));
  cleanups.push(() => rmSync(src, { recursive: true, force: true }));
  for (const f of SOURCES) if (existsSync(path.join(ROOT, f))) cpSync(path.join(ROOT, f), path.join(src, f), { recursive: true });
  const linked = spawnSync('cp', ['-al', realpathSync(path.join(ROOT, 'node_modules')), path.join(src, 'node_modules')]);
  if (linked.status !== 0) cpSync(realpathSync(path.join(ROOT, 'node_modules')), path.join(src, 'node_modules'), { recursive: true });
  mkdirSync(path.join(src, 'dist'));
  writeFileSync(path.join(src, 'dist', 'stale-from-a-deleted-source.js'), 'throw new Error("stale");\n');

  const pack = await run('npm', ['pack', '--json', '--pack-destination', work], { env: npmEnv, cwd: src, timeoutMs: 240_000 });
  expect(pack.status, pack.stderr).toBe(0);
  const [packed] = JSON.parse(pack.stdout) as { filename: string; files: { path: string }[]; bundled: string[] }[];
  const files = packed!.files.map((f) => f.path);
  expect(files).toEqual(expect.arrayContaining([
    'package.json', 'README.md', 'bin/mcpmux.js', 'bin/run-server.js', 'dist/cli/main.js', 'schema/config.schema.json', 'config.example.json', 'systemd/mcpmux.service',
  ]));
  // No tests, no TypeScript sources, no build leftovers: only what runs.
  const own = files.filter((f) => !f.startsWith('node_modules/'));
  expect(own.filter((f) => /^(test|src|bench|docs|contrib)\//.test(f) || f.endsWith('.map') || f.endsWith('.ts') || f.includes('stale'))).toEqual([]);
  // The runtime dependencies and the example's servers travel in the tarball (an install
  // needs no registry); the test tools do not.
  expect(packed!.bundled).toEqual(expect.arrayContaining([...Object.keys(PKG.dependencies), ...EXAMPLE_SERVERS]));
  const testTools = ['typescript', 'vitest', 'fast-check', '@modelcontextprotocol/inspector', '@modelcontextprotocol/conformance', '@modelcontextprotocol/client'];
  expect(packed!.bundled.filter((b) => testTools.includes(b))).toEqual([]);

  const prefix = path.join(work, 'prefix');
  const tgz = path.join(work, packed!.filename);
  const install = await run('npm', ['install', '-g', '--prefix', prefix, tgz, '--offline', '--no-audit', '--no-fund'], { env: npmEnv, cwd: work, timeoutMs: 240_000 });
  expect(install.status, install.stdout + install.stderr).toBe(0);
  expect(install.stderr).not.toMatch(/EBADENGINE|ERR!/);

  const installed = path.join(prefix, 'lib', 'node_modules', 'mcpmux');
  const mcpmux = path.join(prefix, 'bin', 'mcpmux');
  // Built, and nothing in dist/ imports a package that is not a runtime dependency.
  const dist = jsFiles(path.join(installed, 'dist'));
  expect(dist.length).toBeGreaterThan(10);
  const imported = new Set(dist.flatMap(importedPackages));
  expect([...imported].filter((p) => !(p in PKG.dependencies))).toEqual([]);
  expect(existsSync(path.join(installed, 'node_modules', 'typescript'))).toBe(false);
  expect(existsSync(path.join(installed, 'node_modules', 'vitest'))).toBe(false);

  const home = tempDir();
  const elsewhere = tempDir();
  const version = await run(mcpmux, ['--version'], { env: desktopEnv(home), cwd: elsewhere });
  expect(version.stdout.trim()).toBe(PKG.version);
  expect(version.status).toBe(0);

  const example = path.join(installed, 'config.example.json');
  const check = await run(mcpmux, ['check', '--config', example, '--probe'], { env: desktopEnv(home), cwd: elsewhere });
  expect(check.stdout).toMatch(/^ {2}everything: ok, /m);
  expect(check.stdout).toMatch(/^ {2}fs: ok, /m);
  expect(check.status, check.stdout + check.stderr).toBe(0);

  // Without an example server (left out with --omit=optional, say), the failure says what to install.
  rmSync(path.join(installed, 'node_modules', '@modelcontextprotocol', 'server-everything'), { recursive: true });
  const missing = await run(mcpmux, ['check', '--config', example, '--probe', '--log-level', 'info'], { env: desktopEnv(home), cwd: elsewhere });
  expect(missing.stdout).toMatch(/everything: FAILED/);
  expect(missing.stdout).toMatch(/^ {2}fs: ok, /m);
  expect(missing.stderr).toContain('cannot find the server package @modelcontextprotocol/server-everything');
  expect(missing.stderr).toContain('npm install -g @modelcontextprotocol/server-everything');
  expect(missing.status).toBe(1);
}

// ---- Ctrl-C ---------------------------------------------------------------------------------------

/** Collects a child's stderr and resolves once a JSON log line with `msg` appears. */
function watchStderr(child: ChildProcess, exited: Promise<unknown>): { text: () => string; line: (msg: string, ms?: number) => Promise<unknown> } {
  let text = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (text += c));
  return {
    text: () => text,
    line: (msg, ms = 60_000) =>
      awaitJsonLine(child.stderr!, exited, (j) => (j.msg === msg ? j : undefined), { ms, what: `log line "${msg}"`, log: () => text }),
  };
}

/** The real shutdown handler around a drain that never ends, in a process of its own that says "ready" on stderr. */
function handlerProbe(): { child: ChildProcess; exited: Promise<number | null>; log: ReturnType<typeof watchStderr> } {
  const dist = (f: string) => JSON.stringify(path.join(ROOT, 'dist', f));
  const script = `
    import { onShutdownSignals } from ${dist('cli/runtime.js')};
    import { createLogger } from ${dist('observe/logger.js')};
    onShutdownSignals(createLogger('debug'), () => new Promise(() => {}));
    process.stderr.write(JSON.stringify({ msg: 'ready' }) + '\\n');
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'ignore', 'pipe'] });
  started.push(child);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, log: watchStderr(child, exited) };
}

describe('Ctrl-C under npm start drains and exits 0 (issue 19.8)', () => {
  it('`npm start`: Ctrl-C (SIGINT to the whole group: npm and mcpmux, and npm relays it) drains, exit 0, no rebuild', async () => {
    const mainJs = path.join(ROOT, 'dist', 'cli', 'main.js');
    const builtAt = statSync(mainJs).mtimeMs;
    const port = await freePort();
    const npmHome = tempDir();
    const cache = spawnSync('npm', ['config', 'get', 'cache'], { encoding: 'utf8' }).stdout.trim();
    // detached: a process group of its own, as a terminal gives a foreground job.
    const child = spawn('npm', ['start', '--', '--port', String(port), '--log-level', 'debug'], {
      cwd: ROOT,
      detached: true,
      env: { ...process.env, HOME: npmHome, npm_config_cache: cache, npm_config_update_notifier: 'false' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    started.push(child);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const log = watchStderr(child, exited);
    await log.line('listening');
    expect(statSync(mainJs).mtimeMs).toBe(builtAt); // started from the build `npm ci` made

    process.kill(-child.pid!, 'SIGINT');
    expect(await exitWithin(child, exited, 60_000), log.text()).toBe(0);
    expect(log.text()).toMatch(/"msg":"stopped"/);
    expect(log.text()).not.toMatch(/second signal/);
  }, 120_000);

  it('two SIGINTs 50 ms apart are one: the drain runs to its end and the daemon exits 0', async () => {
    const home = tempDir();
    // An upstream that takes seconds to stop (it outlives its stdin and ignores SIGTERM), so the
    // second signal surely lands while the daemon is still draining.
    const slow = { command: 'sh', args: ['-c', `trap '' TERM; "${process.execPath}" "${UPSTREAM_FIXTURE}"; sleep 30`] };
    const file = await writeConfig({ mcpServers: { slow } });
    const child = spawn(process.execPath, [MUX_BIN, 'serve', '--config', file, '--port', String(await freePort()), '--log-level', 'debug'], {
      env: desktopEnv(home),
      cwd: home,
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    started.push(child);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const log = watchStderr(child, exited);
    await Promise.all([log.line('listening'), log.line('upstream ready')]);

    child.kill('SIGINT');
    await new Promise((r) => setTimeout(r, 50));
    child.kill('SIGINT');
    expect(await exitWithin(child, exited, 60_000), log.text()).toBe(0);
    expect(log.text()).toMatch(/the same signal again/);
    expect(log.text()).toMatch(/"msg":"stopped"/);
    expect(log.text()).not.toMatch(/second signal/);
  }, 120_000);

  it('a second signal after the window still exits at once, with 1 (the real shutdown handler, a drain that never ends)', async () => {
    const { child, exited, log } = handlerProbe();
    await log.line('ready', 15_000);
    const { SIGNAL_REPEAT_MS } = await import('../dist/cli/runtime.js');

    child.kill('SIGINT');
    await log.line('shutting down', 15_000);
    child.kill('SIGINT'); // within the window: the same Ctrl-C, the drain goes on
    await log.line('the same signal again (the terminal and npm both send it); still draining', 15_000);
    // The window is a time: wait it out on the clock, then a person's second Ctrl-C.
    await new Promise((r) => setTimeout(r, SIGNAL_REPEAT_MS + 200));
    child.kill('SIGINT');
    expect(await exitWithin(child, exited, 15_000), log.text()).toBe(1);
    expect(log.text()).toMatch(/"msg":"second signal; exiting now"/);
  }, 60_000);

  it('a different signal right after the first is not the same Ctrl-C: it exits at once, with 1 (the real handler, a drain that never ends)', async () => {
    const { child, exited, log } = handlerProbe();
    await log.line('ready', 15_000);
    child.kill('SIGINT');
    await log.line('shutting down', 15_000);
    // Within the 1 s window, but SIGTERM after SIGINT: somebody wants it gone now.
    child.kill('SIGTERM');
    expect(await exitWithin(child, exited, 15_000), log.text()).toBe(1);
    expect(log.text()).toMatch(/"signal":"SIGTERM".*"msg":"second signal; exiting now"/);
    expect(log.text()).not.toContain('the same signal again');
  }, 60_000);
});
