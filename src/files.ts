// The three things mcpmux does with files it shares with other processes (its config, tool
// pins, OAuth logins, a host's config): read one that may be absent, write one so no reader
// ever sees half of it, and hear when another process changed one.

import { mkdirSync, readFileSync, realpathSync, renameSync, watch, writeFileSync } from 'node:fs';
import path from 'node:path';

/** The file's text; undefined when it is absent or unreadable. */
export function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * Writes `text` beside `file` and renames it over (a reader sees the old file or the new one),
 * mode 0600; a missing folder is created private (0700). A symlink is written through: the
 * file it points at gets the text and the link stays (dotfiles kept in a repository and linked
 * into place; renaming over the link would replace it with a plain file). Throws as
 * writeFileSync does.
 */
export function writePrivate(file: string, text: string): void {
  let target = file;
  try {
    target = realpathSync(file);
  } catch {
    // absent (or a dangling link): written where it is named
  }
  mkdirSync(path.dirname(target), { recursive: true, mode: 0o700 });
  const tmp = `${target}.${process.pid}.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, target);
}

/**
 * Calls `onText` with the file's text once changes to it have been quiet for `quietMs`.
 * Watches the folder, not the file: a save by writing a new file and renaming it over the old
 * one would leave a watch on the file looking at one that is gone. A moment without the file
 * (mid-rename) is no change. Returns the function that stops watching; throws when the folder
 * cannot be watched, and reports later watch failures to `onError`.
 */
export function watchFile(file: string, quietMs: number, onText: (text: string) => void, onError: (err: Error) => void): () => void {
  const base = path.basename(file);
  return watchFolder(path.dirname(file), quietMs, {
    // A change without a name (some platforms) may be this file's.
    pick: (name) => (name === null || name === base ? base : undefined),
    onQuiet: () => {
      const text = readText(file);
      if (text !== undefined) onText(text);
    },
    onError,
  });
}

/**
 * Watches a folder for changes to the files in it, each file on its own: `pick` names the file
 * a change is about (undefined: not one we watch), `onChange` hears of each change at once, and
 * `onQuiet` once that file's changes have been quiet for `quietMs`. Returns the function that
 * stops watching; throws when the folder cannot be watched, and reports later watch failures
 * to `onError`.
 */
export function watchFolder(
  folder: string,
  quietMs: number,
  on: { pick(name: string | null): string | undefined; onChange?(name: string): void; onQuiet(name: string): void; onError(err: Error): void },
): () => void {
  const timers = new Map<string, NodeJS.Timeout>();
  const watcher = watch(folder, (_event, changed) => {
    const name = on.pick(changed);
    if (name === undefined) return;
    on.onChange?.(name);
    clearTimeout(timers.get(name));
    const timer = setTimeout(() => {
      timers.delete(name);
      on.onQuiet(name);
    }, quietMs);
    timer.unref();
    timers.set(name, timer);
  });
  watcher.on('error', on.onError);
  watcher.unref();
  return () => {
    for (const t of timers.values()) clearTimeout(t);
    watcher.close();
  };
}
