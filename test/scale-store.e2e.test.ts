// The shared store's own behaviour: the `store` and `cluster` keys refused with a clear error
// when they cannot work, `check --probe` reporting a store it cannot reach, and a daemon whose
// Redis is down at start: it starts, says so once (log and /readyz), and recovers when Redis
// comes up, without a restart; and a Redis that hangs (SIGSTOP) counts as down within seconds
// and as up again once it answers.

import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.js';
import { ConfigError } from '../src/config/types.js';
import { SharedStore } from '../src/store/store.js';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { fixture, freePort, runMux, waitFor, WAIT_MS, writeConfig } from './helpers/harness.js';
import { startRedis, stopAllRedis } from './helpers/redis.js';

afterAll(async () => {
  await stopAllDaemons();
  await stopAllRedis();
});

const SECRET = 'k'.repeat(40);
const servers = { mcpServers: { a: { command: 'x' } } };

function issues(config: object, env: NodeJS.ProcessEnv = {}): string[] {
  try {
    parseConfig(JSON.stringify(config), '/etc/mcpmux.json', env);
    return [];
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.issues.map((i) => `${i.path}: ${i.message}`);
  }
}

describe('store and cluster keys', () => {
  it('accepts a store and a cluster, with defaults, and treats both secrets as secrets', () => {
    const c = parseConfig(
      JSON.stringify({ ...servers, store: { redis: { url: 'redis://:pw-in-url-123@127.0.0.1:6390/2' }, secretEnv: 'STORE_KEY' }, cluster: { advertiseUrl: 'http://127.0.0.1:7330/', secretEnv: 'CLUSTER_KEY' } }),
      '/etc/mcpmux.json',
      { STORE_KEY: SECRET, CLUSTER_KEY: 'c'.repeat(64) },
    );
    expect(c.store).toEqual({ redis: { url: 'redis://:pw-in-url-123@127.0.0.1:6390/2', keyPrefix: 'mcpmux:' }, onError: 'closed', secretEnv: 'STORE_KEY', secret: SECRET });
    expect(c.cluster).toEqual({ advertiseUrl: 'http://127.0.0.1:7330', secretEnv: 'CLUSTER_KEY', secret: 'c'.repeat(64), drainMs: 10_000 });
    expect(c.secrets).toEqual(expect.arrayContaining([SECRET, 'c'.repeat(64), 'pw-in-url-123']));
    // Without them, nothing is shared.
    const plain = parseConfig(JSON.stringify(servers), '/etc/mcpmux.json', {});
    expect(plain.store).toBeUndefined();
    expect(plain.cluster).toBeUndefined();
  });

  it.each([
    [{ store: { redis: { url: 'http://127.0.0.1:6379' } } }, '/store/redis/url: must start with redis:// or rediss:// (TLS), not http://'],
    [{ store: { redis: { url: 'not a url' } } }, '/store/redis/url: is not a URL (redis://host:port/db or rediss:// for TLS)'],
    [{ store: { redis: { url: 'redis://127.0.0.1:6379/zero' } } }, '/store/redis/url: the path must be a database number (/0 to /15)'],
    [{ store: { redis: {} } }, '/store/redis/url: missing required key "url"'],
    [{ store: { redis: { url: 'redis://h' }, onError: 'maybe' } }, '/store/onError'],
    [{ store: { redis: { url: 'redis://h' }, secretEnv: 'NOT_SET' } }, '/store/secretEnv: environment variable NOT_SET is not set'],
    [{ store: { redis: { url: 'redis://h' }, secretEnv: 'SHORT' } }, '/store/secretEnv: environment variable SHORT holds 5 characters; use at least 32 (e.g. openssl rand -hex 32)'],
    [{ store: { redis: { url: 'redis://h' }, extra: 1 } }, '/store'],
    [{ cluster: { advertiseUrl: 'http://127.0.0.1:1', secretEnv: 'LONG' } }, '/cluster: needs store: the daemons of a cluster share their state, and find each other, in Redis'],
    [{ store: { redis: { url: 'redis://h' } }, cluster: { advertiseUrl: 'ftp://h', secretEnv: 'LONG' } }, '/cluster/advertiseUrl: must be an http:// or https:// URL, not ftp://'],
    [{ store: { redis: { url: 'redis://h' } }, cluster: { advertiseUrl: 'http://h:1/mcp', secretEnv: 'LONG' } }, '/cluster/advertiseUrl: must be the base URL of the main listener only (scheme, host and port), with no path, query or credentials'],
    [{ store: { redis: { url: 'redis://h' } }, cluster: { advertiseUrl: 'http://h:1' } }, '/cluster/secretEnv: missing required key "secretEnv"'],
    [{ store: { redis: { url: 'redis://h' } }, cluster: { advertiseUrl: 'http://h:1', secretEnv: 'UNSET' } }, '/cluster/secretEnv: environment variable UNSET is not set'],
  ])('refuses %j', (extra, want) => {
    const got = issues({ ...servers, ...extra }, { SHORT: 'abcde', LONG: SECRET });
    expect(got.some((i) => i.startsWith(want)), got.join('\n')).toBe(true);
  });

  it('never echoes a password from the store URL in an error', () => {
    const got = issues({ ...servers, store: { redis: { url: 'http://user:hunter2-secret@h:1' } } });
    expect(got.length).toBeGreaterThan(0);
    expect(got.join('\n')).not.toContain('hunter2');
  });
});

