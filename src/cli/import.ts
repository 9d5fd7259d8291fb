// `mcpmux import`: the desktop hosts' MCP servers, merged into one mcpmux config.
//
// Sources are host names (their files at the documented per-OS places, hosts.ts) or files.
// Each entry becomes an mcpmux server (stdio, http or sse) with its env and headers; what
// mcpmux cannot express is reported with the entry's name and left out. Name clashes: an
// identical definition from another host is kept once; a different one is renamed
// `<name>-<host>` (then `-2`, `-3`...). The config goes to -o FILE (never over an existing file
// without --force) or to stdout; the report goes to stderr. When a host's mcpmux entry runs the
// -o FILE, the new servers are added to it and its own are kept (they were moved out of the host).

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { applyEdits, modify } from 'jsonc-parser';
import { muxEntry, sameFileKey } from '../config/self-reference.js';
import { parseJsonc } from '../jsonc.js';
import { isObject } from '../objects.js';
import { entriesOf, hostFiles, HOSTS, readHostFile, HostFileError, type HostEntry, type HostName } from './hosts.js';
import { UsageError } from './usage-error.js';

/** This installation's config schema, for editors (`$schema`). */
const SCHEMA = fileURLToPath(new URL('../../schema/config.schema.json', import.meta.url));

export interface ImportOptions {
  from?: string[];
  output?: string;
  force?: boolean;
}

/** An mcpmux server entry as written to the config. */
type ServerEntry = Record<string, unknown>;

export interface Conversion {
  servers: Record<string, ServerEntry>;
  /** One line each: what was imported from where, renamed, or left out and why. */
  notes: string[];
  /** Environment variables the config now needs (VS Code inputs), with what they stand for. */
  needs: Map<string, string>;
}

export async function runImport(opts: ImportOptions): Promise<number> {
  const sources = opts.from && opts.from.length > 0 ? opts.from : [...HOSTS];
  const entries: HostEntry[] = [];
  const notes: string[] = [];
  const unreadable: string[] = [];
  for (const source of sources) {
    const host = (HOSTS as readonly string[]).includes(source) ? (source as HostName) : undefined;
    const files = host ? hostFiles(host) : [path.resolve(source)];
    if (!host && !existsSync(files[0]!)) throw new UsageError(`--from ${source}: no such host (${HOSTS.join(', ')}) or file`);
    for (const file of files) {
      try {
        const read = readHostFile(file);
        if (!read) continue;
        const found = entriesOf(host ?? 'file', file, read.doc);
        notes.push(`read ${found.length} server(s) from ${file}`);
        entries.push(...found);
      } catch (err) {
        if (!(err instanceof HostFileError)) throw err;
        unreadable.push(err.message);
      }
    }
  }
  // A file that exists but cannot be read holds servers we cannot see: importing the rest would
  // look complete and is not. Say where the problem is, and write nothing.
  if (unreadable.length > 0) {
    for (const u of unreadable) process.stderr.write(`mcpmux import: cannot import ${u}\n`);
    process.stderr.write('mcpmux import: nothing written; fix the file (or leave it out with --from) and run import again\n');
    return 1;
  }
  // Re-importing into the config a host's mcpmux entry runs (the user added a server to the host
  // after install): that config holds the servers install took from the host, which are no
  // longer in the host's file. Overwritten, they would be gone from both; so they are kept and
  // the new ones added, whether or not --force is given.
  const existing = opts.output && runsThisConfig(entries, opts.output) ? readOwnConfig(opts.output) : undefined;
  const result = convert(entries, existing?.servers);
  const config = { $schema: SCHEMA, mcpServers: result.servers };
  let text = JSON.stringify(config, null, 2) + '\n';
  if (existing) {
    const added = Object.keys(result.servers).filter((n) => !Object.hasOwn(existing.servers, n));
    // Added into the file as it is (jsonc-parser: its comments and other keys stay).
    text = existing.text;
    for (const n of added) text = applyEdits(text, modify(text, ['mcpServers', n], result.servers[n], { formattingOptions: { insertSpaces: true, tabSize: 2 } }));
    result.notes.push(`${opts.output} is the config a host's mcpmux entry runs: kept its ${Object.keys(existing.servers).length} server(s) and added ${added.length}${added.length ? ` (${added.join(', ')})` : ''}`);
  }
  for (const n of [...notes, ...result.notes]) process.stderr.write(`mcpmux import: ${n}\n`);
  // Variables the config refers to (without a default) that this environment does not set.
  for (const [name, server] of Object.entries(result.servers)) {
    for (const m of JSON.stringify(server).matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)) {
      if (process.env[m[1]!] === undefined && !result.needs.has(m[1]!)) result.needs.set(m[1]!, `used by "${name}"`);
    }
  }
  for (const [v, what] of result.needs) process.stderr.write(`mcpmux import: set ${v} before starting mcpmux (${what})\n`);
  if (Object.keys(result.servers).length === 0) process.stderr.write('mcpmux import: no server found to import\n');
  if (!opts.output) {
    process.stdout.write(text);
    return 0;
  }
  if (existsSync(opts.output) && !opts.force && !existing) {
    process.stderr.write(`mcpmux import: ${opts.output} exists; use --force to overwrite it\n`);
    return 1;
  }
  writeFileSync(opts.output, text, { mode: 0o600 });
  process.stderr.write(`mcpmux import: wrote ${Object.keys(result.servers).length} server(s) to ${opts.output}; check it with: mcpmux check --config ${opts.output}\n`);
  return 0;
}

