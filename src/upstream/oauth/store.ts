// Where a server's OAuth tokens live. By default one file per login under the state folder
// (`<state>/oauth/<server>.json`; a `perClient` server's, one per host client:
// `<state>/oauth/clients/<client, encoded>/<server>.json`), mode 0600 in 0700 folders, written
// atomically (a temp file, then a rename),
// read by the daemon and written by `mcpmux login` (another process). With a shared store and
// its key (`store.secretEnv`), in Redis instead, sealed (shared-logins.ts): every daemon of a
// cluster uses one login and refreshes it one at a time. Nothing from either is ever logged.
//
// The rest of mcpmux goes through the functions at the end (readLogin, writeLogin, ...), which
// ask whichever place `useLoginStore` chose for this process. They take a login key
// (`loginKey`): the server's name, or the server's name and a host client's.

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
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

/** The server a login key is for. */
export function serverOfKey(key: string): string {
  const at = key.indexOf('@');
  return at < 0 ? key : key.slice(0, at);
}

/** What a person runs to make the login of `server` (for `client`, a per-client one): said in errors and logs. */
export function loginCommand(server: string, client?: string): string {
  return client === undefined || client === ANONYMOUS_CLIENT ? `mcpmux login ${server}` : `mcpmux login ${server} --client ${client}`;
}

/** The same, from a login key (a hashed client name cannot be told: the command then names none). */
export function loginCommandOfKey(key: string): string {
  const at = key.indexOf('@');
  if (at < 0) return loginCommand(key);
  const encoded = key.slice(at + 1);
  let client: string | undefined;
  try {
    client = encoded.startsWith('~') ? undefined : Buffer.from(encoded.replace(/%([0-9A-F]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16))), 'latin1').toString('utf8');
  } catch {
    client = undefined;
  }
  return client === undefined ? `mcpmux login ${key.slice(0, at)} --client <client>` : loginCommand(key.slice(0, at), client);
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

const safeName = (server: string) => server.replace(/[^A-Za-z0-9_.-]/g, '_');

/** The file of one login. Server names are config keys: kept to a safe file name. */
export function loginFile(key: string): string {
  const at = key.indexOf('@');
  if (at < 0) return path.join(oauthDir(), `${safeName(key)}.json`);
  return path.join(oauthDir(), 'clients', key.slice(at + 1), `${safeName(key.slice(0, at))}.json`);
}

/**
 * Logins as last read or written, per server, while a watcher runs (`watchLogins`): every
 * request to an HTTP upstream asks for its login, and the file only changes by our own writes
 * (which update this) or another process's (which the watcher sees, and which drop the entry).
 * Without a watcher (`mcpmux login`, one-shot commands) every read goes to the file.
 */
const cached = new Map<string, StoredLogin | undefined>();
let watchers = 0;

function readFromFile(key: string): StoredLogin | undefined {
  if (watchers > 0 && cached.has(key)) return cached.get(key);
  const login = readLoginFile(key);
  if (watchers > 0) cached.set(key, login);
  return login;
}

function readLoginFile(key: string): StoredLogin | undefined {
  const text = readText(loginFile(key));
  if (text === undefined) return undefined;
  try {
    const v = JSON.parse(text) as StoredLogin;
    return v && typeof v.server === 'string' && typeof v.resource === 'string' && v.as && v.client ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What this process wrote last, per file (a digest of the text): the watcher tells another
 * process's writes from ours. Kept when the key's last connection goes: a refused refresh writes
 * the login without its tokens and then closes the connection, and the watcher looks at that
 * write only once the file has been quiet for 100 ms; forgotten by then, our own write read as
 * another process's new login and restarted the upstream that waits for one (issue 23: a CI
 * run under load). Bounded instead: the OWN_WRITES_MAX files written last.
 */
const ownWrites = new Map<string, string>();
const OWN_WRITES_MAX = 1024;
const digest = (text: string): string => createHash('sha256').update(text).digest('hex');

function rememberOwnWrite(file: string, text: string): void {
  ownWrites.delete(file); // re-inserted: the newest last, so the oldest is dropped first
  ownWrites.set(file, digest(text));
  if (ownWrites.size > OWN_WRITES_MAX) ownWrites.delete(ownWrites.keys().next().value!);
}

function writeToFile(key: string, login: StoredLogin): void {
  const file = loginFile(key);
  const text = JSON.stringify(login, null, 2) + '\n';
  writePrivate(file, text);
  rememberOwnWrite(file, text);
  if (watchers > 0) cached.set(key, login);
}


/**
 * The last 401 challenge the daemon got from a server it has no working login for: a server
 * may let `initialize` through and ask for a login only later (on tools/list), where `mcpmux
 * login`'s own probe cannot see it. Not a `.json` file: the login watcher ignores it.
 */
function challengeFile(key: string): string {
  return loginFile(key).replace(/\.json$/, '.challenge');
}

export function writeChallenge(key: string, header: string): void {
  if (inMemory(key)) {
    const entry = memory.get(key);
    if (entry) entry.challenge = header;
    return;
  }
  const file = challengeFile(key);
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, header, { mode: 0o600 });
}

