#!/usr/bin/env node
// Builds the tool-search corpus from real published MCP servers: installs the servers pinned in
// bench/surface/servers.json into .cache/surface-corpus/ (gitignored; skipped when already
// there), starts each over stdio with the official SDK client, lists every tool (all pages) and
// writes .cache/surface-corpus/catalogue.json as SearchableTool objects named `<server>__<tool>`.
// The servers' text is never copied into the repository: it is fetched at bench time.
//
//   node bench/surface/fetch-corpus.mjs [--refresh] [--only a,b] [--no-offline] [--quiet]
//
// --refresh      list again even when catalogue.json is there (installs are still reused)
// --only a,b     these servers only (the catalogue then holds only them)
// --no-offline   list with the network on; by default, where `unshare -n` works (root on
//                Linux), each server lists inside an empty network namespace, which proves the
//                corpus needs neither credentials nor network at list time
//
// One server that fails to install, start or list is reported and left out; it is not fatal.
// Exit code: 0 when at least one server listed, 1 when none did (e.g. no registry reachable).

import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const SERVERS_FILE = join(ROOT, 'bench', 'surface', 'servers.json');
export const CACHE = join(ROOT, '.cache', 'surface-corpus');
export const CATALOGUE = join(CACHE, 'catalogue.json');

const INSTALL_TIMEOUT_MS = 240_000; // one npm install, on a loaded 2-core machine
const START_TIMEOUT_MS = 60_000; // spawn + initialize
const LIST_TIMEOUT_MS = 30_000; // each tools/list page
const MAX_PAGES = 50; // a server that pages forever is cut off here
const PARALLEL_INSTALLS = 4;
const PARALLEL_LISTS = 3;

export function loadServers(file = SERVERS_FILE) {
  return JSON.parse(readFileSync(file, 'utf8')).servers;
}

const log = (quiet) => (s) => quiet || process.stderr.write(`fetch-corpus: ${s}\n`);

function pkgDir(s) {
  return join(CACHE, 'pkgs', s.name);
}

function isInstalled(s) {
  const marker = join(pkgDir(s), '.installed');
  return existsSync(marker) && readFileSync(marker, 'utf8') === `${s.package}@${s.version}`;
}

function registryReachable(s) {
  return new Promise((resolve, reject) => {
    execFile(
      'npm',
      ['view', `${s.package}@${s.version}`, 'version', '--fetch-retries=0', '--fetch-timeout=15000'],
      { timeout: 30_000, env: { ...process.env, npm_config_update_notifier: 'false' } },
      (err, _out, errOut) => (err ? reject(new Error(`npm registry not reachable: ${(errOut || err.message).trim().split('\n').slice(0, 2).join(' ')}`)) : resolve()),
    );
  });
}

/** Installs `package@version` into its own prefix (own dependency tree, no bin clashes). */
async function install(s, say) {
  const dir = pkgDir(s);
  const marker = join(dir, '.installed');
  const want = `${s.package}@${s.version}`;
  if (isInstalled(s)) return dir;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  // A package.json of its own, so npm never walks up into the repository's.
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `corpus-${s.name}`, private: true }));
  say(`installing ${want}`);
  // --ignore-scripts: no postinstall downloads (browsers, native builds); listing needs none.
  await new Promise((resolve, reject) => {
    execFile(
      'npm',
      ['install', '--prefix', dir, '--no-save', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error', want],
      { timeout: INSTALL_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, npm_config_update_notifier: 'false' } },
      (err, _out, errOut) => (err ? reject(new Error(`npm install ${want}: ${(errOut || err.message).trim().slice(-600)}`)) : resolve()),
    );
  });
  writeFileSync(marker, want);
  return dir;
}

/** The file a server's bin entry points to: `bin` if named, else its only (or same-named) bin. */
function binPath(s, dir) {
  const pdir = join(dir, 'node_modules', ...s.package.split('/'));
  const pj = JSON.parse(readFileSync(join(pdir, 'package.json'), 'utf8'));
  let rel;
  if (typeof pj.bin === 'string') rel = pj.bin;
  else if (pj.bin && typeof pj.bin === 'object') {
    const names = Object.keys(pj.bin);
    const base = s.package.split('/').pop();
    const name = s.bin ?? (names.length === 1 ? names[0] : names.find((n) => n === base) ?? names[0]);
    rel = pj.bin[name];
    if (!rel) throw new Error(`${s.package} has no bin named ${name} (has: ${names.join(', ')})`);
  } else throw new Error(`${s.package} declares no bin`);
  return join(pdir, rel);
}

