// `mcpmux install --host H`: points a desktop host at mcpmux. The host's servers key gets one
// entry, `mcpmux stdio --config F`, after `mcpmux import` moved its servers into F. Only that
// key changes (host-edit.ts: comments, trailing commas and the rest of the file stay). Before
// writing, the config is loaded the way the host will start mcpmux (a desktop's bare
// environment plus the entry's own `env`; for Claude Code, which runs in a terminal, this
// shell's), so servers that would not start are named now, not discovered later as missing tools.
//
// Undo is `mcpmux uninstall --host H`. A timestamped backup of the user's own file is kept
// beside it; a file that already runs only mcpmux is never backed up (re-installing updates the
// entry, or says there is nothing to do), so every backup holds the user's servers. A file with
// mcpmux's entry and servers the user added since is backed up for those (uninstall gives them
// back with the original backup's).

import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { applyEdits, modify } from 'jsonc-parser';
import { loadConfig } from '../config/load.js';
import { ConfigError } from '../config/types.js';
import { parseJsonc } from '../jsonc.js';
import { isObject } from '../objects.js';
import { writePrivate } from '../files.js';
import { backupName, isInstalled, isMuxEntry, newestOriginalBackup, ownServers, targetFile, withServers } from './host-edit.js';
import { hostFiles, HOSTS, readHostFile, serversKey, serversOf, HostFileError, type HostFile, type HostName } from './hosts.js';
import { convert } from './import.js';
import { UsageError } from './usage-error.js';

export interface InstallOptions {
  host?: string;
  config?: string;
  file?: string;
  dryRun?: boolean;
  envFromShell?: boolean;
  force?: boolean;
}

const BIN = fileURLToPath(new URL('../../bin/mcpmux.js', import.meta.url));

/** The name of mcpmux's entry in the host's file. */
const ENTRY = 'mcpmux';