export function readChallenge(key: string): string | undefined {
  if (inMemory(key)) return memory.get(key)?.challenge;
  return readText(challengeFile(key));
}

export function deleteChallenge(key: string): void {
  if (inMemory(key)) {
    const entry = memory.get(key);
    if (entry) entry.challenge = undefined;
    return;
  }
  rmSync(challengeFile(key), { force: true });
}

/** Held while a process changes a login's tokens (file-lock.ts). Not `.json`: the login watcher ignores it. */
function lockFile(key: string): string {
  return loginFile(key).replace(/\.json$/, '.lock');
}

function deleteFile(key: string): boolean {
  cached.delete(key);
  const file = loginFile(key);
  if (!existsSync(file)) return false;
  rmSync(file);
  return true;
}

/**
 * Calls `onChange(key)` when a login file is written or removed by another process (`mcpmux
 * login`, `mcpmux logout`): a running daemon picks a fresh login up without a restart. The
 * per-client files are one folder down per client (a folder watch is not recursive
 * everywhere): `clients/` is watched for new client folders, and each of those for its files.
 * Returns the function that stops watching.
 */
function watchFiles(onChange: (key: string) => void, onError: (err: Error) => void): () => void {
  const dir = oauthDir();
  const clientsDir = path.join(dir, 'clients');
  const unwatches = new Map<string, () => void>();
  let watching = false;
  const stopCaching = () => {
    watching = false;
    if (--watchers === 0) cached.clear();
  };
  const failed = (err: Error) => {
    // No longer watched: the file is the only truth again.
    if (watching) stopCaching();
    onError(err);
  };
  /**
   * Watches one folder of login files; `keyOf` turns a file's server part into its login key.
   * A client's folder that fails (removed) is only no longer watched.
   */
  const watchLoginFolder = (folder: string, keyOf: (server: string) => string, onError: (err: Error) => void = failed): void => {
    const serverOf = (name: string) => name.slice(0, -'.json'.length);
    unwatches.set(folder, watchFolder(folder, 100, {
      pick: (name) => (name && name.endsWith('.json') ? name : undefined),
      // Read afresh from now on, whoever wrote it.
      onChange: (name) => void cached.delete(keyOf(serverOf(name))),
      onQuiet: (name) => {
        // A refresh this process made is no new login: reacting to it would restart the
        // upstream, which refreshes again... Only another process's write (mcpmux login, logout).
        if (ownWrite(path.join(folder, name))) return;
        onChange(keyOf(serverOf(name)));
      },
      onError,
    }));
  };
  const forget = (folder: string) => () => {
    unwatches.get(folder)?.();
    unwatches.delete(folder);
  };
  const watchClient = (encoded: string): void => {
    if (!/^(~[0-9a-f]{64}|[a-z0-9_%A-F-]+)$/.test(encoded)) return;
    const folder = path.join(clientsDir, encoded);
    // Made, or removed and made again: watched afresh (a watch on a removed folder sees nothing more).
    forget(folder)();
    try {
      watchLoginFolder(folder, (server) => `${server}@${encoded}`, forget(folder));
    } catch {
      // Gone again (or not a folder): nothing to watch.
      return;
    }
    // A login written before the folder was watched (it was made with the folder) is news too;
    // what else is there was read afresh anyway (a spare restart of a connection waiting for it).
    for (const name of safeReaddir(folder)) {
      if (!name.endsWith('.json') || ownWrite(path.join(folder, name))) continue;
      const key = `${name.slice(0, -'.json'.length)}@${encoded}`;
      cached.delete(key);
      onChange(key);
    }
  };
  try {
    mkdirSync(clientsDir, { recursive: true, mode: 0o700 });
    watchLoginFolder(dir, (server) => server);
    unwatches.set(clientsDir, watchFolder(clientsDir, 100, { pick: (name) => name ?? undefined, onQuiet: watchClient, onError: failed }));
    for (const encoded of safeReaddir(clientsDir)) {
      try {
        const folder = path.join(clientsDir, encoded);
        watchLoginFolder(folder, (server) => `${server}@${encoded}`, forget(folder));
      } catch {
        // not a folder
      }
    }
    watchers++;
    watching = true;
  } catch (err) {
    for (const u of unwatches.values()) u();
    unwatches.clear();
    onError(err as Error);
  }
  return () => {
    for (const u of unwatches.values()) u();
    unwatches.clear();
    if (watching) stopCaching();
  };
}

