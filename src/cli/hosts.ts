// The desktop hosts' own MCP config files: where each host keeps them on each platform, and how
// to read their server entries into one neutral shape (for `mcpmux import` and `install`).
//
//   claude       Claude Desktop  claude_desktop_config.json   { mcpServers: { name: entry } }
//   claude-code  Claude Code     ~/.claude.json, ./.mcp.json  { mcpServers } (+ projects[dir].mcpServers)
//   cursor       Cursor          ~/.cursor/mcp.json, ./.cursor/mcp.json       { mcpServers }
//   vscode       VS Code         <user dir>/mcp.json, ./.vscode/mcp.json      { servers, inputs }
//   windsurf     Windsurf        ~/.codeium/windsurf/mcp_config.json          { mcpServers } (serverUrl)

import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { JsoncError, parseJsonc } from '../jsonc.js';
import { isObject } from '../objects.js';

export const HOSTS = ['claude', 'claude-code', 'cursor', 'vscode', 'windsurf'] as const;
export type HostName = (typeof HOSTS)[number];

/** One server entry as a host describes it, before conversion. */
export interface HostEntry {
  name: string;
  /** Which host file it came from. */
  source: string;
  host: HostName | 'file';
  raw: Record<string, unknown>;
  /** VS Code's `inputs` (prompted values), by id, when the file had any. */
  inputs?: Map<string, { description?: string; password?: boolean }>;
}

interface Env {
  home: string;
  platform: NodeJS.Platform;
  appData: string | undefined;
  xdgConfig: string | undefined;
  cwd: string;
}

function env(): Env {
  return {
    home: process.env.HOME ?? os.homedir(),
    platform: process.platform,
    appData: process.env.APPDATA,
    xdgConfig: process.env.XDG_CONFIG_HOME,
    cwd: process.cwd(),
  };
}

/** The folder where desktop apps keep per-user settings (Application Support, %APPDATA%, ~/.config). */
function appConfigDir(e: Env): string {
  if (e.platform === 'darwin') return path.join(e.home, 'Library', 'Application Support');
  if (e.platform === 'win32') return e.appData ?? path.join(e.home, 'AppData', 'Roaming');
  return e.xdgConfig ?? path.join(e.home, '.config');
}

/** The files a host reads its MCP servers from, most global first (`install` edits the first that has servers: host-edit.ts). */
export function hostFiles(host: HostName, e: Env = env()): string[] {
  switch (host) {
    case 'claude':
      return [path.join(appConfigDir(e), 'Claude', 'claude_desktop_config.json')];
    case 'claude-code':
      return [path.join(e.home, '.claude.json'), path.join(e.cwd, '.mcp.json')];
    case 'cursor':
      return [path.join(e.home, '.cursor', 'mcp.json'), path.join(e.cwd, '.cursor', 'mcp.json')];
    case 'vscode':
      return [path.join(appConfigDir(e), 'Code', 'User', 'mcp.json'), path.join(e.cwd, '.vscode', 'mcp.json')];
    case 'windsurf':
      return [path.join(e.home, '.codeium', 'windsurf', 'mcp_config.json')];
  }
}

/** The key a host keeps its servers under. */
export function serversKey(host: HostName | 'file', doc: Record<string, unknown>): 'servers' | 'mcpServers' {
  if (host === 'vscode') return 'servers';
  if (host === 'file' && isObject(doc.servers) && !isObject(doc.mcpServers)) return 'servers';
  return 'mcpServers';
}

/** A host file that exists but cannot be read or is not JSONC: the message names the file (and line and column). */
export class HostFileError extends Error {}

/** A host file as read: its text (what `install` edits in place) and what it means. */
export interface HostFile {
  text: string;
  doc: Record<string, unknown>;
}

/** Reads a host file (or undefined if it does not exist); throws HostFileError for one that cannot be read. */
export function readHostFile(file: string): HostFile | undefined {
  if (!existsSync(file)) return undefined;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new HostFileError(`cannot read ${file}: ${(err as Error).message}`);
  }
  // The hosts' files are JSON with comments and trailing commas (VS Code, Cursor, people's edits).
  // An empty file is what a host treats as "no settings yet".
  if (text.trim() === '') return { text, doc: {} };
  let doc: unknown;
  try {
    doc = parseJsonc(text);
  } catch (err) {
    if (err instanceof JsoncError) throw new HostFileError(`${file}: ${err.message}`);
    throw err;
  }
  if (!isObject(doc)) throw new HostFileError(`${file}: not a JSON object`);
  return { text, doc };
}

/** The host's servers under its servers key (not Claude Code's per-project ones). */
export function serversOf(host: HostName | 'file', doc: Record<string, unknown>): Record<string, unknown> {
  const servers = doc[serversKey(host, doc)];
  return isObject(servers) ? servers : {};
}

/** Every server entry of one host file. */
export function entriesOf(host: HostName | 'file', file: string, doc: Record<string, unknown>): HostEntry[] {
  const out: HostEntry[] = [];
  const inputs = new Map<string, { description?: string; password?: boolean }>();
  if (Array.isArray(doc.inputs)) {
    for (const i of doc.inputs) if (isObject(i) && typeof i.id === 'string') inputs.set(i.id, { description: str(i.description), password: i.password === true });
  }
  const add = (servers: unknown): void => {
    if (!isObject(servers)) return;
    for (const [name, raw] of Object.entries(servers)) {
      if (isObject(raw)) out.push({ name, source: file, host, raw, ...(inputs.size > 0 && { inputs }) });
    }
  };
  add(doc[serversKey(host, doc)]);
  // Claude Code keeps per-project servers in its user file too.
  if (host === 'claude-code' && isObject(doc.projects)) {
    for (const project of Object.values(doc.projects)) if (isObject(project)) add(project.mcpServers);
  }
  return out;
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}
