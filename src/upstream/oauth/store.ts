// Where a server's OAuth tokens live. By default one file per server under the state folder
// (`<state>/oauth/<server>.json`), mode 0600, written atomically (a temp file, then a rename),
// read by the daemon and written by `mcpmux login` (another process). With a shared store and
// its key (`store.secretEnv`), in Redis instead, sealed (shared-logins.ts): every daemon of a
// cluster uses one login and refreshes it one at a time. Nothing from either is ever logged.
//
// The rest of mcpmux goes through the functions at the end (readLogin, writeLogin, ...), which
// ask whichever place `useLoginStore` chose for this process.

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ANONYMOUS_CLIENT } from '../../config/types.js';
import { readText, watchFolder, writePrivate } from '../../files.js';
import { stateDir } from '../../state.js';
import { withFileLock } from './file-lock.js';

/**
 * A host client's name as a folder name, and in its login key: letters a-z, digits, `_` and `-`
 * as they are, every other byte `%XX` (capitals too: a case-insensitive disk must not make
 * `CI` and `ci` one folder; `.` too: no `.` or `..`). Client names come from tokens and from
 * OIDC claims (`oidc:<anything>`): a name too long for a folder is `~` and its SHA-256 (`~` is
 * never left as it is, so no name encodes to that).
 */
