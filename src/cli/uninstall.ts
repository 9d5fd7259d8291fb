// `mcpmux uninstall --host H`: gives a host its own servers back. The newest backup `install`
// made of the user's own file (host-edit.ts: never one with an mcpmux entry in it) is put
// back, together with any server the user added beside mcpmux since (kept in the backup a later
// install made of that mixed file, or in the file now): the whole file when nothing else in it
// changed since (so its comments come back too), else only its servers, into the file as it is now (a host such as Claude Code rewrites its
// other keys all the time, and those changes are the host's). Without such a backup, the
// mcpmux entry is removed. A file that does not run mcpmux is left alone.

import { existsSync } from 'node:fs';
import path from 'node:path';
import { writePrivate } from '../files.js';
import { isMuxEntry, serversToRestore, withoutEntry, withServers } from './host-edit.js';
import { hostFiles, HOSTS, readHostFile, serversKey, serversOf, HostFileError, type HostFile, type HostName } from './hosts.js';
import { UsageError } from './usage-error.js';

export interface UninstallOptions {
  host?: string;
  file?: string;
}

export async function runUninstall(opts: UninstallOptions): Promise<number> {
  const host = opts.host as HostName | undefined;
  if (!host || !(HOSTS as readonly string[]).includes(host)) throw new UsageError(`--host must be one of ${HOSTS.join(', ')}`);
  let file: string;
  let read: HostFile | undefined;
  try {
    ({ file, read } = opts.file ? { file: path.resolve(opts.file), read: readHostFile(path.resolve(opts.file)) } : findInstalled(host));
  } catch (err) {
    if (!(err instanceof HostFileError)) throw err;
    process.stderr.write(`mcpmux uninstall: ${err.message}; not touching it\n`);
    return 1;
  }
  const ours = read ? Object.entries(serversOf(host, read.doc)).filter(([, e]) => isMuxEntry(e)).map(([n]) => n) : [];
  if (!read || ours.length === 0) {
    process.stdout.write(`mcpmux uninstall: ${existsSync(file) ? `${file} does not run mcpmux` : `no ${host} file at ${file}`}; nothing to undo.\n`);
    return 0;
  }
  const { original: backup, servers, added } = serversToRestore(host, file, read);
  if (backup || added.length > 0) {
    const names = backup ? Object.keys(serversOf(host, backup.read.doc)) : [];
    const besides = Object.keys(servers).filter((n) => !names.includes(n));
    const rest = (doc: Record<string, unknown>) => JSON.stringify({ ...doc, [serversKey(host, doc)]: undefined });
    const restSame = backup !== undefined && rest(read.doc) === rest(backup.read.doc);
    const whole = restSame && besides.length === 0;
    writePrivate(file, whole ? backup.read.text : withServers(host, read, servers));
    const from = backup ? `restored ${whole ? file : `the servers of ${file}`} from ${backup.file}: ${names.length} server(s)${names.length ? ` (${names.join(', ')})` : ''}` : `no backup of ${file} from before mcpmux install; removed the mcpmux entry (${ours.join(', ')})`;
    process.stdout.write(
      `mcpmux uninstall: ${from}` +
        `${besides.length ? `; kept ${besides.length} server(s) you added beside mcpmux since (${besides.join(', ')})` : ''}` +
        `${restSame || !backup ? '' : '; the rest of the file, changed since install, is kept as it is now'}.\n`,
    );
  } else {
    let text = read.text;
    for (const name of ours) text = withoutEntry(host, { text, doc: read.doc }, name);
    writePrivate(file, text);
    process.stdout.write(`mcpmux uninstall: no backup of ${file} from before mcpmux install; removed the mcpmux entry (${ours.join(', ')}) and left the rest of the file as it is.\n`);
  }
  process.stdout.write(`Restart ${host} to pick it up.\n`);
  return 0;
}

/**
 * The first of the host's files that runs mcpmux (what install edited), else the first. A file
 * that cannot be read is passed over (as install's targetFile does): it cannot be the one
 * install wrote, and it must not hide the one that is; only when no file runs mcpmux is the
 * first one's error reported.
 */
function findInstalled(host: HostName): { file: string; read: HostFile | undefined } {
  const files = hostFiles(host);
  for (const f of files) {
    let read: HostFile | undefined;
    try {
      read = readHostFile(f);
    } catch (err) {
      if (err instanceof HostFileError) continue;
      throw err;
    }
    if (read && Object.values(serversOf(host, read.doc)).some(isMuxEntry)) return { file: f, read };
  }
  return { file: files[0]!, read: readHostFile(files[0]!) };
}