describe('a store that cannot be reached', () => {
  it('check --probe says so (exit 1) and never prints the URL; a reachable one passes', async () => {
    const down = await freePort();
    const config = await writeConfig({ mcpServers: { a: fixture() }, store: { redis: { url: `redis://:pw-secret-xyz@127.0.0.1:${down}/0` } } });
    const r = await runMux(['check', '--probe', '--config', config]);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/store: Redis unreachable: .*ECONNREFUSED/);
    expect(r.stdout + r.stderr).not.toContain('pw-secret-xyz');

    const redis = await startRedis();
    const ok = await writeConfig({ mcpServers: { a: fixture() }, store: { redis: { url: redis.url } } });
    const r2 = await runMux(['check', '--probe', '--config', ok]);
    expect(r2.stdout).toContain('store: Redis reachable');
    expect(r2.status).toBe(0);
  });

  it('a daemon whose Redis is down at start starts, says so once, and recovers when Redis comes up', async () => {
    const port = await freePort();
    const d = await startDaemon({ mcpServers: { a: fixture() }, store: { redis: { url: `redis://127.0.0.1:${port}/0` } } });
    const readyz = async () => (await fetch(`${d.base}/readyz`)).json() as Promise<{ status: string; detail: { store: string } }>;
    // Ready once the upstreams are, store or no store: every daemon shares the store, so a
    // balancer must not take them all out for it.
    const res = await waitFor(async () => {
      const r = await fetch(`${d.base}/readyz`);
      return r.status === 200 ? r : undefined;
    }, { what: 'readyz 200' });
    expect(await res.json()).toMatchObject({ status: 'degraded', detail: { store: 'down' } });
    // Reconnect attempts do not fill the log: one line for the outage.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(d.stderr().match(/the shared store \(Redis\) is unreachable/g)).toHaveLength(1);
    expect(await (await fetch(`${d.base}/metrics`)).text()).toMatch(/^mcpmux_store_up 0$/m);

    await startRedis({ port });
    await waitFor(async () => (await readyz()).detail.store === 'up', { what: 'store up in /readyz' });
    expect((await readyz()).status).toBe('ready');
    await waitFor(() => d.stderr().includes('the shared store (Redis) is reachable again'), { what: 'the store said reachable again in the log' });
    expect(await (await fetch(`${d.base}/metrics`)).text()).toMatch(/^mcpmux_store_up 1$/m);
    expect((await d.stop()).code).toBe(0);
  });

  it('a Redis that hangs (SIGSTOP) is down in /readyz within seconds, and up again once it answers (SIGCONT)', async () => {
    const redis = await startRedis();
    const d = await startDaemon({ mcpServers: { a: fixture() }, store: { redis: { url: redis.url } } });
    const readyz = async () => ((await (await fetch(`${d.base}/readyz`)).json()) as { detail: { store: string } }).detail.store;
    await waitFor(async () => (await readyz()) === 'up', { what: 'store up' });
    const pid = redis.child.pid!;
    const stoppedAt = Date.now();
    process.kill(pid, 'SIGSTOP');
    try {
      // The connection stays open (nothing closes it): only the watchdog's unanswered PING tells.
      await waitFor(async () => (await readyz()) === 'down', { what: 'store down in /readyz', timeoutMs: 10_000 });
      const downAfter = Date.now() - stoppedAt;
      console.log(`[scale-store] a hung Redis seen down after ${downAfter} ms`);
      expect(downAfter).toBeLessThan(10_000);
      // The log line and /readyz's answer travel apart (stderr, HTTP): either may come first.
      await waitFor(() => /the shared store \(Redis\) is unreachable/.test(d.stderr()), { what: 'the store said unreachable in the log' });
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const contAt = Date.now();
    await waitFor(async () => (await readyz()) === 'up', { what: 'store up again', timeoutMs: 15_000 });
    console.log(`[scale-store] up again ${Date.now() - contAt} ms after SIGCONT`);
    await waitFor(() => d.stderr().includes('the shared store (Redis) is reachable again'), { what: 'the store said reachable again in the log' });
    expect((await d.stop()).code).toBe(0);
  }, 60_000);
});