export async function runInstall(opts: InstallOptions): Promise<number> {
  const host = opts.host as HostName | undefined;
  if (!host || !(HOSTS as readonly string[]).includes(host)) throw new UsageError(`--host must be one of ${HOSTS.join(', ')}`);
  if (!opts.config && !process.env.MCPMUX_CONFIG) throw new UsageError('--config is required (the file `mcpmux import -o` wrote)');
  const configPath = path.resolve(opts.config ?? process.env.MCPMUX_CONFIG!);
  if (!existsSync(configPath)) throw new UsageError(`--config ${configPath}: no such file (run mcpmux import -o ${configPath} first)`);
  const file = opts.file ? path.resolve(opts.file) : targetFile(host);
  let read: HostFile | undefined;
  try {
    read = readHostFile(file);
  } catch (err) {
    if (!(err instanceof HostFileError)) throw err;
    process.stderr.write(`mcpmux install: ${err.message}; not touching it\n`);
    return 1;
  }
  const doc = read?.doc ?? {};
  const servers = serversOf(host, doc);
  const installed = isInstalled(host, doc);
  // A re-install keeps the env an earlier install wrote (values copied with --env-from-shell),
  // also from a file the user has since added servers to beside mcpmux's entry.
  const previous = Object.values(servers).find(isMuxEntry);
  const env: Record<string, string> = isObject(previous) && isObject(previous.env) ? Object.fromEntries(Object.entries(previous.env).map(([k, v]) => [k, String(v)])) : {};

  // What the host will see: the config loaded in the environment it gives mcpmux.
  const verdict = await hostCheck(host, configPath, env, opts);
  for (const line of verdict.lines) process.stderr.write(`mcpmux install: ${line}\n`);
  if (!verdict.ok) return 1;
  // Install replaces the host's servers: each of them must be in the config, or it is gone.
  const lost = lostServers(host, file, doc, configPath);
  const own = ownServers(host, doc);
  if (lost.length > 0 || (verdict.starting === 0 && own.length > 0)) {
    const lines = lost.length > 0 ? [`${lost.length} of the server(s) in ${file} ${lost.length === 1 ? 'is' : 'are'} not in ${configPath}; installing would take ${lost.length === 1 ? 'it' : 'them'} away from ${host}:`, ...lost.map((l) => `  ${l.name}: ${l.why}`)] : [];
    if (verdict.starting === 0 && own.length > 0) lines.push(`${configPath} starts no server at all, and ${file} has ${own.length} (${own.join(', ')}): ${host} would be left with none`);
    for (const l of lines) process.stderr.write(`mcpmux install: ${l}\n`);
    if (!opts.force) {
      process.stderr.write(`mcpmux install: not installing. Add them to ${configPath} (mcpmux import -o ${configPath} --force), or --force installs anyway (uninstall gives them back)\n`);
      return 1;
    }
    process.stderr.write('mcpmux install: installing anyway (--force)\n');
  }

  const command = { command: process.execPath, args: [BIN, 'stdio', '--config', configPath], ...(Object.keys(env).length > 0 && { env }) };
  const entry = host === 'vscode' ? { type: 'stdio', ...command } : command;
  const same = installed && Object.keys(servers).length === 1 && JSON.stringify(servers[ENTRY]) === JSON.stringify(entry);
  const original = newestOriginalBackup(host, file);
  const undo = `mcpmux uninstall --host ${host}${opts.file ? ` --file ${JSON.stringify(file)}` : ''}`;
  if (same) {
    process.stdout.write(`mcpmux install: ${file} already runs mcpmux (${configPath}); nothing to do.\n`);
    process.stdout.write(`To undo: ${undo}${original ? ` (restores ${original.file})` : ''}\n`);
    return 0;
  }
  const after = withServers(host, read, { [ENTRY]: entry });
  if (opts.dryRun) {
    // Values in `env` and `headers` are often secrets (copied by --env-from-shell, or the user's own): not for a terminal's scrollback.
    process.stdout.write(`--- ${file}\n+++ ${file} (after mcpmux install)\n${diff(redacted(host, read?.text ?? ''), redacted(host, after))}`);
    return 0;
  }
  // Only the user's own servers are worth keeping: backing up a file that runs only mcpmux would
  // keep nothing. A mixed file (mcpmux and servers added since) is backed up for those servers;
  // uninstall restores the original backup (none with mcpmux in it) and adds them back.
  let backup: string | undefined;
  const mixed = !installed && Object.values(servers).some(isMuxEntry);
  if (read && !installed) {
    backup = backupName(file);
    copyFileSync(file, backup);
  }
  // Written beside it, then renamed: the host never reads half a file.
  writePrivate(file, after);
  if (installed) {
    process.stdout.write(`mcpmux install: updated the mcpmux entry in ${file} (${configPath}); no new backup (the file ran only mcpmux).\n`);
  } else {
    process.stdout.write(`mcpmux install: ${file} now runs mcpmux (${configPath}) instead of its ${own.length} server(s)${own.length ? ` (${own.join(', ')})` : ''}.\n`);
    if (backup) process.stdout.write(`Backup of the previous file: ${backup}\n`);
  }
  const restores = mixed ? original?.file : (backup ?? original?.file);
  const keeps = mixed && own.length > 0 ? ` and gives back ${own.join(', ')}` : '';
  process.stdout.write(`To undo: ${undo}${restores ? ` (restores ${restores}${keeps})` : keeps ? ` (removes the mcpmux entry${keeps})` : ' (removes the mcpmux entry)'}\n`);
  for (const note of stillRunning(host, file)) process.stdout.write(`Note: ${note}\n`);
  process.stdout.write(`Restart ${host} to pick it up.\n`);
  return 0;
}

/**
 * The host file's own servers (not mcpmux's entries) that the config does not run, each with
 * why: not there by name nor as the same definition under another name (import's conversion of
 * the entry, so a renamed server counts), or one import cannot convert at all.
 */
function lostServers(host: HostName, file: string, doc: Record<string, unknown>, configPath: string): { name: string; why: string }[] {
  let configured: Record<string, unknown> = {};
  try {
    const config = parseJsonc(readFileSync(configPath, 'utf8'));
    if (isObject(config) && isObject(config.mcpServers)) configured = config.mcpServers;
  } catch {
    // hostCheck has loaded it already; a file that changed meanwhile counts as empty
  }
  const definitions = new Set(Object.values(configured).map((s) => JSON.stringify(s)));
  const lost: { name: string; why: string }[] = [];
  for (const [name, raw] of Object.entries(serversOf(host, doc))) {
    if (isMuxEntry(raw) || !isObject(raw) || Object.hasOwn(configured, name)) continue;
    const converted = convert([{ name, source: file, host, raw }]);
    const [definition] = Object.values(converted.servers);
    if (definition !== undefined && definitions.has(JSON.stringify(definition))) continue;
    const prefix = `left out "${name}" from ${file}: `;
    const leftOut = converted.notes.find((n) => n.startsWith(prefix));
    lost.push({ name, why: leftOut ? `import cannot bring it over (${leftOut.slice(prefix.length)})` : 'not in the config' });
  }
  return lost;
}