function canUnshare() {
  try {
    execFileSync('unshare', ['-n', 'true'], { stdio: 'ignore', timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}

function withTimeout(p, ms, what) {
  let t;
  return Promise.race([p, new Promise((_, rej) => (t = setTimeout(() => rej(new Error(`${what}: no answer within ${ms} ms`)), ms)))]).finally(() =>
    clearTimeout(t),
  );
}

/** Starts one server over stdio, lists all its tools, stops it. */
async function listServer(s, dir, offline) {
  const scratch = join(CACHE, 'scratch', s.name);
  mkdirSync(join(scratch, 'home'), { recursive: true });
  const args = (s.args ?? []).map((a) => a.replaceAll('{scratch}', scratch));
  const bin = binPath(s, dir);
  // No credentials: a bare environment with a throw-away HOME, plus only what servers.json says.
  const env = {
    PATH: `${dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`,
    HOME: join(scratch, 'home'),
    ...(s.env ?? {}),
  };
  const [command, cmdArgs] = offline ? ['unshare', ['-n', process.execPath, bin, ...args]] : [process.execPath, [bin, ...args]];
  const transport = new StdioClientTransport({ command, args: cmdArgs, env, cwd: scratch, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  const client = new Client({ name: 'mcpmux-surface-corpus', version: '1.0.0' });
  try {
    await withTimeout(client.connect(transport), START_TIMEOUT_MS, 'initialize');
    const tools = [];
    let cursor;
    for (let page = 0; page < MAX_PAGES; page++) {
      const r = await withTimeout(client.listTools(cursor ? { cursor } : {}), LIST_TIMEOUT_MS, 'tools/list');
      tools.push(...r.tools);
      cursor = r.nextCursor;
      if (!cursor) break;
    }
    if (tools.length === 0) throw new Error('listed no tools');
    const instructions = client.getInstructions();
    return { tools, serverInfo: client.getServerVersion(), ...(typeof instructions === 'string' && { instructions }) };
  } catch (e) {
    const tail = stderr.trim().split('\n').slice(-4).join(' | ').slice(-500);
    throw new Error(`${e.message ?? e}${tail ? ` -- stderr: ${tail}` : ''}`);
  } finally {
    await client.close().catch(() => {});
  }
}

async function pool(items, n, fn) {
  const out = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]);
      }
    }),
  );
  return out;
}

/**
 * Fetches (or reuses) the catalogue. Returns {catalogue, fresh}. Throws only when no server at
 * all could be listed.
 */
export async function fetchCorpus({ refresh = false, only, offline, quiet = false } = {}) {
  const say = log(quiet);
  if (!refresh && !only && existsSync(CATALOGUE)) return { catalogue: JSON.parse(readFileSync(CATALOGUE, 'utf8')), fresh: false };
  let servers = loadServers();
  if (only) servers = servers.filter((s) => only.includes(s.name));
  mkdirSync(CACHE, { recursive: true });
  offline ??= canUnshare();
  say(`${servers.length} servers; listing ${offline ? 'without network (unshare -n)' : 'with the network on'}`);

  // Without a registry every install would fail slowly (npm retries): ask once, fail fast.
  const missing = servers.filter((s) => !isInstalled(s));
  if (missing.length) await registryReachable(missing[0]);

  const installed = await pool(servers, PARALLEL_INSTALLS, async (s) => {
    try {
      return { dir: await install(s, say) };
    } catch (e) {
      return { error: `install: ${e.message}` };
    }
  });
  const results = await pool(
    servers.map((s, i) => [s, installed[i]]),
    PARALLEL_LISTS,
    async ([s, inst]) => {
      if (inst.error) return { s, error: inst.error };
      try {
        const r = await listServer(s, inst.dir, offline);
        say(`${s.name}: ${r.tools.length} tools`);
        return { s, ...r };
      } catch (e) {
        say(`${s.name}: FAILED ${e.message}`);
        return { s, error: `list: ${e.message}` };
      }
    },
  );

  const tools = [];
  // Each tool's whole definition as mcpmux lists it (public name; annotations, outputSchema and
  // _meta kept): what an all-mode tools/list costs (token-surface.mjs). `tools` keeps the
  // searchable fields only.
  const definitions = [];
  const report = [];
  for (const r of results) {
    const row = { name: r.s.name, package: `${r.s.package}@${r.s.version}` };
    if (r.error) row.error = r.error;
    else {
      row.tools = r.tools.length;
      row.serverInfo = r.serverInfo;
      if (r.instructions !== undefined) row.instructions = r.instructions;
      for (const t of r.tools) {
        definitions.push({ ...t, name: `${r.s.name}__${t.name}` });
        const title = t.title ?? t.annotations?.title;
        tools.push({
          name: `${r.s.name}__${t.name}`,
          server: r.s.name,
          ...(title ? { title } : {}),
          ...(t.description ? { description: t.description } : {}),
          inputSchema: t.inputSchema,
        });
      }
    }
    report.push(row);
  }
  const ok = report.filter((r) => !r.error);
  if (ok.length === 0) throw new Error(`no server could be listed:\n${report.map((r) => `  ${r.name}: ${r.error}`).join('\n')}`);
  const catalogue = { fetchedAt: new Date().toISOString(), offline, servers: report, tools, definitions };
  if (!only) writeFileSync(CATALOGUE, JSON.stringify(catalogue, null, 1));
  return { catalogue, fresh: true };
}

async function main() {
  const argv = process.argv.slice(2);
  const o = { refresh: false, quiet: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--refresh') o.refresh = true;
    else if (a === '--no-offline') o.offline = false;
    else if (a === '--quiet') o.quiet = true;
    else if (a === '--only') o.only = (argv[++i] ?? '').split(',').filter(Boolean);
    else {
      process.stderr.write(`usage: node bench/surface/fetch-corpus.mjs [--refresh] [--only a,b] [--no-offline] [--quiet]\n`);
      process.exit(2);
    }
  }
  try {
    const { catalogue, fresh } = await fetchCorpus(o);
    const ok = catalogue.servers.filter((s) => !s.error);
    const failed = catalogue.servers.filter((s) => s.error);
    process.stdout.write(
      `${fresh ? 'fetched' : 'cached'}: ${ok.length} servers, ${catalogue.tools.length} tools${fresh && !o.only ? ` -> ${CATALOGUE}` : ''}\n`,
    );
    for (const s of ok) process.stdout.write(`  ok      ${s.name.padEnd(12)} ${String(s.tools).padStart(4)}  ${s.package}\n`);
    for (const s of failed) process.stdout.write(`  FAILED  ${s.name.padEnd(12)}       ${s.package}: ${s.error}\n`);
  } catch (e) {
    process.stderr.write(`fetch-corpus: ${e.message}\n`);
    process.exit(1);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