/** Whether `file` holds what this process wrote there last (a refresh of ours is no news). */
function ownWrite(file: string): boolean {
  const mine = ownWrites.get(file);
  if (mine === undefined) return false;
  const text = readText(file);
  return text !== undefined && digest(text) === mine;
}

function safeReaddir(folder: string): string[] {
  try {
    return readdirSync(folder);
  } catch {
    return [];
  }
}

/**
 * Logins kept in this process's memory only, never in a file or the shared store: those of the
 * grants that act for the host (token_exchange, jwt_bearer with the host's ID token). Their
 * tokens are per person, short-lived and got again from the host's JWT at any time, so storing
 * them would only leave a file (or a Redis key) per person who ever signed in. A server's logins
 * are all of one kind (its grant), so the choice is per server (`keepLoginsInMemory`, set by
 * each OAuthTokens from its config). A login key's entry lives while a connection holds it
 * (`holdLogin`) and is dropped with the last one; a write for a key no connection holds is
 * dropped too (a grant that ends after its connection closed).
 */
const memoryServers = new Set<string>();

interface MemoryLogin {
  login: StoredLogin | undefined;
  challenge: string | undefined;
  holders: number;
  /** The in-process queue of exclusive sections (no other process shares these logins). */
  queue: Promise<unknown>;
}

const memory = new Map<string, MemoryLogin>();

/** Whether `server`'s logins live in memory only (see above). */
export function keepLoginsInMemory(server: string, yes: boolean): void {
  if (yes) memoryServers.add(server);
  else memoryServers.delete(server);
}

const inMemory = (key: string): boolean => memoryServers.has(serverOfKey(key));

/**
 * A connection uses login `key` from now on; the function returned says it no longer does, and
 * returns true when that was the last connection of the key. With the last one, what this
 * process keeps for the key goes: an in-memory login, and the file cache's entries (not the
 * digest of its own last write: see ownWrites, bounded on its own).
 */
export function holdLogin(key: string): () => boolean {
  const entry = memory.get(key) ?? { login: undefined, challenge: undefined, holders: 0, queue: Promise.resolve() };
  entry.holders++;
  memory.set(key, entry);
  let held = true;
  return () => {
    if (!held) return false;
    held = false;
    if (--entry.holders > 0) return false;
    if (memory.get(key) === entry) memory.delete(key);
    cached.delete(key);
    return true;
  };
}

/** How many login keys this process keeps something for now (memory logins, cached files, own writes): for bounds tests. */
export function loginsKept(): { memory: number; cached: number; ownWrites: number } {
  return { memory: memory.size, cached: cached.size, ownWrites: ownWrites.size };
}

/** Why a login is written: a person's new login (other daemons start its upstream again), or tokens updated in use. */
export type LoginChange = 'login' | 'update';

