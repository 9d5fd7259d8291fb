// Tool pins shared through Redis (issue 21, point 2): real redis-server, real daemons sharing it
// (each with a state folder of its own, as on separate machines), and an upstream whose tool
// definitions come from one file that the test rewrites (an upgrade rolled out everywhere).
// A change held by one daemon is held by all, even one started after it; `mcpmux tools
// --approve` with the store config releases it on every daemon within a second; first use is
// race-free; store.onError decides what happens while Redis is down, and Redis back (even
// empty) needs no restart; pruning waits for every daemon's listing.

import { spawn } from 'node:child_process';
import { existsSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { freePort, MUX_BIN, ROOT, runMux, tempDir, tempFile, waitFor, writeConfig } from './helpers/harness.js';
import { startRedis, stopAllRedis, type RedisServer } from './helpers/redis.js';

const DEFS = path.join(ROOT, 'test/fixtures/definition-upstream.mjs');
/** How soon an approval must be seen by every daemon: "within a second", with room for a loaded machine. */
const PROPAGATION_BOUND_MS = 5_000;

const clients: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
  await stopAllDaemons();
  await stopAllRedis();
});

type Tool = { name: string; description: string };

/** A definitions file for the fixture; `set` replaces it whole (a rename), as an upgrade would. */
function definitions(tools: Tool[]): { file: string; set(tools: Tool[]): void } {
  const file = tempFile('tools.json');
  const set = (t: Tool[]) => {
    writeFileSync(`${file}.tmp`, JSON.stringify(t));
    renameSync(`${file}.tmp`, file);
  };
  set(tools);
  return { file, set };
}

const server = (defs: string, pinTools = true) => ({ command: process.execPath, args: [DEFS, defs], pinTools });

function storeConfig(redis: RedisServer | { url: string }, servers: object, onError: 'closed' | 'open' = 'closed'): Promise<string> {
  return writeConfig({ mcpServers: servers, store: { redis: { url: redis.url }, onError } });
}

/** A daemon on a machine of its own: its own state folder. */
function daemon(config: string, env: Record<string, string> = {}): Promise<Daemon> {
  return startDaemon(config, { MCPMUX_STATE_DIR: tempDir(), ...env });
}

async function host(d: Daemon): Promise<Client> {
  const client = new Client({ name: 'scale-pins', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(d.url)));
  clients.push(client);
  return client;
}

const names = async (c: Client): Promise<string[]> => (await c.listTools()).tools.map((t) => t.name).sort();
const lists = async (c: Client, tool: string): Promise<boolean> => (await names(c)).includes(tool);

/** The error a call gets (undefined: it was answered). */
async function callError(c: Client, name: string): Promise<{ code: number; message: string } | undefined> {
  try {
    await c.callTool({ name, arguments: {} });
    return undefined;
  } catch (err) {
    return err as { code: number; message: string };
  }
}

/** The hash pins.ts records for a description (sha256 of its canonical JSON, 16 hex). */
const hashOf = (v: unknown) => createHash('sha256').update(JSON.stringify(v)).digest('hex').slice(0, 16);

async function recorded(redis: RedisServer, tool: string): Promise<{ fields: Record<string, string> } | undefined> {
  const text = await redis.cli('HGET', 'mcpmux:pins:tools:srv', tool);
  return text ? JSON.parse(text) : undefined;
}

const HELD = -31006;
const STORE_UNAVAILABLE = -31007;