export function encodeClient(client: string): string {
  const out = Buffer.from(client, 'utf8').reduce((acc, b) => acc + (/[a-z0-9_-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`), '');
  return out.length <= 120 ? out : `~${createHash('sha256').update(client).digest('hex')}`;
}

/**
 * The key of one login: the server's name (its only login, or the anonymous client's: stdio and
 * serve without listen.auth), or `<server>@<client, encoded>` for a `perClient` server's login
 * for one client. Server names never hold `@`, so the two never meet.
 */
export function loginKey(server: string, client?: string): string {
  return client === undefined || client === ANONYMOUS_CLIENT ? server : `${server}@${encodeClient(client)}`;
}

/** What a person runs to make the login of `server` (for `client`, a per-client one): said in errors and logs. */
export function loginCommand(server: string, client?: string): string {
  return client === undefined || client === ANONYMOUS_CLIENT ? `mcpmux login ${server}` : `mcpmux login ${server} --client ${client}`;
}

export interface StoredLogin {
  /** The server URL the login was made for (canonical): the tokens go to that server only. */
  server: string;
  /** The RFC 8707 resource the tokens were asked for (the server's URL, or a resource above it). */
  resource: string;
  /** The authorization server's endpoints mcpmux needs after the login. */
  as: { issuer: string; token_endpoint: string; revocation_endpoint?: string };
  client: { client_id: string; client_secret?: string; token_endpoint_auth_method?: string };
  tokens: { access_token: string; refresh_token?: string; expires_at?: number; scope?: string } | undefined;
  /** Scope a server asked for beyond the login's (403 insufficient_scope): the next login asks for it. */
  scopeNeeded?: string;
}

function oauthDir(): string {
  return path.join(stateDir(), 'oauth');
}

/** The file of one server's login. Server names are config keys: kept to a safe file name. */
export function loginFile(server: string): string {
  return path.join(oauthDir(), `${server.replace(/[^A-Za-z0-9_.-]/g, '_')}.json`);
}

/**
 * Logins as last read or written, per server, while a watcher runs (`watchLogins`): every
 * request to an HTTP upstream asks for its login, and the file only changes by our own writes
 * (which update this) or another process's (which the watcher sees, and which drop the entry).
 * Without a watcher (`mcpmux login`, one-shot commands) every read goes to the file.
 */
const cached = new Map<string, StoredLogin | undefined>();
let watchers = 0;

function readFromFile(server: string): StoredLogin | undefined {
  if (watchers > 0 && cached.has(server)) return cached.get(server);
  const login = readLoginFile(server);
  if (watchers > 0) cached.set(server, login);
  return login;
}

function readLoginFile(server: string): StoredLogin | undefined {
  const text = readText(loginFile(server));
  if (text === undefined) return undefined;
  try {
    const v = JSON.parse(text) as StoredLogin;
    return v && typeof v.server === 'string' && typeof v.resource === 'string' && v.as && v.client ? v : undefined;
  } catch {
    return undefined;
  }
}

/** What this process wrote last, per file: the watcher tells another process's writes from ours. */
const ownWrites = new Map<string, string>();

function writeToFile(server: string, login: StoredLogin): void {
  const file = loginFile(server);
  const text = JSON.stringify(login, null, 2) + '\n';
  writePrivate(file, text);
  ownWrites.set(file, text);
  if (watchers > 0) cached.set(server, login);
}


/**
 * The last 401 challenge the daemon got from a server it has no working login for: a server
 * may let `initialize` through and ask for a login only later (on tools/list), where `mcpmux
 * login`'s own probe cannot see it. Not a `.json` file: the login watcher ignores it.
 */
function challengeFile(server: string): string {
  return loginFile(server).replace(/\.json$/, '.challenge');
}

export function writeChallenge(server: string, header: string): void {
  const file = challengeFile(server);
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, header, { mode: 0o600 });
}

export function readChallenge(server: string): string | undefined {
  return readText(challengeFile(server));
}

export function deleteChallenge(server: string): void {
  rmSync(challengeFile(server), { force: true });
}

/** Held while a process changes a login's tokens (file-lock.ts). Not `.json`: the login watcher ignores it. */
function lockFile(server: string): string {
  return loginFile(server).replace(/\.json$/, '.lock');
}

function deleteFile(server: string): boolean {
  cached.delete(server);
  const file = loginFile(server);
  if (!existsSync(file)) return false;
  rmSync(file);
  return true;
}

/**
 * Calls `onChange(server)` when a server's login file is written or removed by another process
 * (`mcpmux login`, `mcpmux logout`): a running daemon picks a fresh login up without a restart.
 * Returns the function that stops watching.
 */
function watchFiles(onChange: (server: string) => void, onError: (err: Error) => void): () => void {
  const dir = oauthDir();
  let unwatch: (() => void) | undefined;
  let watching = false;
  const stopCaching = () => {
    watching = false;
    if (--watchers === 0) cached.clear();
  };
  const serverOf = (name: string) => name.slice(0, -'.json'.length);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    unwatch = watchFolder(dir, 100, {
      pick: (name) => (name && name.endsWith('.json') ? name : undefined),
      // Read afresh from now on, whoever wrote it.
      onChange: (name) => void cached.delete(serverOf(name)),
      onQuiet: (name) => {
        // A refresh this process made is no new login: reacting to it would restart the
        // upstream, which refreshes again... Only another process's write (mcpmux login, logout).
        const file = path.join(dir, name);
        if (ownWrites.has(file) && readText(file) === ownWrites.get(file)) return;
        onChange(serverOf(name));
      },
      onError: (err) => {
        // No longer watched: the file is the only truth again.
        if (watching) stopCaching();
        onError(err);
      },
    });
    watchers++;
    watching = true;
  } catch (err) {
    onError(err as Error);
  }
  return () => {
    unwatch?.();
    if (watching) stopCaching();
  };
}

/** Why a login is written: a person's new login (other daemons start its upstream again), or tokens updated in use. */
export type LoginChange = 'login' | 'update';

/** One place logins live: the state folder's files, or the shared store. */
export interface LoginStore {
  read(server: string): Promise<StoredLogin | undefined>;
  write(server: string, login: StoredLogin, change: LoginChange): Promise<void>;
  /** False when there was no login. */
  delete(server: string): Promise<boolean>;
  /**
   * Runs `fn` as the only one changing this login's tokens (a refresh, a client-credentials
   * grant, a scope to remember): per process with files, across the cluster with the shared
   * store. `signal` aborts before the exclusivity could lapse (what `fn` asks for must end by then).
   */
  exclusive<T>(server: string, fn: (signal: AbortSignal) => Promise<T>, onWait?: () => void): Promise<T>;
  /** Calls `onChange(server)` when another process stores or removes a login. Returns the function that stops it. */
  watch(onChange: (server: string) => void, onError: (err: Error) => void): () => void;
  /** Where a login is kept, for what `mcpmux login` prints. */
  where(server: string): string;
  /**
   * A refreshed login `write` could not store (the shared store dropped between the grant and
   * the write): kept and used by this process, stored when it can be. Files have no such case.
   */
  keepUnsaved?(server: string, login: StoredLogin, replaced: string | undefined, err: unknown): void;
}

/** How long a refresh (its token request) may take with files: as long as ever. */
const FILE_REFRESH_MS = 30_000;

export const fileLogins: LoginStore = {
  read: async (server) => readFromFile(server),
  write: async (server, login) => writeToFile(server, login),
  delete: async (server) => deleteFile(server),
  // Across the processes of one state folder: a lock file beside the login (file-lock.ts). The
  // login is read from its file once held: what another process stored just now counts.
  exclusive: (server, fn, onWait) =>
    withFileLock(
      lockFile(server),
      FILE_REFRESH_MS,
      () => {
        cached.delete(server);
        return fn(AbortSignal.timeout(FILE_REFRESH_MS));
      },
      onWait,
    ),
  watch: watchFiles,
  where: (server) => loginFile(server),
};

let logins: LoginStore = fileLogins;

/** Where this process keeps logins from now on (the runtime and `mcpmux login` choose, from the config). */
export function useLoginStore(store: LoginStore): void {
  logins = store;
}

export function readLogin(server: string): Promise<StoredLogin | undefined> {
  return logins.read(server);
}

export function writeLogin(server: string, login: StoredLogin, change: LoginChange = 'update'): Promise<void> {
  return logins.write(server, login, change);
}

/**
 * Stores the login a refresh got. The grant spent the old refresh token, so a write that fails
 * must not lose the new one: where the store can, it keeps it (resolves false: not stored yet).
 */
export async function writeRefreshed(server: string, login: StoredLogin, replaced: string | undefined): Promise<boolean> {
  try {
    await logins.write(server, login, 'update');
    return true;
  } catch (err) {
    if (!logins.keepUnsaved) throw err;
    logins.keepUnsaved(server, login, replaced, err);
    return false;
  }
}

export function deleteLogin(server: string): Promise<boolean> {
  deleteChallenge(server);
  return logins.delete(server);
}

/** `onWait`: called once if another holds the login now (another process's refresh) and this one waits for it. */
export function exclusiveLogin<T>(server: string, fn: (signal: AbortSignal) => Promise<T>, onWait?: () => void): Promise<T> {
  return logins.exclusive(server, fn, onWait);
}

/**
 * Calls `onChange(server)` when another process stores or removes a login (`mcpmux login`,
 * `mcpmux logout`): a running daemon picks a fresh login up without a restart. Returns the
 * function that stops watching.
 */
export function watchLogins(onChange: (server: string) => void, onError: (err: Error) => void): () => void {
  return logins.watch(onChange, onError);
}

export function loginWhere(server: string): string {
  return logins.where(server);
}
