// Start-up a host feels (issue 23): what `mcpmux stdio` loads before it can answer, and what
// the first tools/list after initialize holds when many upstreams start at once. Properties,
// not timings (the machine may be loaded).

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, expect, it } from 'vitest';
import { closeAll, MUX_BIN, ROOT, startRawMux, tempFile, writeConfig } from './helpers/harness.js';

afterEach(closeAll);

const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');
const PROBE = pathToFileURL(path.join(ROOT, 'test/fixtures/module-probe.mjs')).href;
const raw = (opts: object) => ({ command: process.execPath, args: [BAD, JSON.stringify(opts)] });

/** The package (or dist module) part of a loaded module's URL. */
const packageOf = (url: string): string | undefined => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1];

it('a plain stdio session never loads Redis, Prometheus, OAuth, JWT, WebSocket, tokenizer, search or tracing modules, nor jsonc-parser for a plain JSON config, nor execa when its upstream was spawned early', async () => {
  const out = tempFile('modules.txt');
  const config = await writeConfig({ mcpServers: { one: raw({ name: 'one', tools: 3 }) } });
  const peer = startRawMux({ command: process.execPath, args: ['--import', PROBE, MUX_BIN, 'stdio', '--config', config] }, { env: { MODULE_PROBE_OUT: out } });
  await peer.initialize();
  expect((await peer.request('tools/list')).result.tools.length).toBe(4);
  await peer.close(20_000);
  const urls = readFileSync(out, 'utf8').split('\n').filter(Boolean);
  // The probe saw mcpmux itself load: an empty list would pass anything.
  expect(urls.some((u) => u.endsWith('/dist/router/router.js'))).toBe(true);
  const packages = new Set(urls.map(packageOf).filter((p) => p !== undefined));
  // jsonc-parser: the config is plain JSON (JSON.parse reads it; jsonc.ts). execa: the one
  // upstream was spawned before the runtime loaded (prestart.ts; POSIX), so nothing needs it.
  const early = process.platform === 'win32' ? [] : ['execa'];
  for (const p of ['ioredis', 'prom-client', 'jose', 'oauth4webapi', 'ws', 'eventsource-parser', 'gpt-tokenizer', 'minisearch', 'jsonc-parser', ...early]) {
    expect(packages, `${p} loaded`).not.toContain(p);
  }
  expect([...packages].filter((p) => p.startsWith('@opentelemetry/'))).toEqual([]);
  const dist = urls.filter((u) => u.includes('/dist/')).map((u) => u.slice(u.indexOf('/dist/') + 6));
  for (const lazy of ['upstream/oauth/login.js', 'upstream/oauth/tokens.js', 'upstream/http.js', 'transport/http/guard.js', 'transport/http/admin.js', 'cli/tools.js', 'cli/check.js']) {
    expect(dist, `${lazy} loaded`).not.toContain(lazy);
  }
});

it('with 20 upstreams starting at once, some slow, the first tools/list after initialize holds every upstream ready by then', async () => {
  // 14 answer at once with 100 tools each; 6 never answer initialize (slow starters).
  const servers: Record<string, object> = {};
  for (let i = 0; i < 20; i++) servers[`s${String(i).padStart(2, '0')}`] = i % 10 < 7 ? raw({ tools: 100 }) : raw({ neverInit: true });
  const config = await writeConfig({ mcpServers: servers, timeouts: { startupMs: 120_000, startupWaitMs: 1500 }, surface: { mode: 'all' } });
  const peer = startRawMux(config);
  await peer.initialize();
  // Upstreams whose "upstream ready" line mcpmux wrote before we ask: ready before the list.
  const ready = new Set(
    peer
      .stderr()
      .split('\n')
      .filter((l) => l.includes('"msg":"upstream ready"'))
      .map((l) => JSON.parse(l).server as string),
  );
  const tools: { name: string }[] = [];
  let cursor: string | undefined;
  do {
    const { result } = await peer.request('tools/list', cursor === undefined ? {} : { cursor });
    tools.push(...result.tools);
    cursor = result.nextCursor;
  } while (cursor !== undefined);
  const listed = new Set(tools.map((t) => t.name.split('__')[0]));
  for (const s of ready) expect(listed, `${s} was ready before the list`).toContain(s);
  for (const s of listed) expect(ready.has(s) || Number(s.slice(1)) % 10 < 7, `${s} listed though it never answered`).toBe(true);
  // Every tool of each listed server, nothing cut short (101: tool_<i> and misbehave).
  for (const s of listed) expect(tools.filter((t) => t.name.startsWith(`${s}__`)).length).toBe(101);
});
