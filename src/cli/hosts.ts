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

/** The files a host reads its MCP servers from, most global first (the first existing one is the one `install` rewrites). */
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

export class HostFileError extends Error {}

/** Reads a host file (or undefined if it does not exist); throws HostFileError for one that cannot be read. */
export function readHostFile(file: string): Record<string, unknown> | undefined {
  if (!existsSync(file)) return undefined;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new HostFileError(`cannot read ${file}: ${(err as Error).message}`);
  }
  // VS Code's files are JSON with comments and trailing commas.
  const doc = parseLenientJson(text);
  if (!isObject(doc)) throw new HostFileError(`${file} is not a JSON object`);
  return doc;
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

/** JSON with // and /* comments and trailing commas (JSONC), as VS Code writes it. */
export function parseLenientJson(text: string): unknown {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === '"') {
      const start = i++;
      while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
      out += text.slice(start, ++i);
    } else if (c === '/' && text[i + 1] === '/') {
      while (i < text.length && text[i] !== '\n') i++;
    } else if (c === '/' && text[i + 1] === '*') {
      i = text.indexOf('*/', i + 2);
      i = i < 0 ? text.length : i + 2;
    } else if (c === ',' && /^\s*[}\]]/.test(text.slice(i + 1, i + 200))) {
      i++; // a trailing comma
    } else {
      out += c;
      i++;
    }
  }
  try {
    return JSON.parse(out);
  } catch (err) {
    throw new HostFileError(`not valid JSON: ${(err as Error).message}`);
  }
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}