/** Whether one of the entries (an mcpmux entry, left out) runs mcpmux on `config`. */
function runsThisConfig(entries: readonly HostEntry[], config: string): boolean {
  const target = sameFileKey(config);
  return entries.some((e) => {
    const inv = muxEntry(e.raw);
    return inv?.config !== undefined && sameFileKey(path.resolve(path.dirname(e.source), inv.config)) === target;
  });
}

/** An existing mcpmux config's text and servers; a file that cannot be read is a UsageError (nothing is written over it). */
function readOwnConfig(file: string): { text: string; servers: Record<string, ServerEntry> } {
  let text: string;
  let doc: unknown;
  try {
    text = readFileSync(file, 'utf8');
    doc = parseJsonc(text);
  } catch (err) {
    throw new UsageError(`-o ${file}: a host's mcpmux entry runs this config, so import adds to it, but it cannot be read (${(err as Error).message}); fix it or choose another -o`);
  }
  if (!isObject(doc)) throw new UsageError(`-o ${file}: a host's mcpmux entry runs this config, so import adds to it, but it is not a JSON object`);
  const servers: Record<string, ServerEntry> = {};
  if (isObject(doc.mcpServers)) for (const [n, s] of Object.entries(doc.mcpServers)) if (isObject(s)) servers[n] = s;
  return { text, servers };
}

/** Host entries -> mcpmux servers, clashes resolved in the order given, after the servers of `existing` (kept as they are). */
export function convert(entries: readonly HostEntry[], existing: Readonly<Record<string, ServerEntry>> = {}): Conversion {
  const servers: Record<string, ServerEntry> = { ...existing };
  const notes: string[] = [];
  const needs = new Map<string, string>();
  for (const e of entries) {
    const converted = convertEntry(e, needs);
    if (typeof converted === 'string') {
      notes.push(`left out "${e.name}" from ${e.source}: ${converted}`);
      continue;
    }
    const base = safeName(e.name);
    const existing = servers[base];
    if (existing && JSON.stringify(existing) === JSON.stringify(converted)) {
      notes.push(`"${e.name}" from ${e.source} is the same as one already imported; kept once`);
      continue;
    }
    let name = base;
    if (existing) {
      name = `${base}-${e.host}`;
      for (let n = 2; servers[name]; n++) name = `${base}-${e.host}-${n}`;
      notes.push(`"${e.name}" from ${e.source} differs from the one already imported; imported as "${name}"`);
    } else if (name !== e.name) {
      notes.push(`"${e.name}" from ${e.source} imported as "${name}" (server names use letters, digits, "_", "." and "-")`);
    } else {
      notes.push(`imported "${name}" from ${e.source}`);
    }
    servers[name] = converted;
  }
  return { servers, notes, needs };
}

