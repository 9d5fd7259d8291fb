// Editing a host's MCP file in place, for `install` and `uninstall`: only the servers key
// changes (jsonc-parser `modify` + `applyEdits`), so the host's comments, trailing commas,
// formatting and every other key stay as the host (or the person) wrote them. Also: which of a
// host's files to edit, which entries are mcpmux's own, and the backups beside the file.

import { readdirSync } from 'node:fs';
import path from 'node:path';
import { applyEdits, modify, type FormattingOptions } from 'jsonc-parser';
import { muxEntry } from '../config/self-reference.js';
import { hostFiles, readHostFile, serversKey, serversOf, type HostFile, type HostName } from './hosts.js';

/** Whether a host's server entry runs mcpmux (`stdio` or `connect`): the entry `install` writes. */
export function isMuxEntry(entry: unknown): boolean {
  return muxEntry(entry) !== undefined;
}

/** A host file whose servers are mcpmux's entries and nothing else: what `install` leaves behind. */
export function isInstalled(host: HostName, doc: Record<string, unknown>): boolean {
  const entries = Object.values(serversOf(host, doc));
  return entries.length > 0 && entries.every(isMuxEntry);
}

/** The servers of a host file that are not mcpmux's: the user's own. */
export function ownServers(host: HostName, doc: Record<string, unknown>): string[] {
  return Object.entries(serversOf(host, doc))
    .filter(([, e]) => !isMuxEntry(e))
    .map(([name]) => name);
}

/**
 * The file `install` edits when `--file` is not given: the first of the host's files (most
 * global first) that has servers under its servers key, else the first. So a VS Code user whose
 * servers live in the workspace's .vscode/mcp.json gets that file edited, and one with servers
 * in the user file gets the user file; after install the same file is found again (it holds
 * the mcpmux entry). Files that cannot be read count as empty here; the read that follows
 * reports them.
 */
export function targetFile(host: HostName): string {
  const files = hostFiles(host);
  for (const f of files) {
    try {
      const read = readHostFile(f);
      if (read && Object.keys(serversOf(host, read.doc)).length > 0) return f;
    } catch {
      // reported when the file is read for the edit
    }
  }
  return files[0]!;
}

/** The backup name of `file` made now: `<file>.mcpmux-backup-<ISO time>` (sortable by time). */
export function backupName(file: string, now = new Date()): string {
  return `${file}.mcpmux-backup-${now.toISOString().replace(/[:.]/g, '-')}`;
}

/** The backups of `file`, newest first. */
function backupsOf(file: string): string[] {
  const prefix = `${path.basename(file)}.mcpmux-backup-`;
  let names: string[];
  try {
    names = readdirSync(path.dirname(file));
  } catch {
    return [];
  }
  return names
    .filter((n) => n.startsWith(prefix))
    .sort()
    .reverse()
    .map((n) => path.join(path.dirname(file), n));
}

/** A backup as read, or undefined when it is gone or is not JSONC (nobody's config). */
function readBackup(file: string): HostFile | undefined {
  try {
    return readHostFile(file);
  } catch {
    return undefined;
  }
}

/** Whether any of a host file's servers is one of mcpmux's entries. */
function runsMux(host: HostName, doc: Record<string, unknown>): boolean {
  return Object.values(serversOf(host, doc)).some(isMuxEntry);
}

/**
 * The newest backup made from the user's own file before mcpmux was in it: the one that gives
 * the user's servers back. A backup with an mcpmux entry in it is never that one: `install`
 * over a file holding mcpmux and a server the user added since (a "mixed" file) backs it up,
 * and restoring it would bring mcpmux back, not the servers it took over.
 */
export function newestOriginalBackup(host: HostName, file: string): { file: string; read: HostFile } | undefined {
  for (const b of backupsOf(file)) {
    const read = readBackup(b);
    if (read && !runsMux(host, read.doc)) return { file: b, read };
  }
  return undefined;
}

/** What `uninstall` gives back, and from where. */
export interface Restore {
  /** The newest original backup, if any. */
  original: { file: string; read: HostFile } | undefined;
  /** Its servers, then the user's own servers of the mixed backups since (oldest first), then of the file now. */
  servers: Record<string, unknown>;
  /** Servers the user added beside mcpmux since the original backup (in later backups): not in it. */
  added: string[];
}

/**
 * The servers to give back to `current` (a file that runs mcpmux): the original backup's, plus
 * every server the user put beside mcpmux since. Those were backed up when a later `install`
 * took them over (a mixed file) or are in the file now; a later one of a name wins, as the
 * user's newer edit.
 */
export function serversToRestore(host: HostName, file: string, current: HostFile): Restore {
  const later: HostFile[] = [];
  let original: Restore['original'];
  for (const b of backupsOf(file)) {
    const read = readBackup(b);
    if (!read) continue;
    if (!runsMux(host, read.doc)) {
      original = { file: b, read };
      break;
    }
    later.unshift(read);
  }
  const servers: Record<string, unknown> = { ...(original ? serversOf(host, original.read.doc) : {}) };
  const added: string[] = [];
  for (const [i, read] of [...later, current].entries()) {
    for (const [name, entry] of Object.entries(serversOf(host, read.doc))) {
      if (isMuxEntry(entry)) continue;
      if (i < later.length && !(name in servers) && !added.includes(name)) added.push(name);
      servers[name] = entry;
    }
  }
  return { original, servers, added };
}

/** The file's own formatting for what `modify` inserts: its indent and its line ends. */
function formattingOf(text: string): FormattingOptions {
  const indent = /^([ \t]+)\S/m.exec(text)?.[1] ?? '  ';
  return {
    insertSpaces: !indent.startsWith('\t'),
    tabSize: indent.startsWith('\t') ? 1 : indent.length,
    eol: text.includes('\r\n') ? '\r\n' : '\n',
  };
}

/** `text` with its servers key set to `servers` (undefined removes one entry: see `withoutEntry`), all else untouched. */
export function withServers(host: HostName, read: HostFile | undefined, servers: Record<string, unknown>): string {
  const text = read && read.text.trim() !== '' ? read.text : '{}\n';
  const key = serversKey(host, read?.doc ?? {});
  return applyEdits(text, modify(text, [key], servers, { formattingOptions: formattingOf(text) }));
}

/** `text` without the server `name` under its servers key, all else untouched. */
export function withoutEntry(host: HostName, read: HostFile, name: string): string {
  const key = serversKey(host, read.doc);
  return applyEdits(read.text, modify(read.text, [key, name], undefined, { formattingOptions: formattingOf(read.text) }));
}

