// `mcpmux install --host H`: rewrites a desktop host's MCP config so that its one server is
// mcpmux (`mcpmux stdio --config F`), after `mcpmux import` moved its servers into F. Only the
// servers key changes; everything else in the host's file stays. A timestamped backup is kept
// beside the file, and the way back is printed. `--dry-run` prints the change and writes nothing.

import { copyFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writePrivate } from '../files.js';
import { hostFiles, readHostFile, serversKey, HostFileError, type HostName } from './hosts.js';
import { UsageError } from './runtime.js';

export interface InstallOptions {
  host?: string;
  config?: string;
  dryRun?: boolean;
}

const BIN = fileURLToPath(new URL('../../bin/mcpmux.js', import.meta.url));
const INSTALLABLE: readonly HostName[] = ['claude', 'cursor', 'vscode', 'windsurf'];

export async function runInstall(opts: InstallOptions): Promise<number> {
  const host = opts.host as HostName | undefined;
  if (!host || !INSTALLABLE.includes(host)) throw new UsageError(`--host must be one of ${INSTALLABLE.join(', ')}`);
  const configPath = path.resolve(opts.config ?? process.env.MCPMUX_CONFIG ?? '');
  if (!opts.config && !process.env.MCPMUX_CONFIG) throw new UsageError('--config is required (the file `mcpmux import -o` wrote)');
  if (!existsSync(configPath)) throw new UsageError(`--config ${configPath}: no such file (run mcpmux import -o ${configPath} first)`);
  // The host's user-level file: the first of its places (the global one).
  const file = hostFiles(host)[0]!;
  let doc: Record<string, unknown>;
  try {
    doc = readHostFile(file) ?? {};
  } catch (err) {
    if (!(err instanceof HostFileError)) throw err;
    process.stderr.write(`mcpmux install: ${err.message}; not touching it\n`);
    return 1;
  }
  const key = serversKey(host, doc);
  const entry = { command: process.execPath, args: [BIN, 'stdio', '--config', configPath] };
  const next = { ...doc, [key]: { mcpmux: host === 'vscode' ? { type: 'stdio', ...entry } : entry } };
  const before = JSON.stringify(doc, null, 2);
  const after = JSON.stringify(next, null, 2);
  if (opts.dryRun) {
    process.stdout.write(`--- ${file}\n+++ ${file} (after mcpmux install)\n${diff(before, after)}`);
    return 0;
  }
  const existed = existsSync(file);
  const backup = `${file}.mcpmux-backup-${new Date().toISOString().replace(/[:.]/g, '-')}`;
  if (existed) copyFileSync(file, backup);
  // Written beside it, then renamed: the host never reads half a file.
  writePrivate(file, after + '\n');
  process.stdout.write(`mcpmux install: ${file} now runs mcpmux (${configPath}) instead of its ${Object.keys((doc[key] as object | undefined) ?? {}).length} server(s).\n`);
  process.stdout.write(existed ? `To undo: mv ${JSON.stringify(backup)} ${JSON.stringify(file)}\n` : `To undo: rm ${JSON.stringify(file)}\n`);
  process.stdout.write(`Restart ${host} to pick it up.\n`);
  return 0;
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