/** The host's other MCP servers, which it keeps starting beside mcpmux: said, so nobody is surprised. */
function stillRunning(host: HostName, edited: string): string[] {
  const notes: string[] = [];
  for (const f of hostFiles(host)) {
    let read: HostFile | undefined;
    try {
      read = readHostFile(f);
    } catch {
      continue;
    }
    if (!read) continue;
    const own = f === edited ? [] : ownServers(host, read.doc);
    if (own.length > 0) {
      notes.push(`${f} still runs ${own.length} server(s) (${own.join(', ')}) beside mcpmux; to move those too: mcpmux install --host ${host} --file ${JSON.stringify(f)}`);
    }
    // Claude Code's per-project servers live in the same user file, under projects[dir].mcpServers.
    if (host === 'claude-code' && isObject(read.doc.projects)) {
      for (const [dir, project] of Object.entries(read.doc.projects)) {
        const names = isObject(project) && isObject(project.mcpServers) ? Object.keys(project.mcpServers) : [];
        if (names.length > 0) notes.push(`Claude Code still runs the servers of project ${dir} (${names.join(', ')}, in ${f} under projects) when you work there; install leaves them as they are`);
      }
    }
  }
  return notes;
}

/** A server that would not start in the host's environment, and why. */
interface Unavailable {
  name: string;
  missing: string[];
  reason: string;
}

/**
 * The check the host will run: the config loaded with what a desktop host gives mcpmux (HOME,
 * PATH=/usr/bin:/bin, and the entry's `env`), not this shell's environment. Claude Code is the
 * exception: it runs in a terminal and its servers inherit that shell's environment, so for it
 * the check uses this shell's (plus the entry's `env`). Servers missing a
 * variable are named with it; `--env-from-shell` copies the missing values from this shell into
 * `env` (the host's entry; these are often secrets, hence an explicit flag), `--force` installs
 * anyway (those servers stay off); otherwise install refuses. A config the host could not load at
 * all is always refused: the host would have no server.
 */
async function hostCheck(host: HostName, configPath: string, env: Record<string, string>, opts: InstallOptions): Promise<{ ok: boolean; lines: string[]; starting: number }> {
  const lines: string[] = [];
  const where = host === 'claude-code' ? "this shell's environment (Claude Code runs from a terminal and passes it on)" : 'the environment the host gives mcpmux';
  let result = await loadInHost(host, configPath, env);
  if (opts.envFromShell) {
    const wanted = result.kind === 'loaded' ? result.unavailable.flatMap((u) => u.missing) : result.missing;
    const copied = [...new Set(wanted)].filter((v) => process.env[v] !== undefined);
    for (const v of copied) env[v] = process.env[v]!;
    if (copied.length > 0) {
      lines.push(`copied ${copied.join(', ')} from this shell into the host entry's env (stored in the host's file, readable by you only)`);
      result = await loadInHost(host, configPath, env);
    }
  }
  if (result.kind === 'invalid') {
    const described = host === 'claude-code' ? where : `the environment the host gives mcpmux (HOME, PATH=/usr/bin:/bin${Object.keys(env).length ? ", and the entry's env" : ''})`;
    lines.push(`in ${described} the config does not load, so the host would have no server at all:`);
    lines.push(...result.message.split('\n').map((l) => `  ${l}`));
    if (result.missing.length > 0) lines.push(`set ${result.missing.join(', ')} in this shell and run install with --env-from-shell, or put the values in the config`);
    lines.push('not installing');
    return { ok: false, lines, starting: 0 };
  }
  if (result.unavailable.length === 0) {
    lines.push(`checked in ${where}: ${result.starting} server(s) will start`);
    return { ok: true, lines, starting: result.starting };
  }
  const missing = [...new Set(result.unavailable.flatMap((u) => u.missing))];
  lines.push(`${result.unavailable.length} server(s) would not start in ${where}:`);
  for (const u of result.unavailable) lines.push(`  ${u.name}: ${u.reason}`);
  if (opts.force) {
    lines.push(`installing anyway (--force): those servers stay off until ${missing.join(', ')} reach(es) mcpmux; the others start`);
    return { ok: true, lines, starting: result.starting };
  }
  const inShell = missing.filter((v) => process.env[v] !== undefined);
  lines.push(
    `not installing. ${opts.envFromShell ? `Not set in this shell either: ${missing.join(', ')}. ` : inShell.length > 0 ? `This shell has ${inShell.join(', ')}: --env-from-shell copies them into the host's entry (written to the host's file). ` : ''}` +
      `--force installs anyway (those servers stay off).`,
  );
  return { ok: false, lines, starting: result.starting };
}