/** A SharedStore in this process, its log lines collected. */
function inProcess(url: string): { store: SharedStore; lines: () => any[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  const store = new SharedStore({ redis: { url, keyPrefix: 'unit:' }, onError: 'closed' }, pino({ level: 'debug' }, sink));
  return { store, lines: () => lines.map((l) => JSON.parse(l)) };
}

describe('the store in this process', () => {
  it('a handler or a health listener that throws is logged, never crashes; the subscriber coming back is announced (onSubscribed)', async () => {
    const redis = await startRedis();
    const { store, lines } = inProcess(redis.url);
    try {
      store.onHealth(() => {
        throw new Error('listener bug');
      });
      expect(await store.ready(WAIT_MS)).toBe('up');
      const got: string[] = [];
      store.subscribe('ch', () => {
        throw new Error('handler bug');
      });
      store.subscribe('ch', (m) => got.push(m));
      let subscribed = 0;
      store.onSubscribed(() => subscribed++);
      await waitFor(() => subscribed >= 1, { what: 'first subscribe' });
      await waitFor(async () => (await store.publish('ch', 'one'), got.includes('one')), { what: 'a message despite a throwing handler' });
      // The subscriber connection alone is cut (the command connection stays up): it comes back and says so.
      const before = subscribed;
      await redis.cli('CLIENT', 'KILL', 'TYPE', 'pubsub');
      await waitFor(() => subscribed > before, { what: 'resubscribed' });
      await waitFor(async () => (await store.publish('ch', 'two'), got.includes('two')), { what: 'messages after it' });
      expect(lines().some((l) => l.msg === 'a store health listener threw; ignored')).toBe(true);
      expect(lines().some((l) => /a message on unit:ch threw; ignored/.test(l.msg))).toBe(true);
    } finally {
      await store.close();
    }
  }, 60_000);

  it('a refusal by Redis (WRONGTYPE) is named as such, at warn once; an outage says "unreachable" with no address', async () => {
    const redis = await startRedis();
    const { store, lines } = inProcess(redis.url);
    try {
      expect(await store.ready(WAIT_MS)).toBe('up');
      await redis.cli('SET', 'unit:str', 'x');
      const err = await store.redis.hget('str', 'f').then(() => undefined, (e: Error) => e);
      const a = store.failed('reading str', err);
      const b = store.failed('reading str', err);
      expect(a.code).toBe(-31007);
      expect(a.message).toBe("reading str failed: mcpmux's shared store (Redis) refused it (WRONGTYPE); the daemon's log says why");
      expect(b.message).toBe(a.message);
      const warned = lines().filter((l) => l.level === 40 && /refused a command/.test(l.msg));
      expect(warned).toHaveLength(1);
      expect(warned[0].err).toMatch(/^WRONGTYPE/);
      expect(store.health).toBe('up');

      await redis.kill();
      await waitFor(() => store.health === 'down', { what: 'down' });
      const down = await store.redis.get('k').then(() => undefined, (e: Error) => e);
      const c = store.failed('reading k', down);
      expect(c.message).toBe("reading k needs mcpmux's shared store (Redis), which is unreachable now; try again shortly");
      expect(store.reason).toBeDefined();
    } finally {
      await store.close();
    }
  }, 60_000);
});