/** One place logins live: the state folder's files, or the shared store. */
export interface LoginStore {
  read(key: string): Promise<StoredLogin | undefined>;
  write(key: string, login: StoredLogin, change: LoginChange): Promise<void>;
  /** False when there was no login. */
  delete(key: string): Promise<boolean>;
  /**
   * Runs `fn` as the only one changing this login's tokens (a refresh, a client-credentials
   * grant, a scope to remember): per process with files, across the cluster with the shared
   * store. `signal` aborts before the exclusivity could lapse (what `fn` asks for must end by then).
   */
  exclusive<T>(key: string, fn: (signal: AbortSignal) => Promise<T>, onWait?: () => void): Promise<T>;
  /** Calls `onChange(key)` when another process stores or removes a login. Returns the function that stops it. */
  watch(onChange: (key: string) => void, onError: (err: Error) => void): () => void;
  /** Where a login is kept, for what `mcpmux login` prints. */
  where(key: string): string;
  /**
   * A refreshed login `write` could not store (the shared store dropped between the grant and
   * the write): kept and used by this process, stored when it can be. Files have no such case.
   */
  keepUnsaved?(key: string, login: StoredLogin, replaced: string | undefined, err: unknown): void;
}

/** How long a refresh (its token request) may take with files: as long as ever. */
const FILE_REFRESH_MS = 30_000;

export const fileLogins: LoginStore = {
  read: async (key) => readFromFile(key),
  write: async (key, login) => writeToFile(key, login),
  delete: async (key) => deleteFile(key),
  // Across the processes of one state folder: a lock file beside the login (file-lock.ts). The
  // login is read from its file once held: what another process stored just now counts.
  exclusive: (key, fn, onWait) =>
    withFileLock(
      lockFile(key),
      FILE_REFRESH_MS,
      () => {
        cached.delete(key);
        return fn(AbortSignal.timeout(FILE_REFRESH_MS));
      },
      onWait,
    ),
  watch: watchFiles,
  where: (key) => loginFile(key),
};

let logins: LoginStore = fileLogins;

/** Where this process keeps logins from now on (the runtime and `mcpmux login` choose, from the config). */
export function useLoginStore(store: LoginStore): void {
  logins = store;
}

export function readLogin(key: string): Promise<StoredLogin | undefined> {
  if (inMemory(key)) return Promise.resolve(memory.get(key)?.login);
  return logins.read(key);
}

export function writeLogin(key: string, login: StoredLogin, change: LoginChange = 'update'): Promise<void> {
  if (inMemory(key)) {
    const entry = memory.get(key);
    if (entry) entry.login = login;
    return Promise.resolve();
  }
  return logins.write(key, login, change);
}

/**
 * Stores the login a refresh got. The grant spent the old refresh token, so a write that fails
 * must not lose the new one: where the store can, it keeps it (resolves false: not stored yet).
 */
export async function writeRefreshed(key: string, login: StoredLogin, replaced: string | undefined): Promise<boolean> {
  if (inMemory(key)) {
    await writeLogin(key, login);
    return true;
  }
  try {
    await logins.write(key, login, 'update');
    return true;
  } catch (err) {
    if (!logins.keepUnsaved) throw err;
    logins.keepUnsaved(key, login, replaced, err);
    return false;
  }
}

export function deleteLogin(key: string): Promise<boolean> {
  deleteChallenge(key);
  if (inMemory(key)) {
    const entry = memory.get(key);
    const had = entry?.login !== undefined;
    if (entry) entry.login = undefined;
    return Promise.resolve(had);
  }
  return logins.delete(key);
}

/** `onWait`: called once if another holds the login now (another process's refresh) and this one waits for it. */
export function exclusiveLogin<T>(key: string, fn: (signal: AbortSignal) => Promise<T>, onWait?: () => void): Promise<T> {
  if (inMemory(key)) {
    // One at a time in this process (no other process has these logins), bounded like a refresh with files.
    const entry = memory.get(key);
    if (!entry) return fn(AbortSignal.timeout(FILE_REFRESH_MS));
    const run = entry.queue.catch(() => {}).then(() => fn(AbortSignal.timeout(FILE_REFRESH_MS)));
    entry.queue = run.catch(() => {});
    return run;
  }
  return logins.exclusive(key, fn, onWait);
}

/**
 * Calls `onChange(key)` (a login key) when another process stores or removes a login (`mcpmux login`,
 * `mcpmux logout`): a running daemon picks a fresh login up without a restart. Returns the
 * function that stops watching.
 */
export function watchLogins(onChange: (key: string) => void, onError: (err: Error) => void): () => void {
  return logins.watch(onChange, onError);
}

export function loginWhere(key: string): string {
  return logins.where(key);
}
