// Login keys and where per-client logins live (upstream/oauth/store.ts): a client name from a
// token or an OIDC claim (`oidc:<anything>`) becomes one safe folder name of its own, never a
// path out of the state folder, and two names never share a folder (letter case included).
// Real files in a temporary state folder, and the real watcher.

import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeClient, holdLogin, loginCommandOfKey, loginFile, loginKey, readLogin, serverOfKey, watchLogins, writeLogin, type StoredLogin } from '../src/upstream/oauth/store.js';
import { waitFor } from './helpers/harness.js';

let state: string;
const before = process.env.MCPMUX_STATE_DIR;
beforeAll(() => {
  state = mkdtempSync(path.join(os.tmpdir(), 'mcpmux-keys-'));
  process.env.MCPMUX_STATE_DIR = state;
});
afterAll(() => {
  if (before === undefined) delete process.env.MCPMUX_STATE_DIR;
  else process.env.MCPMUX_STATE_DIR = before;
  rmSync(state, { recursive: true, force: true });
});

const login = (token: string): StoredLogin => ({
  server: 'https://mcp.example/mcp',
  resource: 'https://mcp.example/mcp',
  as: { issuer: 'https://as.example', token_endpoint: 'https://as.example/token' },
  client: { client_id: 'c' },
  tokens: { access_token: token },
});

describe('per-client login keys', () => {
  it('keep the plain key for the server (and the anonymous client), and a folder per client otherwise', () => {
    expect(loginKey('gh')).toBe('gh');
    expect(loginKey('gh', 'anonymous')).toBe('gh');
    expect(loginKey('gh', 'ci')).toBe('gh@ci');
    expect(serverOfKey('gh@ci')).toBe('gh');
    expect(loginFile('gh')).toBe(path.join(state, 'oauth', 'gh.json'));
    expect(loginFile(loginKey('gh', 'ci'))).toBe(path.join(state, 'oauth', 'clients', 'ci', 'gh.json'));
  });

  it('encode any client name to one safe folder name: no separators, no dot folders, case kept apart, long names hashed', () => {
    const names = ['ci', 'CI', 'Ci', 'oidc:alice@example.com', '../../etc', '..', '.', 'a/b', 'a\\b', 'é', 'x'.repeat(500), 'x'.repeat(501)];
    const folders = names.map(encodeClient);
    expect(new Set(folders).size).toBe(names.length);
    for (const f of folders) {
      expect(f).toMatch(/^(~[0-9a-f]{64}|([a-z0-9_-]|%[0-9A-F]{2}){1,120})$/);
      expect(path.dirname(loginFile(`gh@${f}`))).toBe(path.join(state, 'oauth', 'clients', f));
    }
    expect(encodeClient('oidc:alice@example.com')).toBe('oidc%3Aalice%40example%2Ecom');
    expect(encodeClient('..')).toBe('%2E%2E');
    // What a person is told to run names the client as it is.
    expect(loginCommandOfKey(loginKey('gh', 'oidc:alice@example.com'))).toBe('mcpmux login gh --client oidc:alice@example.com');
    expect(loginCommandOfKey(loginKey('gh', 'CI'))).toBe('mcpmux login gh --client CI');
    expect(loginCommandOfKey('gh')).toBe('mcpmux login gh');
  });

  it('store each client apart (0600 files in 0700 folders), and the watcher reports the login key of a file another process writes', async () => {
    const heard: string[] = [];
    const stop = watchLogins((key) => heard.push(key), (err) => heard.push(`error: ${err.message}`));
    try {
      await writeLogin(loginKey('gh', 'ci'), login('t-ci'));
      await writeLogin(loginKey('gh', 'oidc:bob'), login('t-bob'));
      expect((await readLogin(loginKey('gh', 'ci')))?.tokens?.access_token).toBe('t-ci');
      expect((await readLogin(loginKey('gh', 'oidc:bob')))?.tokens?.access_token).toBe('t-bob');
      expect(await readLogin('gh')).toBeUndefined();
      const file = loginFile(loginKey('gh', 'oidc:bob'));
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
      // Another process (mcpmux login --client ops) makes a new client folder and its login.
      const { writePrivate } = await import('../src/files.js');
      writePrivate(loginFile(loginKey('gh', 'ops')), JSON.stringify(login('t-ops')));
      writePrivate(loginFile(loginKey('gh', 'oidc:Carol')), JSON.stringify(login('t-carol')));
      await waitFor(() => heard.includes('gh@ops'), { what: 'the watcher reporting gh@ops' });
      await waitFor(() => heard.includes(loginKey('gh', 'oidc:Carol')), { what: 'the watcher reporting an OIDC client\'s login' });
      expect((await readLogin(loginKey('gh', 'ops')))?.tokens?.access_token).toBe('t-ops');
      // This process's own writes are no news (a refresh must not restart its upstream).
      expect(heard.filter((k) => k === 'gh@ci' || k.startsWith('error'))).toEqual([]);
    } finally {
      stop();
    }
  });

  it("a write of ours stays ours after the key's last connection went: a refused refresh stores the login without tokens, then its connection closes, before the watcher looks", async () => {
    const heard: string[] = [];
    const stop = watchLogins((key) => heard.push(key), (err) => heard.push(`error: ${err.message}`));
    try {
      const key = loginKey('gl', 'ci');
      const release = holdLogin(key);
      await writeLogin(key, login('t-before'));
      await writeLogin(key, { ...login('t-before'), tokens: undefined });
      expect(release()).toBe(true); // the last connection of the key, gone at once
      // Another process's login after ours: the watcher has looked at our file by the time it reports this one.
      const { writePrivate } = await import('../src/files.js');
      writePrivate(loginFile(loginKey('gl', 'ops')), JSON.stringify(login('t-ops')));
      await waitFor(() => heard.includes('gl@ops'), { what: 'the watcher reporting gl@ops' });
      expect(heard.filter((k) => k === key || k.startsWith('error'))).toEqual([]);
    } finally {
      stop();
    }
  });
});
