// Review fix of issue 22: what a daemon keeps per person for the grants that act for the host
// (token_exchange here) is bounded by the people connected now, not by everyone who ever
// signed in. Real OAuthTokens and the real Streamable HTTP upstream transport against the
// loopback authorization server and MCP server of test/fixtures/grants-as.mjs.

import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RemoteServerConfig } from '../src/config/types.js';
import { addRuntimeSecrets, createLogger, removeRuntimeSecrets, scrubbedValueCount } from '../src/observe/logger.js';
import { StreamableHttpTransport } from '../src/upstream/http.js';
import { loginsKept } from '../src/upstream/oauth/store.js';
import { OAuthTokens } from '../src/upstream/oauth/tokens.js';
import { awaitJsonLine, ROOT, tempDir } from './helpers/harness.js';

const GRANTS = path.join(ROOT, 'test/fixtures/grants-as.mjs');

let child: ChildProcess;
let fx: { url: string };
let state = '';

beforeAll(async () => {
  child = spawn(process.execPath, [GRANTS, JSON.stringify({})], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  fx = await awaitJsonLine(child.stdout!, exited, (j) => (j.url ? j : undefined), { ms: 15_000, what: 'grants-as URL', log: () => err });
  state = tempDir();
  process.env.MCPMUX_STATE_DIR = state;
});

afterAll(() => {
  child?.kill('SIGKILL');
});

/** Every file under the state folder's oauth/ (none should hold a person's exchanged token). */
function oauthFiles(dir = path.join(state, 'oauth')): string[] {
  let names: string[];
  try {
    names = readdirSync(dir, { withFileTypes: true }).map((d) => (d.isDirectory() ? `${d.name}/` : d.name));
  } catch {
    return [];
  }
  return names.flatMap((n) => (n.endsWith('/') ? [n, ...oauthFiles(path.join(dir, n)).map((c) => `${n}${c}`)] : [n]));
}

const stats = async () => (await (await fetch(`${fx.url}/admin/stats`)).json()) as { tokens: Array<{ kind: string; ok: boolean; sub?: string }> };
const sign = async (sub: string): Promise<string> => ((await (await fetch(`${fx.url}/admin/sign`, { method: 'POST', body: JSON.stringify({ sub, aud: 'mcpmux' }) })).json()) as { jwt: string }).jwt;
const server = (name: string) =>
  ({ name, transport: 'http', url: `${fx.url}/mcp/${name}`, headers: {}, oauth: { grant: 'token_exchange', clientId: 'mux', clientSecret: 'mux-secret', audience: 'mcp-audience', tokenEndpoint: `${fx.url}/token` } }) as unknown as RemoteServerConfig;

describe('log scrubber: runtime-secret sources come and go', () => {
  it('10 000 sources added then removed: the values each line is searched for go back to where they were; a source keeps only its latest values', () => {
    const log = createLogger('silent', ['a-config-secret-value']);
    const base = scrubbedValueCount(log);
    expect(base).toBe(1);
    for (let i = 0; i < 10_000; i++) addRuntimeSecrets(log, `oauth-subject:s@oidc%3Au${i}`, [`subject-token-${i}-0123456789`]);
    expect(scrubbedValueCount(log)).toBe(base + 10_000);
    // One source given ten values in turn keeps only its newest four.
    for (let v = 0; v < 10; v++) addRuntimeSecrets(log, 'oauth:s@oidc%3Au0', [`access-token-${v}-0123456789`]);
    expect(scrubbedValueCount(log)).toBe(base + 10_004);
    for (let i = 0; i < 10_000; i++) removeRuntimeSecrets(log, `oauth-subject:s@oidc%3Au${i}`);
    removeRuntimeSecrets(log, 'oauth:s@oidc%3Au0');
    expect(scrubbedValueCount(log)).toBe(base);
  });
});

describe('tokens of a grant acting for the host: in memory only, per login key, gone with its last connection', () => {
  it('exchanged for three people: no file anywhere; shared by two connections of one key; released with the last; then asked again', async () => {
    const log = createLogger('warn');
    const base = scrubbedValueCount(log);
    const people = ['u0', 'u1', 'u2'];
    const subjects = await Promise.all(people.map(sign));
    const before = (await stats()).tokens.length;
    const conns = people.map((p, i) => new OAuthTokens(server('tx'), log, { client: `oidc:${p}`, subject: () => subjects[i] }));
    const bearers = await Promise.all(conns.map((t) => t.header()));
    for (const b of bearers) expect(b).toMatch(/^Bearer at-/);
    expect((await stats()).tokens.slice(before).map((x) => `${x.kind}:${x.ok}`)).toEqual(['token_exchange:true', 'token_exchange:true', 'token_exchange:true']);
    // Nothing per person on disk: no token file, no client folder, no lock, no challenge.
    expect(oauthFiles()).toEqual([]);
    expect(loginsKept().memory).toBe(3);
    // Each person's subject and exchanged token are scrubbed while connected.
    expect(scrubbedValueCount(log)).toBe(base + 6);

    // A second connection of u0 uses the token the first got (one key, one login).
    const again = new OAuthTokens(server('tx'), log, { client: 'oidc:u0', subject: () => subjects[0] });
    expect(await again.header()).toBe(bearers[0]);
    expect((await stats()).tokens.length).toBe(before + 3);
    conns[0]!.release();
    expect(loginsKept().memory).toBe(3);
    again.release();
    conns[1]!.release();
    conns[2]!.release();
    expect(loginsKept()).toEqual({ memory: 0, cached: 0, ownWrites: 0 });
    expect(scrubbedValueCount(log)).toBe(base);

    // u0 connects again: its token was dropped, a new exchange gets one.
    const back = new OAuthTokens(server('tx'), log, { client: 'oidc:u0', subject: () => subjects[0] });
    expect(await back.header()).toMatch(/^Bearer at-/);
    expect((await stats()).tokens.length).toBe(before + 4);
    back.release();
    expect(oauthFiles()).toEqual([]);
  });

  it('the upstream transport releases its login when it closes', async () => {
    const log = createLogger('warn');
    const base = scrubbedValueCount(log);
    const subject = await sign('u9');
    const auth = new OAuthTokens(server('tx'), log, { client: 'oidc:u9', subject: () => subject });
    const t = new StreamableHttpTransport(`${fx.url}/mcp/tx`, {}, 1 << 20, log, { auth });
    const answered = new Promise<unknown>((resolve) => (t.onmessage = (v) => resolve(v)));
    t.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '0' } } } as never);
    expect(await answered).toMatchObject({ id: 1, result: {} });
    expect(loginsKept().memory).toBe(1);
    expect(scrubbedValueCount(log)).toBe(base + 2);
    await t.close(100);
    expect(loginsKept()).toEqual({ memory: 0, cached: 0, ownWrites: 0 });
    expect(scrubbedValueCount(log)).toBe(base);
    expect(oauthFiles()).toEqual([]);
  });
});