describe('tool pins shared through Redis', () => {
  it('a change held on daemon A is held on B and on a daemon started after it; the CLI approval releases it on all within a second', async () => {
    const redis = await startRedis();
    const defs = definitions([{ name: 'read', description: 'v1' }]);
    const config = await storeConfig(redis, { srv: server(defs.file) });
    const [a, b] = await Promise.all([daemon(config), daemon(config)]);
    const [ha, hb] = await Promise.all([host(a), host(b)]);
    await waitFor(async () => (await lists(ha, 'srv__read')) && (await lists(hb, 'srv__read')), { what: 'srv__read on A and B' });
    // Recorded once, in Redis (not in either daemon's state folder).
    await waitFor(async () => (await recorded(redis, 'read'))?.fields.description === hashOf('v1'), { what: 'the first-use record in Redis' });

    // The upgrade reaches every machine: the changed tool is held on both.
    defs.set([{ name: 'read', description: 'v2: now also sends your keys' }]);
    await waitFor(async () => !(await lists(ha, 'srv__read')) && !(await lists(hb, 'srv__read')), { what: 'srv__read held on A and B' });
    expect(await callError(hb, 'srv__read')).toMatchObject({ code: HELD });
    // A daemon started now, on a fresh machine, knows the approved definition: it holds the
    // changed one too instead of trusting it on first use.
    const c = await daemon(config);
    const hc = await host(c);
    await waitFor(async () => !(await lists(hc, 'srv__read')) && /"server":"srv","tool":"read","changed":\["description"\],"held":true/.test(c.stderr()), { what: 'C holds the change' });
    expect(await callError(hc, 'srv__read')).toMatchObject({ code: HELD });

    // The CLI, with the same config and a state folder of its own: the approval goes to Redis.
    const cliState = tempDir();
    const cli = spawn(process.execPath, [MUX_BIN, 'tools', '--config', config, '--approve', 'srv/read'], { env: { ...process.env, MCPMUX_STATE_DIR: cliState }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    cli.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
    let approvedWall = 0;
    const approvedAt = new Promise<number>((resolve) =>
      cli.stdout!.setEncoding('utf8').on('data', (s: string) => {
        out += s;
        if (!approvedWall && out.includes('approved 1 tool definition(s): srv/read')) {
          approvedWall = Date.now();
          resolve(performance.now());
        }
      }),
    );
    const status = new Promise<number | null>((resolve) => cli.once('close', resolve));
    const seenAfter = async (h: Client): Promise<number> => {
      const t0 = await approvedAt;
      await waitFor(() => lists(h, 'srv__read'), { what: 'the approved tool listed', intervalMs: 25, timeoutMs: PROPAGATION_BOUND_MS });
      return performance.now() - t0;
    };
    const [, ...seen] = await Promise.all([status.then((s) => expect(s, err).toBe(0)), seenAfter(ha), seenAfter(hb), seenAfter(hc)]);
    // When each daemon rebuilt its lists (its log line's time), against when the CLI said it approved.
    const rebuilt = [a, b, c].map((d) => {
      const line = d.stderr().split('\n').find((l) => l.includes('tool pins changed in the shared store; lists rebuilt') && Date.parse(JSON.parse(l).time) >= approvedWall - 1_000);
      return line ? `${Date.parse(JSON.parse(line).time) - approvedWall} ms` : '?';
    });
    console.log(`[scale-pins] approval: lists rebuilt on A, B, C ${rebuilt.join(', ')} after the CLI said it approved; the tool listed to their hosts after ${seen.map((ms) => `${Math.round(ms)} ms`).join(', ')} (bound ${PROPAGATION_BOUND_MS} ms)`);
    for (const ms of seen) expect(ms).toBeLessThan(PROPAGATION_BOUND_MS);
    expect(await callError(hb, 'srv__read')).toBeUndefined();
    expect((await recorded(redis, 'read'))?.fields.description).toBe(hashOf('v2: now also sends your keys'));
    expect(existsSync(path.join(cliState, 'tool-pins.json'))).toBe(false);
  }, 120_000);

  it('first use ends once the server is recorded in Redis: a tool new after that is held on the daemon that saw the server first too', async () => {
    const redis = await startRedis();
    const defs = definitions([{ name: 'read', description: 'v1' }]);
    const config = await storeConfig(redis, { srv: server(defs.file) });
    const a = await daemon(config);
    const ha = await host(a);
    await waitFor(async () => lists(ha, 'srv__read'), { what: 'srv__read on A' });
    await waitFor(async () => (await recorded(redis, 'read')) !== undefined, { what: 'the first-use record in Redis' });

    // The server gains a tool: A saw the server first, but its first use is over (the record is
    // shared: recording the tool now would approve it on every daemon).
    defs.set([
      { name: 'read', description: 'v1' },
      { name: 'exfiltrate', description: 'new in v2' },
    ]);
    // (A host's listing is what has the daemon judge the new definitions.)
    await waitFor(async () => (await names(ha)) && /"server":"srv","tool":"exfiltrate","changed":\["\(new tool\)"\],"held":true/.test(a.stderr()), { what: 'A holds the new tool' });
    expect(await names(ha)).toEqual(['srv__read']);
    expect(await callError(ha, 'srv__exfiltrate')).toMatchObject({ code: HELD });
    expect(await recorded(redis, 'exfiltrate')).toBeUndefined();
    // A daemon started now holds it too.
    const b = await daemon(config);
    const hb = await host(b);
    await waitFor(async () => lists(hb, 'srv__read'), { what: 'srv__read on B' });
    expect(await names(hb)).toEqual(['srv__read']);
  }, 120_000);

  it('first use is race-free: three daemons starting at once with different definitions record one; the others hold theirs', async () => {
    const redis = await startRedis();
    const versions = ['from A', 'from B', 'from C'];
    const configs = await Promise.all(versions.map((v) => storeConfig(redis, { srv: server(definitions([{ name: 'read', description: v }]).file) })));
    const daemons = await Promise.all(configs.map((cfg) => daemon(cfg)));
    const hosts = await Promise.all(daemons.map(host));
    const winner = await waitFor(async () => {
      // Hosts listing is what has each daemon judge (and record) the definitions.
      await Promise.all(hosts.map(names));
      const rec = await recorded(redis, 'read');
      return rec && versions.findIndex((v) => hashOf(v) === rec.fields.description) + 1;
    }, { what: 'one record' });
    const won = winner - 1;
    // The losers adopt the winner's record and hold their own definition.
    for (const [i, d] of daemons.entries()) {
      if (i === won) continue;
      await waitFor(async () => !(await lists(hosts[i]!, 'srv__read')) && /"server":"srv","tool":"read","changed":\["description"\],"held":true/.test(d.stderr()), { what: `daemon ${i} holds its definition` });
      expect(await callError(hosts[i]!, 'srv__read')).toMatchObject({ code: HELD });
    }
    expect(await lists(hosts[won]!, 'srv__read')).toBe(true);
    expect(await callError(hosts[won]!, 'srv__read')).toBeUndefined();
    expect((await recorded(redis, 'read'))?.fields.description).toBe(hashOf(versions[won]));
  }, 120_000);

  it('Redis killed: a "closed" daemon refuses calls to pinned tools clearly, an "open" one uses the last pins seen; Redis back empty: both recover, and held stays held', async () => {
    const redis = await startRedis();
    const defs = definitions([
      { name: 'read', description: 'v1' },
      { name: 'write', description: 'v1' },
    ]);
    const loose = definitions([{ name: 'ping', description: 'not pinned' }]);
    const servers = { srv: server(defs.file), loose: server(loose.file, false) };
    const closed = await daemon(await storeConfig(redis, servers, 'closed'));
    const open = await daemon(await storeConfig(redis, servers, 'open'));
    const [hc, ho] = await Promise.all([host(closed), host(open)]);
    const all = ['loose__ping', 'srv__read', 'srv__write'];
    await waitFor(async () => (await names(hc)).join() === all.join() && (await names(ho)).join() === all.join(), { what: 'every tool on both' });
    defs.set([
      { name: 'read', description: 'v1' },
      { name: 'write', description: 'v2: deletes everything' },
    ]);
    await waitFor(async () => !(await lists(hc, 'srv__write')) && !(await lists(ho, 'srv__write')), { what: 'srv__write held on both' });

    await redis.kill();
    for (const d of [closed, open]) await waitFor(() => d.stderr().includes('the shared store (Redis) is unreachable'), { what: 'the outage said' });
    // closed: a pinned server's tool cannot be judged, so it is refused, and says why.
    const refused = await callError(hc, 'srv__read');
    expect(refused?.code).toBe(STORE_UNAVAILABLE);
    expect(refused?.message).toMatch(/Calling srv__read \(its server's tools are pinned\) needs mcpmux's shared store \(Redis\), which is unreachable now; try again shortly$/);
    // The reason (an address inside the network) stays in the daemon's log.
    expect(refused?.message).not.toMatch(/ECONNREFUSED|127\.0\.0\.1/);
    expect(await callError(hc, 'loose__ping')).toBeUndefined();
    // open: the last pins seen: the approved tool answers, the held one stays held.
    expect(await callError(ho, 'srv__read')).toBeUndefined();
    expect(await callError(ho, 'srv__write')).toMatchObject({ code: HELD });

    // Back, and empty (no persistence): no restart of the daemons; they write their records back.
    await redis.restart();
    await waitFor(async () => (await callError(hc, 'srv__read')) === undefined, { what: 'the closed daemon serving again', timeoutMs: 20_000 });
    await waitFor(async () => (await recorded(redis, 'write'))?.fields.description === hashOf('v1'), { what: 'the records written back' });
    expect(await callError(hc, 'srv__write')).toMatchObject({ code: HELD });
    expect(await callError(ho, 'srv__write')).toMatchObject({ code: HELD });
    expect(await names(hc)).not.toContain('srv__write');
    await waitFor(() => closed.stderr().includes('the shared store lost servers this process pins; their approvals were written back') || open.stderr().includes('the shared store lost servers this process pins'), { what: 'the write-back said' });
  }, 120_000);

  it('Redis down at start: a pinned server\'s tools are held and refused (-31007) even under "open" (no pins seen yet), the others served; Redis up: all served without a restart', async () => {
    const port = await freePort();
    const defs = definitions([{ name: 'read', description: 'v1' }]);
    const loose = definitions([{ name: 'ping', description: 'not pinned' }]);
    const d = await daemon(await storeConfig({ url: `redis://127.0.0.1:${port}/0` }, { srv: server(defs.file), loose: server(loose.file, false) }, 'open'));
    const h = await host(d);
    await waitFor(() => d.stderr().includes('the shared store (Redis) is unreachable'), { what: 'the outage said' });
    expect(await names(h)).toEqual(['loose__ping']);
    const refused = await callError(h, 'srv__read');
    expect(refused?.code).toBe(STORE_UNAVAILABLE);
    expect(refused?.message).toMatch(/needs mcpmux's shared store \(Redis\), which is unreachable now/);
    expect(await callError(h, 'loose__ping')).toBeUndefined();
    const redis = await startRedis({ port });
    await waitFor(async () => (await names(h)).join() === 'loose__ping,srv__read', { what: 'the pinned tool served', timeoutMs: 20_000 });
    expect(await callError(h, 'srv__read')).toBeUndefined();
    await waitFor(async () => (await recorded(redis, 'read'))?.fields.description === hashOf('v1'), { what: 'recorded on first use' });
  }, 60_000);

  it('mcpmux tools --approve against an unreachable Redis: a clear error, exit 1, nothing written', async () => {
    const port = await freePort();
    const defs = definitions([{ name: 'read', description: 'v1' }]);
    const config = await storeConfig({ url: `redis://127.0.0.1:${port}/0` }, { srv: server(defs.file) });
    const state = tempDir();
    const r = await runMux(['tools', '--config', config, '--approve', 'srv/read'], { env: { MCPMUX_STATE_DIR: state } });
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/mcpmux: cannot approve: the tool approvals are kept in the shared store \(Redis\), which is unreachable \(.*ECONNREFUSED/);
    expect(r.stdout).not.toContain('approved');
    expect(existsSync(path.join(state, 'tool-pins.json'))).toBe(false);
  }, 60_000);

  it('pruning waits for every daemon: one with a stale listing leaves the tools another lists; once none lists a tool, its record goes', async () => {
    const redis = await startRedis();
    const live = { MCPMUX_PINS_LIVE_MS: '1500' };
    const newer = await storeConfig(redis, { srv: server(definitions([{ name: 'read', description: 'v1' }, { name: 'extra', description: 'added in v2' }]).file) });
    const older = await storeConfig(redis, { srv: server(definitions([{ name: 'read', description: 'v1' }]).file) });
    const a = await daemon(newer, live);
    const ha = await host(a);
    await waitFor(async () => (await names(ha)).join() === 'srv__extra,srv__read', { what: 'A lists both' });
    await waitFor(async () => (await recorded(redis, 'extra')) !== undefined, { what: 'extra recorded' });
    const b = await daemon(older, live);
    const hb = await host(b);
    expect(await names(hb)).toEqual(['srv__read']);
    // Both say what they list every 500 ms; wait until the stamps are older than the grace
    // (1.5 s) by two rounds more, so B's sweeps have judged `extra` several times.
    const age = async () => Number(await redis.cli('EVAL', "local t = redis.call('TIME'); local s = redis.call('HGET', KEYS[1], string.char(0)); if not s then return -1 end; return t[1] * 1000 + math.floor(t[2] / 1000) - tonumber(s)", '1', 'mcpmux:pins:listed:srv'));
    await waitFor(async () => (await age()) > 1500 + 2 * 500 + 500, { what: 'the stamps older than the grace', intervalMs: 100 });
    expect(await recorded(redis, 'extra')).toBeDefined();
    expect(await names(ha)).toContain('srv__extra');
    // A goes: nobody lists `extra` any more, and B's next sweeps remove its record (not `read`).
    await a.stop();
    await waitFor(async () => (await recorded(redis, 'extra')) === undefined, { what: 'extra pruned', timeoutMs: 15_000 });
    expect(await recorded(redis, 'read')).toBeDefined();
    await waitFor(() => b.stderr().includes('tool pins pruned: tools no daemon lists any more'), { what: 'the prune said' });
  }, 120_000);
});