type HostLoad = { kind: 'loaded'; unavailable: Unavailable[]; starting: number } | { kind: 'invalid'; message: string; missing: string[] };

/**
 * The environment a desktop host starts its servers with: a home and the system's programs,
 * nothing of this shell. Claude Code's is this shell's: it is started from a terminal.
 */
function hostEnv(host: HostName, entryEnv: Record<string, string>): NodeJS.ProcessEnv {
  if (host === 'claude-code') return { ...process.env, ...entryEnv };
  const home = process.env.HOME ?? os.homedir();
  const base: NodeJS.ProcessEnv = process.platform === 'win32' ? { USERPROFILE: home, PATH: process.env.PATH, SYSTEMROOT: process.env.SYSTEMROOT } : { HOME: home, PATH: '/usr/bin:/bin' };
  return { ...base, ...entryEnv };
}

async function loadInHost(host: HostName, configPath: string, entryEnv: Record<string, string>): Promise<HostLoad> {
  try {
    const config = await loadConfig(configPath, hostEnv(host, entryEnv));
    const unavailable: Unavailable[] = [];
    for (const s of config.servers) {
      if (s.unavailable) unavailable.push({ name: s.name, missing: s.unavailable.missing, reason: s.unavailable.reason });
    }
    return { kind: 'loaded', unavailable, starting: config.servers.filter((s) => !s.disabled).length };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // load.ts's missingReason: "environment variable A is not set", "... variables A, B and C are not set".
    const missing = err.issues.flatMap((i) => {
      const names = /^environment variables? (.+) (?:is|are) not set$/.exec(i.message)?.[1];
      return names ? names.split(/, | and /) : [];
    });
    return { kind: 'invalid', message: err.message, missing: [...new Set(missing)] };
  }
}

/** A host file's text with every server's `env` and `headers` values shown as "[REDACTED]" (comments and layout kept). */
function redacted(host: HostName, text: string): string {
  if (text.trim() === '') return text;
  const doc = parseJsonc(text);
  if (!isObject(doc)) return text;
  const key = serversKey(host, doc);
  let out = text;
  for (const [name, entry] of Object.entries(serversOf(host, doc))) {
    if (!isObject(entry)) continue;
    for (const field of ['env', 'headers']) {
      const values = entry[field];
      if (!isObject(values)) continue;
      for (const k of Object.keys(values)) out = applyEdits(out, modify(out, [key, name, field, k], '[REDACTED]', {}));
    }
  }
  return out;
}

/** A line diff of two texts: unchanged lines with "  ", removed "- ", added "+ " (longest common subsequence). */
function diff(a: string, b: string): string {
  const x = a.split('\n');
  const y = b.split('\n');
  const lcs: number[][] = Array.from({ length: x.length + 1 }, () => new Array<number>(y.length + 1).fill(0));
  for (let i = x.length - 1; i >= 0; i--) for (let j = y.length - 1; j >= 0; j--) lcs[i]![j] = x[i] === y[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  let out = '';
  let i = 0;
  let j = 0;
  while (i < x.length || j < y.length) {
    if (i < x.length && j < y.length && x[i] === y[j]) {
      out += `  ${x[i++]}\n`;
      j++;
    } else if (i < x.length && (j >= y.length || lcs[i + 1]![j]! >= lcs[i]![j + 1]!)) {
      out += `- ${x[i++]}\n`;
    } else {
      out += `+ ${y[j++]}\n`;
    }
  }
  return out;
}