/** One entry, or why it cannot be imported. */
function convertEntry(e: HostEntry, needs: Map<string, string>): ServerEntry | string {
  const r = e.raw;
  const sub = (v: string): string | { error: string } => substitute(v, e, needs);
  const strings = (v: unknown, what: string): Record<string, string> | string | undefined => {
    if (v === undefined) return undefined;
    if (!isObject(v)) return `${what} is not an object`;
    const out: Record<string, string> = {};
    for (const [k, x] of Object.entries(v)) {
      if (typeof x !== 'string' && typeof x !== 'number' && typeof x !== 'boolean') return `${what}.${k} is not a string`;
      const s = sub(String(x));
      if (typeof s !== 'string') return s.error;
      out[k] = s;
    }
    return out;
  };
  if (r.envFile !== undefined) return 'envFile is not supported: put the variables in "env"';
  // mcpmux's own entry (what `mcpmux install` wrote): imported, mcpmux would start itself.
  const self = muxEntry(r);
  if (self) return `it runs mcpmux itself (mcpmux ${self.mode}${self.config ? ` --config ${self.config}` : ''}), probably the entry \`mcpmux install\` wrote; imported, mcpmux would start itself`;
  const url = typeof r.url === 'string' ? r.url : typeof r.serverUrl === 'string' ? r.serverUrl : undefined;
  const type = typeof r.type === 'string' ? r.type : typeof r.transport === 'string' ? r.transport : undefined;
  const out: ServerEntry = {};
  if (typeof r.command === 'string') {
    if (type !== undefined && type !== 'stdio') return `type "${type}" with a command`;
    const command = sub(r.command);
    if (typeof command !== 'string') return command.error;
    out.command = command;
    if (r.args !== undefined) {
      if (!Array.isArray(r.args) || !r.args.every((a) => typeof a === 'string' || typeof a === 'number')) return 'args is not a list of strings';
      const args: string[] = [];
      for (const a of r.args) {
        const s = sub(String(a));
        if (typeof s !== 'string') return s.error;
        args.push(s);
      }
      out.args = args;
    }
    const envs = strings(r.env, 'env');
    if (typeof envs === 'string') return envs;
    if (envs && Object.keys(envs).length > 0) out.env = envs;
    if (typeof r.cwd === 'string') {
      const cwd = sub(r.cwd);
      if (typeof cwd !== 'string') return cwd.error;
      out.cwd = cwd;
    }
  } else if (url !== undefined) {
    const kind = type === undefined || type === 'http' || type === 'streamable-http' || type === 'streamableHttp' ? 'http' : type === 'sse' ? 'sse' : undefined;
    if (!kind) return `transport "${type}" is not one mcpmux speaks`;
    const u = sub(url);
    if (typeof u !== 'string') return u.error;
    if (!/^https?:\/\//.test(u)) return `url ${JSON.stringify(u)} is not http(s)`;
    out.url = u;
    if (kind === 'sse' || type !== undefined) out.type = kind;
    const headers = strings(r.headers, 'headers');
    if (typeof headers === 'string') return headers;
    if (headers && Object.keys(headers).length > 0) out.headers = headers;
    if (r.oauth !== undefined || r.auth !== undefined) return 'OAuth settings are not supported yet';
  } else {
    return 'neither a command nor a url';
  }
  if (r.disabled === true) out.disabled = true;
  return out;
}

/**
 * A host's `${...}` references in mcpmux's spelling: `${env:X}` (VS Code, Cursor) -> `${X}`,
 * `${input:id}` (VS Code) -> `${MCPMUX_INPUT_<ID>}` (noted as needed). VS Code's predefined
 * variables are resolved here, from the file's own location, because they are facts about that
 * file, not about the environment mcpmux will run in: `${userHome}` -> this user's home,
 * `${workspaceFolder}` / `${workspaceFolderBasename}` -> the folder holding the file's `.vscode`
 * (or `.cursor`) folder, and its name, `${pathSeparator}` -> this platform's. In a user-level file
 * (VS Code's or Cursor's ~/.cursor/mcp.json) there is no workspace folder (the editor uses
 * whichever folder is open): such a server cannot be imported. `${X}` and `${X:-default}` (Claude Code) are already mcpmux's. Anything else cannot be
 * expressed.
 */
function substitute(value: string, e: HostEntry, needs: Map<string, string>): string | { error: string } {
  let failed: string | undefined;
  const vscodeLike = e.host === 'vscode' || e.host === 'cursor' || e.host === 'file';
  const workspace = workspaceOf(e.source);
  // A resolved path is literal text in the config: a `${` in it must not be expanded.
  const literal = (s: string): string => s.split('${').join('$${');
  const out = value.replace(/\$\{([^}]*)\}/g, (whole, ref: string) => {
    const env = /^env:([A-Za-z_][A-Za-z0-9_]*)$/.exec(ref);
    if (env) return `\${${env[1]}}`;
    const input = /^input:(.+)$/.exec(ref);
    if (input) {
      const v = `MCPMUX_INPUT_${input[1]!.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
      const about = e.inputs?.get(input[1]!)?.description;
      needs.set(v, `VS Code input "${input[1]}"${about ? `: ${about}` : ''}`);
      return `\${${v}}`;
    }
    // Only VS Code and Cursor have predefined variables; elsewhere `${userHome}` is a variable like any other.
    if (!vscodeLike) return /^[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?$/.test(ref) ? whole : ((failed ??= `\${${ref}} cannot be expressed in an mcpmux config`), whole);
    if (ref === 'userHome') return literal(process.env.HOME ?? os.homedir());
    if (ref === 'pathSeparator' || ref === '/') return path.sep;
    if (ref === 'workspaceFolder' || ref === 'workspaceFolderBasename') {
      if (workspace) return literal(ref === 'workspaceFolder' ? workspace : path.basename(workspace));
      failed ??= `\${${ref}} has no value in a user-level file (the editor uses whichever folder is open): put the folder's path in instead, or move the server to that folder's .vscode/mcp.json (Cursor: .cursor/mcp.json)`;
      return whole;
    }
    if (/^[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?$/.test(ref)) return whole;
    failed ??= `\${${ref}} cannot be expressed in an mcpmux config`;
    return whole;
  });
  return failed ? { error: failed } : out;
}

/**
 * The workspace folder of a host file: the folder holding its `.vscode` or `.cursor` folder. Not
 * for a host's user-level file, which lives at the same kind of path (Cursor's ~/.cursor/mcp.json)
 * yet belongs to no workspace: there `${workspaceFolder}` is whichever folder is open, not $HOME.
 */
function workspaceOf(file: string): string | undefined {
  if (!/[\\/](\.vscode|\.cursor)[\\/]mcp\.json$/.test(file)) return undefined;
  const key = sameFileKey(file);
  if (HOSTS.some((h) => sameFileKey(hostFiles(h)[0]!) === key)) return undefined;
  return path.dirname(path.dirname(file));
}

/** A server name mcpmux accepts: [A-Za-z0-9_.-], and no "__" (the default separator). */
function safeName(name: string): string {
  const s = name.replace(/[^A-Za-z0-9_.-]/g, '-').replace(/_{2,}/g, '_');
  return s.length > 0 ? s : 'server';
}
