#!/usr/bin/env node
// mcpmux benchmark: a direct connection to an SDK-based echo upstream beside the same upstream
// behind mcpmux, in one run, for stdio -> stdio, HTTP -> stdio and WebSocket -> stdio.
// See bench/README.md for what each row means. Plain JS, no build step (but `npm run bench`
// builds mcpmux first: bin/mcpmux.js runs dist/).
//
//   node bench/run.mjs [--quick] [--rounds N] [--duration S] [--calls N] [--warmup N]
//                      [--inflight N] [--only stdio|http|ws[,..]] [--no-20x100] [--no-relay]
//                      [--profile | --no-profile] [--http-mode json|sse] [--max-minutes M]
//                      [--no-governance] [--no-surface] [--no-shared-limits] [--no-interleaved]

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { echoCall, echoTool, errText, sdkCall, sequential, throughput } from './lib/calls.mjs';
import { HttpLight, WsLight } from './lib/light-client.mjs';
import { readOptions, sizeDefaults } from './lib/options.mjs';
import { closeSdk, connectSdk } from './lib/sdk-client.mjs';
import { echoServerOf, echoServersOf, installCleanup, memory, resetPeak, spawnTracked, stopTracked } from './lib/procs.mjs';
import { governedConfig, startScraper } from './lib/governed.mjs';
import { openStdioLight, openStdioSdk } from './lib/stdio-session.mjs';
import { fmt, fmtSpread, latencySummary, median, spread } from './lib/stats.mjs';
import { echoServersConfig } from './lib/upstreams.mjs';
import { analyse, topTable } from './profile-top.mjs';
import { fetchCorpus } from './surface/fetch-corpus.mjs';
import { renderRecall, runRecall } from './surface/recall.mjs';
import { renderTokenSurface, runTokenSurface } from './surface/token-surface.mjs';
import { measureSharedLimits, renderSharedLimits } from './shared-limits.mjs';
import { measureStartup, renderStartup } from './startup.mjs';
import { measureLists, renderLists } from './lists.mjs';
import { INTERLEAVED_TITLE, measureInterleaved, renderInterleaved } from './interleaved.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ECHO = join(ROOT, 'bench', 'echo-server.mjs');
const MCPMUX = join(ROOT, 'bin', 'mcpmux.js');
const RELAY = join(ROOT, 'bench', 'relay.mjs');
let RESULTS = join(ROOT, 'bench', 'results');
const NODE = process.execPath;

// ---- options ----------------------------------------------------------------------------------

function parseOptions(argv) {
  const o = {
    quick: false,
    rounds: undefined,
    duration: undefined,
    calls: undefined,
    warmup: undefined,
    inflight: 64,
    only: ['stdio', 'http', 'ws'],
    twenty: true,
    relay: true,
    governance: true,
    sharedLimits: true,
    interleaved: true,
    surface: true,
    profile: undefined,
    httpMode: 'json',
    maxMinutes: undefined,
  };
  readOptions(argv, o, usage, (a, next, num) => {
    switch (a) {
      case '--only': {
        // `--only governance`: no transport section, only governance on vs off (and with Redis).
        // `--only surface`: only the tool-search recall section (and it runs only when named).
        // `--only shared-limits`: only governance with Redis vs in memory.
        const list = next().split(',').map((s) => s.trim()).filter(Boolean);
        // `--only lists`: the 10 x 100 tools/list over HTTP (bench/lists.mjs), alone unless named with others.
        o.lists = list.includes('lists');
        if (o.lists && list.length === 1) (o.governance = false, o.sharedLimits = false, (o.profile ??= false));
        o.only = list.filter((s) => s !== 'governance' && s !== 'surface' && s !== 'shared-limits' && s !== 'startup' && s !== 'lists');
        for (const t of o.only) if (!['stdio', 'http', 'ws'].includes(t)) usage(`--only takes stdio, http, ws, governance, shared-limits, startup, surface or lists, got ${t}`);
        o.surface = list.includes('surface');
        // `--only startup`: only the start-up section (bench/startup.mjs).
        o.startupOnly = list.includes('startup') && list.length === 1;
        if (o.startupOnly) (o.governance = false, o.sharedLimits = false, o.twenty = false, o.profile ??= false);
        if ((o.surface || list.includes('shared-limits')) && !list.includes('governance') && o.only.length === 0) {
          o.governance = false;
          o.sharedLimits = list.includes('shared-limits');
          o.profile ??= false;
        }
        break;
      }
      case '--no-20x100': (o.twenty = false, o.noTwenty = true); break;
      case '--no-relay': o.relay = false; break;
      case '--no-governance': o.governance = false; break;
      case '--no-shared-limits': o.sharedLimits = false; break;
      case '--no-interleaved': o.interleaved = false; break;
      case '--no-surface': o.surface = false; break;
      case '--profile': o.profile = true; break;
      case '--no-profile': o.profile = false; break;
      case '--http-mode': {
        o.httpMode = next();
        if (!['json', 'sse'].includes(o.httpMode)) usage('--http-mode takes json or sse');
        break;
      }
      case '--max-minutes': o.maxMinutes = num(next()); break;
      case '--out': RESULTS = next(); break;
      case '--render': o.render = next(); break;
      case '-h':
      case '--help':
        process.stdout.write(readmeUsage());
        process.exit(0);
        break;
      default: usage(`unknown option ${a}`);
    }
  });
  sizeDefaults(o);
  const q = o.quick;
  o.profile ??= !q;
  o.initRepeats = q ? 1 : 3; // stdio: spawns per round; http/ws: new sessions per round (+2)
  o.listRepeats = q ? 10 : 50;
  o.echo = [
    { label: '100 KB', bytes: 100_000, reps: q ? 3 : 9 },
    { label: '1 MB', bytes: 1_000_000, reps: q ? 2 : 5 },
    { label: '10 MB', bytes: 10_000_000, reps: q ? 1 : 3 },
  ];
  o.twentyServers = 20;
  o.twentyTools = 100;
  // The p50 clauses of targets 1 and 2, with the compared processes open at once (bench/interleaved.mjs):
  // relay with the stdio section, governance with the governance one.
  const compare = [...(o.only.includes('stdio') && o.relay ? ['relay'] : []), ...(o.governance ? ['governance'] : [])];
  o.interleavedRun = o.interleaved && compare.length > 0 ? { compare, clients: ['light', 'sdk'], ...(q ? { rounds: 1, blocks: 4, block: 25, warmup: 100 } : { rounds: 3, blocks: 30, block: 100, warmup: 2000 }) } : undefined;
  // Whole-run watchdog: generous, but a hang ends with a message instead of never.
  const perTransport = 4 * o.duration + 120;
  const governance = (o.governance ? 2 * (2 * o.duration + 60) : 0) + (o.sharedLimits ? 2 * (o.duration + 60) : 0);
  const surface = o.surface ? 20 * 60 : 0; // the first fetch of the corpus installs a few dozen packages
  const ir = o.interleavedRun;
  const interleaved = ir ? 60 * ir.compare.length * ir.clients.length * ir.rounds : 0;
  o.maxMinutes ??= Math.ceil((o.rounds * (o.only.length * perTransport + governance) + 300 + surface + interleaved + (o.profile ? o.duration + 60 : 0)) / 60) + 5;
  return o;
}

function usage(msg) {
  process.stderr.write(`bench: ${msg}\n${readmeUsage()}`);
  process.exit(2);
}
function readmeUsage() {
  return `usage: node bench/run.mjs [--quick] [--rounds N] [--duration S] [--calls N] [--warmup N] [--inflight N]
                        [--only stdio|http|ws[,..]] [--no-20x100] [--no-relay] [--profile|--no-profile]
                        [--http-mode json|sse] [--max-minutes M] [--no-governance] [--no-surface] [--no-shared-limits]
                        [--no-interleaved]
       node bench/run.mjs --render bench/results/latest.json    (re-print a saved run's table)
`;
}

// ---- small helpers ----------------------------------------------------------------------------

const now = () => performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let currentPhase = 'starting';
function phase(s) {
  currentPhase = s;
  process.stderr.write(`bench: ${s}\n`);
}

function withTimeout(p, ms, what) {
  let t;
  return Promise.race([
    p,
    new Promise((_, rej) => (t = setTimeout(() => rej(new Error(`${what}: no answer within ${ms} ms`)), ms))),
  ]).finally(() => clearTimeout(t));
}

function makeText(bytes) {
  const unit = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
  return unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes);
}

// ---- targets ----------------------------------------------------------------------------------
// A target is something to connect to: the echo server directly, or mcpmux in front of it.
//   start()/stop()           the long-lived server (http/ws), nothing for stdio
//   openLight()              {c, initMs, pid, close()}   pid: the process serving this session
//   openSdk()                {sdk, pid, close()}
//   upstreamPid(pid)         the echo server behind mcpmux (for CPU accounting), if any

function stdioTarget(via, { spawnArgs, label }) {
  return {
    kind: 'stdio',
    via,
    label,
    async start() {},
    async stop() {},
    openLight: (timeoutMs = 30_000) => openStdioLight(spawnArgs(), { label, timeoutMs }),
    openSdk: () => openStdioSdk(spawnArgs(), { label }),
  };
}

/** Waits for the JSON stderr line {"msg":"listening","url":...}; rejects on exit or timeout. */
function waitListening(child, ms, what) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => done(new Error(`${what}: no "listening" log line within ${ms} ms`)), ms);
    const onExit = ({ code, signal }) => done(new Error(`${what} exited (${signal ?? `code ${code}`}) before listening`));
    function done(err, url) {
      clearTimeout(t);
      child.onStderrLine = undefined;
      if (err) reject(new Error(`${err.message}${child.stderrTail() ? `\n--- its stderr:\n${child.stderrTail(1500)}` : ''}`));
      else resolve(url);
    }
    child.exited.then(onExit);
    child.onStderrLine = (line) => {
      if (!line.includes('listening')) return;
      try {
        const m = JSON.parse(line);
        if (m.msg === 'listening' && typeof m.url === 'string') done(null, m);
      } catch {
        /* not JSON */
      }
    };
  });
}

function netTarget(kind, via, { spawnArgs, label, urlOf }) {
  let child;
  let url;
  return {
    kind,
    via,
    label,
    get pid() {
      return child?.pid;
    },
    async start() {
      child = spawnTracked(NODE, spawnArgs(), { label });
      const listening = await waitListening(child, 30_000, label);
      url = urlOf(listening);
    },
    async stop() {
      const c = child;
      child = undefined;
      return stopTracked(c, { first: 'SIGTERM', graceMs: 8000 });
    },
    async openLight(timeoutMs = 30_000) {
      const t0 = now();
      const c = kind === 'ws' ? new WsLight(url, { label }) : new HttpLight(url, { label });
      try {
        if (kind === 'ws') await c.open(timeoutMs);
        await c.initialize(timeoutMs);
      } catch (e) {
        await c.close().catch(() => {});
        throw new Error(`${label}: ${errText(e)}${child.stderrTail() ? `\n--- its stderr:\n${child.stderrTail(1500)}` : ''}`);
      }
      const initMs = now() - t0;
      return { c, initMs, pid: child.pid, child, close: () => c.close() };
    },
    async openSdk() {
      const sdk = await connectSdk(kind, url, 30_000).catch((e) => {
        throw new Error(`${label} (SDK client): ${errText(e)}`);
      });
      return { sdk, pid: child.pid, close: () => closeSdk(sdk, kind) };
    },
  };
}

// ---- measurements -----------------------------------------------------------------------------

/** Full tools/list (following nextCursor). Returns {tools, pages, bytes?}. */
async function listAll(c, { measureBytes = false, timeoutMs = 30_000 } = {}) {
  let cursor;
  let tools = [];
  let pages = 0;
  let bytes = 0;
  do {
    const r = await c.request('tools/list', cursor === undefined ? {} : { cursor }, timeoutMs);
    if (r.error) throw new Error(`tools/list failed: ${JSON.stringify(r.error)}`);
    pages++;
    if (measureBytes) bytes += JSON.stringify(r).length;
    tools = tools.concat(r.result.tools);
    cursor = r.result.nextCursor;
    if (pages > 1000) throw new Error('tools/list: more than 1000 pages');
  } while (cursor !== undefined && cursor !== null);
  return { tools, pages, bytes };
}

async function measureList(c, repeats) {
  const first = await listAll(c, { measureBytes: true });
  await listAll(c);
  const lat = [];
  const toLastByte = [];
  for (let i = 0; i < repeats; i++) {
    const t0 = now();
    await listAll(c);
    lat.push(now() - t0);
    if (c.lineDoneAt !== undefined) toLastByte.push(c.lineDoneAt - t0);
  }
  // How much of a listing is the client's own JSON.parse of the answer (an estimate: the same
  // bytes parsed here, median of 5), so that a large catalogue's figure can be read net of it.
  const raw = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tools: first.tools } });
  const parse = [];
  for (let i = 0; i < 5; i++) {
    const t0 = now();
    JSON.parse(raw);
    parse.push(now() - t0);
  }
  return { ...latencySummary(lat), toLastByteP50: toLastByte.length ? median(toLastByte) : NaN, tools: first.tools.length, pages: first.pages, bytes: first.bytes, clientParseMs: median(parse), names: first.tools.map((t) => t.name) };
}

async function echoSizes(c, name, sizes, pid) {
  const out = {};
  for (const { label, bytes, reps } of sizes) {
    const text = makeText(bytes);
    const lat = [];
    let error;
    let growthKb;
    for (let i = 0; i < reps && !error; i++) {
      // The first echo's peak RSS above the RSS before it: what one message of this size costs.
      const before = i === 0 ? resetPeak(pid) : undefined;
      const t0 = now();
      try {
        const r = await c.request('tools/call', { name, arguments: { text } }, 120_000);
        const dt = now() - t0;
        if (r.error) error = `JSON-RPC ${r.error.code}: ${String(r.error.message).slice(0, 120)}`;
        else if (r.result?.isError) error = `tool error: ${String(r.result.content?.[0]?.text).slice(0, 120)}`;
        else if (r.result?.content?.[0]?.text !== text) error = `wrong echo (${r.result?.content?.[0]?.text?.length} chars back)`;
        else lat.push(dt);
      } catch (e) {
        error = errText(e).slice(0, 200);
      }
      if (before !== undefined) {
        const after = memory(pid);
        if (after) growthKb = after.hwmKb - before;
      }
    }
    out[label] = { ok: !error, error, reps: lat.length, p50: lat.length ? median(lat) : NaN, peakGrowthKb: growthKb, bytes };
    if (error && c.closed) break; // the connection died (e.g. a size limit); later sizes can't run
  }
  return out;
}

/** Every figure for one target in one round. */
async function measureTarget(t, o) {
  const rec = { target: t.label, kind: t.kind, via: t.via };
  const net = t.kind !== 'stdio';
  const sessionsToClose = [];
  try {
    if (net) {
      phase(`${t.label}: starting server`);
      await t.start();
      const first = await t.openLight();
      rec.firstInitMs = first.initMs;
      await first.close();
    }
    phase(`${t.label}: initialize x${o.initRepeats + (net ? 2 : 0)}`);
    const inits = [];
    for (let i = 0; i < o.initRepeats + (net ? 2 : 0); i++) {
      const s = await t.openLight();
      inits.push(s.initMs);
      await s.close();
    }
    rec.init = { p50: median(inits), samples: inits };

    // ---- light client session --------------------------------------------------------------
    const L = await t.openLight();
    sessionsToClose.push(L);
    phase(`${t.label}: tools/list x${o.listRepeats}`);
    const list = await measureList(L.c, o.listRepeats);
    const tool = echoTool(list.names);
    if (!tool) throw new Error(`${t.label}: no echo tool in tools/list (${list.names.slice(0, 5).join(', ')}...)`);
    delete list.names;
    rec.list = list;
    rec.tool = tool;
    const upstream = t.via !== 'direct' ? echoServerOf(L.pid) : undefined;
    rec.upstreamPid = upstream;

    phase(`${t.label}: sequential tools/call, light client, ${o.warmup} + ${o.calls}`);
    rec.seqLight = await sequential(echoCall(L.c, tool), o.warmup, o.calls);
    phase(`${t.label}: throughput, light client, ${o.inflight} in flight, ${o.duration} s`);
    rec.tputLight = await throughput(echoCall(L.c, tool), { inflight: o.inflight, durationMs: o.duration * 1000, pids: [L.pid, upstream] });
    if (L.c.mode) rec.httpResponseMode = L.c.mode;
    phase(`${t.label}: echo ${o.echo.map((e) => e.label).join(', ')}`);
    rec.echo = await echoSizes(L.c, tool, o.echo, L.pid);
    await sleep(200);
    rec.mem = memory(L.pid); // read while the process is still up
    sessionsToClose.splice(sessionsToClose.indexOf(L), 1);
    const leftovers = await L.close();
    if (leftovers?.length) rec.leftovers = leftovers;

    // ---- SDK client session ----------------------------------------------------------------
    const S = await t.openSdk();
    sessionsToClose.push(S);
    phase(`${t.label}: sequential tools/call, SDK client, ${o.warmup} + ${o.calls}`);
    rec.seqSdk = await sequential(sdkCall(S.sdk.client, tool), o.warmup, o.calls);
    phase(`${t.label}: throughput, SDK client, ${o.inflight} in flight, ${o.duration} s`);
    const up2 = t.via !== 'direct' ? echoServerOf(S.pid) : undefined;
    rec.tputSdk = await throughput(sdkCall(S.sdk.client, tool), { inflight: o.inflight, durationMs: o.duration * 1000, pids: [S.pid, up2] });
    if (net) rec.memAfterSdk = memory(S.pid);
    sessionsToClose.splice(sessionsToClose.indexOf(S), 1);
    const left2 = await S.close();
    if (left2?.length) rec.leftovers = [...(rec.leftovers ?? []), ...left2];
  } finally {
    for (const s of sessionsToClose) await s.close().catch(() => {});
    if (net) {
      const left = await t.stop().catch(() => []);
      if (left?.length) rec.leftovers = [...(rec.leftovers ?? []), ...left];
    }
  }
  if (rec.leftovers?.length) process.stderr.write(`bench: WARNING: ${t.label} left ${rec.leftovers.length} process(es) behind after shutdown; killed them\n`);
  return rec;
}

// ---- governance on vs off ---------------------------------------------------------------------

/**
 * The calls that matter for the governance budget, for one stdio target: sequential p50 and
 * in-flight throughput, light and SDK clients. With `scrape`, /metrics on the process's admin
 * port is fetched every second meanwhile, as Prometheus would.
 */
async function measureCalls(t, o, { scrape }) {
  const rec = { target: t.label, scrapes: 0 };
  for (const kind of ['light', 'sdk']) {
    const s = kind === 'light' ? await t.openLight() : await t.openSdk();
    const scraper = scrape ? startScraper(s.child, rec) : undefined;
    try {
      const call = kind === 'light' ? (tool) => echoCall(s.c, tool) : (tool) => sdkCall(s.sdk.client, tool);
      const names = kind === 'light' ? (await listAll(s.c)).tools.map((x) => x.name) : (await s.sdk.client.listTools()).tools.map((x) => x.name);
      const tool = echoTool(names);
      if (!tool) throw new Error(`${t.label}: no echo tool`);
      phase(`${t.label}: sequential tools/call, ${kind} client, ${o.warmup} + ${o.calls}`);
      rec[kind === 'light' ? 'seqLight' : 'seqSdk'] = await sequential(call(tool), o.warmup, o.calls);
      phase(`${t.label}: throughput, ${kind} client, ${o.inflight} in flight, ${o.duration} s`);
      rec[kind === 'light' ? 'tputLight' : 'tputSdk'] = await throughput(call(tool), { inflight: o.inflight, durationMs: o.duration * 1000, pids: [s.pid, echoServerOf(s.pid)] });
    } finally {
      await scraper?.stop();
      const left = await s.close();
      if (left?.length) rec.leftovers = [...(rec.leftovers ?? []), ...left];
    }
  }
  return rec;
}

/** mcpmux (stdio) in front of 20 upstreams of 100 tools each, idle after listing. */
async function measureTwenty(o, config) {
  const label = `mcpmux stdio, ${o.twentyServers} upstreams x ${o.twentyTools} tools`;
  phase(`${label}: start`);
  const t = stdioTarget('mcpmux', { label, spawnArgs: () => [MCPMUX, 'stdio', '--config', config] });
  const expected = o.twentyServers * (o.twentyTools + 1);
  const t0 = now();
  const L = await t.openLight(120_000);
  const rec = { target: label, initMs: L.initMs };
  try {
    // The first initialize waits for the upstreams up to timeouts.startupMs; slow starters join
    // later (list_changed). Wait until the whole catalogue is there before timing listings.
    let n = 0;
    const deadline = Date.now() + 120_000;
    for (;;) {
      n = (await listAll(L.c, { timeoutMs: 60_000 })).tools.length;
      if (n >= expected) break;
      if (Date.now() > deadline) throw new Error(`${label}: only ${n} of ${expected} tools listed after 120 s`);
      await sleep(250);
    }
    rec.completeMs = now() - t0;
    phase(`${label}: tools/list x${o.listRepeats}`);
    const list = await measureList(L.c, o.listRepeats);
    delete list.names;
    rec.list = list;
    phase(`${label}: idle 2 s, then VmHWM`);
    await sleep(2000);
    rec.mem = memory(L.pid);
    rec.upstreams = echoServersOf(L.pid).length;
  } finally {
    const left = await L.close();
    if (left?.length) rec.leftovers = left;
  }
  return rec;
}

/** With the default timeouts.startupMs: how much of the catalogue is there at the first initialize. */
async function probeDefaultStartup(o, config) {
  const label = `mcpmux stdio, ${o.twentyServers} x ${o.twentyTools}, default startupMs`;
  phase(`${label}: tools at the first initialize and 30 s later`);
  const t = stdioTarget('mcpmux', { label, spawnArgs: () => [MCPMUX, 'stdio', '--config', config] });
  const L = await t.openLight(120_000);
  try {
    const atInit = (await listAll(L.c, { timeoutMs: 60_000 })).tools.length;
    await sleep(30_000);
    const later = (await listAll(L.c, { timeoutMs: 60_000 })).tools.length;
    const failed = (L.child.stderrTail(64 * 1024).match(/"msg":"upstream failed"/g) ?? []).length;
    return { initMs: L.initMs, toolsAtInit: atInit, toolsAfter30s: later, expected: o.twentyServers * (o.twentyTools + 1), upstreamFailuresLogged: failed };
  } finally {
    await L.close();
  }
}

/** Direct stdio listing of one echo server with 100 tools: the reference for the 20x100 row. */
async function measureDirectHundred(o) {
  const label = `direct stdio, 1 upstream x ${o.twentyTools} tools`;
  phase(`${label}: tools/list x${o.listRepeats}`);
  const t = stdioTarget('direct', { label, spawnArgs: () => [ECHO, '--tools', String(o.twentyTools)] });
  const L = await t.openLight();
  try {
    const list = await measureList(L.c, o.listRepeats);
    delete list.names;
    return { target: label, list, mem: memory(L.pid) };
  } finally {
    await L.close();
  }
}

async function profileStdio(o, config) {
  const name = 'mcpmux-stdio-throughput.cpuprofile';
  const file = join(RESULTS, name);
  rmSync(file, { force: true });
  const label = 'mcpmux stdio (node --cpu-prof)';
  phase(`${label}: throughput, light client, ${o.inflight} in flight, ${o.duration} s`);
  const t = stdioTarget('mcpmux', { label, spawnArgs: () => ['--cpu-prof', `--cpu-prof-dir=${RESULTS}`, `--cpu-prof-name=${name}`, MCPMUX, 'stdio', '--config', config] });
  const L = await t.openLight();
  let tput;
  try {
    const list = await listAll(L.c);
    const tool = echoTool(list.tools.map((x) => x.name));
    await sequential(echoCall(L.c, tool), o.warmup, 0);
    tput = await throughput(echoCall(L.c, tool), { inflight: o.inflight, durationMs: o.duration * 1000, pids: [L.pid] });
  } finally {
    await L.close(); // stdin closes, mcpmux exits normally and writes the profile
  }
  if (!existsSync(file)) throw new Error(`${label}: no profile written at ${file}`);
  const a = analyse(JSON.parse(readFileSync(file, 'utf8')));
  return { file: file.slice(ROOT.length), callsPerSec: tput.callsPerSec, calls: tput.calls, analysis: { totalMs: a.totalMs, functions: a.functions.slice(0, 25), files: a.files.slice(0, 15) }, table: topTable(a, 10) };
}

// ---- report -----------------------------------------------------------------------------------

const get = (obj, path) => path.split('.').reduce((v, k) => (v == null ? undefined : v[k]), obj);

/**
 * Rows: [label, path or fn, {better, target, unit}]. Values per round are taken from the
 * direct record and the mcpmux record of that round; the ratio is mcpmux / direct.
 */
function rowsFor(kind) {
  const r = [];
  if (kind === 'stdio') r.push(['initialize: spawn → answered (ms)', 'init.p50', { better: 'lower' }]);
  else {
    // No stdio counterpart for these two: a ws row shows mcpmux only.
    r.push(['initialize: first session after start (ms)', 'firstInitMs', { better: 'lower', proxyOnly: kind === 'ws' }]);
    r.push(['initialize: new session, p50 (ms)', 'init.p50', { better: 'lower', proxyOnly: kind === 'ws' }]);
  }
  r.push(['tools/list, 1 upstream, p50 (ms)', 'list.p50', { better: 'lower' }]);
  const p50target = kind === 'stdio' ? { op: '<=', x: 1.25 } : kind === 'http' ? { op: '<=', x: 1.0 } : undefined;
  // Issue 23: against the no-op relay (stdio), the floor of any process in the middle.
  const relayP50 = kind === 'stdio' ? { op: 'added', ms: 0.03 } : undefined;
  const relayTput = kind === 'stdio' ? { op: '>=', x: 0.95 } : undefined;
  r.push(['tools/call p50, SDK client (ms)', 'seqSdk.p50', { better: 'lower', target: p50target, relayTarget: relayP50 }]);
  r.push(['tools/call p90, SDK client (ms)', 'seqSdk.p90', { better: 'lower' }]);
  r.push(['tools/call p99, SDK client (ms)', 'seqSdk.p99', { better: 'lower' }]);
  r.push(['tools/call p50, light client (ms)', 'seqLight.p50', { better: 'lower', target: p50target, relayTarget: relayP50 }]);
  r.push(['tools/call p90, light client (ms)', 'seqLight.p90', { better: 'lower' }]);
  r.push(['tools/call p99, light client (ms)', 'seqLight.p99', { better: 'lower' }]);
  r.push(['throughput, SDK client (calls/s)', 'tputSdk.callsPerSec', { better: 'higher', target: kind === 'stdio' ? { op: '>=', x: 0.8 } : undefined, relayTarget: relayTput }]);
  r.push(['throughput, light client (calls/s)', 'tputLight.callsPerSec', { better: 'higher', target: kind === 'stdio' ? { op: '>=', x: 0.8 } : kind === 'http' ? { op: '>=', x: 1.5 } : undefined, relayTarget: relayTput }]);
  r.push(['echo 100 KB, p50 (ms)', 'echo.100 KB', { better: 'lower', echo: true, target: { op: '<=', x: 1.3 } }]);
  r.push(['echo 1 MB, p50 (ms)', 'echo.1 MB', { better: 'lower', echo: true, target: { op: 'ok' } }]);
  r.push(['echo 10 MB, p50 (ms)', 'echo.10 MB', { better: 'lower', echo: true, target: { op: 'ok' } }]);
  r.push(['CPU/call server side, light (ms): direct = echo server; else the middle process + upstream', (x) => (x.via !== 'direct' ? x.tputLight?.cpuMsPerCall?.[0] + x.tputLight?.cpuMsPerCall?.[1] : x.tputLight?.cpuMsPerCall?.[0]), { better: 'lower' }]);
  r.push(['CPU/call of the mcpmux (or relay) process, light client (ms)', (x) => (x.via !== 'direct' ? x.tputLight?.cpuMsPerCall?.[0] : undefined), { better: 'lower', proxyOnly: true }]);
  r.push(['CPU/call of the mcpmux (or relay) process, SDK client (ms)', (x) => (x.via !== 'direct' ? x.tputSdk?.cpuMsPerCall?.[0] : undefined), { better: 'lower', proxyOnly: true }]);
  r.push(['CPU/call of the client (bench process), light / SDK (ms)', (x) => x.tputLight?.clientCpuMsPerCall, { better: 'lower', pair: (x) => x.tputSdk?.clientCpuMsPerCall }]);
  r.push(['peak RSS (VmHWM) after the run incl. 10 MB echo (MB): direct = echo server', (x) => (x.mem ? x.mem.hwmKb / 1024 : NaN), { better: 'lower' }]);
  r.push(['peak RSS growth during one 10 MB echo ÷ 10 MB: direct = echo server; else the middle process', (x) => echoGrowth(x, '10 MB'), { better: 'lower', target: { op: 'max', x: 3, what: 'the message size' } }]);
  return r;
}

/** How many times the message size one echo raised the process's peak RSS (see echoSizes). */
function echoGrowth(rec, label) {
  const e = rec.echo?.[label];
  return e?.peakGrowthKb === undefined ? NaN : (e.peakGrowthKb * 1024) / e.bytes;
}

function value(rec, path) {
  if (!rec) return undefined;
  return typeof path === 'function' ? path(rec) : get(rec, path);
}

/** Issue 23's targets against the relay (medians of the per-round figures): p50 at most `ms` above it, or a ratio to it. */
function relayVerdict(target, over, ratio) {
  if (target.op === 'added') return Number.isFinite(over) ? `${over <= target.ms ? 'ok' : '**MISSED**'} (≤ relay + ${Math.round(target.ms * 1000)} µs)` : '';
  return Number.isFinite(ratio) ? `${ratio >= target.x ? 'ok' : '**MISSED**'} (≥ ${target.x}x relay)` : '';
}

function verdict(target, ratio, proxyEcho, proxyValue) {
  if (!target) return '';
  if (target.op === 'max') return Number.isFinite(proxyValue) ? `${proxyValue <= target.x ? 'ok' : '**MISSED**'} (≤ ${target.x}x ${target.what})` : '';
  if (target.op === 'ok') return proxyEcho === undefined ? '' : proxyEcho ? 'ok' : '**MISSED**';
  if (!Number.isFinite(ratio)) return '';
  const ok = target.op === '<=' ? ratio <= target.x : ratio >= target.x;
  return `${ok ? 'ok' : '**MISSED**'} (${target.op === '<=' ? '≤' : '≥'} ${target.x}x)`;
}

function summarise(results, o) {
  const sections = [];
  const floors = { stdio: 'direct stdio', http: 'direct http', ws: 'direct stdio' };
  for (const kind of o.only) {
    const proxyLabel = `mcpmux ${kind}`;
    const directLabel = floors[kind];
    const rounds = results.rounds.map((r) => ({ d: r[directLabel], p: r[proxyLabel], x: kind === 'stdio' ? r['relay stdio'] : undefined }));
    const hasRelay = rounds.some(({ x }) => x);
    const proxyErr = results.rounds.map((r) => r.errors?.[proxyLabel]).find(Boolean);
    const directErr = results.rounds.map((r) => r.errors?.[directLabel]).find(Boolean);
    const rows = [];
    for (const [label, path, meta] of rowsFor(kind)) {
      if (meta.echo) {
        const dv = rounds.map(({ d }) => value(d, path));
        const pv = rounds.map(({ p }) => value(p, path));
        const d = spread(dv.map((x) => x?.p50));
        const p = spread(pv.map((x) => x?.p50));
        const ratios = rounds.map((_, i) => pv[i]?.p50 / dv[i]?.p50);
        const pOk = pv.filter(Boolean).length ? pv.every((x) => !x || x.ok) : undefined;
        const dOk = dv.filter(Boolean).length ? dv.every((x) => !x || x.ok) : undefined;
        const pErr = pv.find((x) => x && !x.ok)?.error;
        const dErr = dv.find((x) => x && !x.ok)?.error;
        const xv = rounds.map(({ x }) => value(x, path));
        const xs = spread(xv.map((v) => v?.p50));
        const xErr = xv.find((v) => v && !v.ok)?.error;
        rows.push({ label, direct: d, proxy: p, relay: xs, relayFailed: xErr, directFailed: dOk === false ? dErr : undefined, proxyFailed: pOk === false ? pErr : undefined, ratio: p.med / d.med, ratios: spread(ratios), verdict: verdict(meta.target, p.med / d.med, pOk) });
        if (meta.target?.op === '<=') rows[rows.length - 1].verdict = pOk === false ? '**MISSED** (failed)' : verdict(meta.target, p.med / d.med);
        continue;
      }
      const dv = rounds.map(({ d }) => value(d, path));
      const pv = rounds.map(({ p }) => value(p, path));
      const d = meta.proxyOnly ? spread([]) : spread(dv);
      const p = spread(pv);
      const ratios = rounds.map((_, i) => pv[i] / dv[i]);
      const ratio = meta.proxyOnly ? NaN : p.med / d.med;
      const row = { label, direct: d, proxy: p, relay: spread(rounds.map(({ x }) => value(x, path))), ratio, ratios: meta.proxyOnly ? spread([]) : spread(ratios), verdict: verdict(meta.target, ratio, undefined, p.med) };
      if (hasRelay && !meta.proxyOnly && !meta.pair) {
        // mcpmux against the relay of the same round (issue 23's floor): ratio, and what it adds.
        row.vsRelay = spread(rounds.map(({ p: pr, x }) => value(pr, path) / value(x, path)));
        row.overRelay = spread(rounds.map(({ p: pr, x }) => value(pr, path) - value(x, path)));
        if (meta.relayTarget) row.relayVerdict = relayVerdict(meta.relayTarget, row.overRelay.med, row.vsRelay.med);
        // The p50 clause is judged with the processes open at once (the interleaved section, both clients).
        if (meta.relayTarget?.op === 'added' && results.interleaved?.results?.relay) row.relayVerdict = 'see the interleaved section';
      }
      if (meta.pair) {
        row.relayPair = spread(rounds.map(({ x }) => value(x, meta.pair)));
        row.directPair = spread(rounds.map(({ d }) => value(d, meta.pair)));
        row.proxyPair = spread(rounds.map(({ p }) => value(p, meta.pair)));
        row.ratio = NaN;
        row.ratios = spread([]);
      }
      rows.push(row);
    }
    const mode = results.rounds.map((r) => r[directLabel]?.httpResponseMode).find(Boolean);
    const pmode = results.rounds.map((r) => r[proxyLabel]?.httpResponseMode).find(Boolean);
    sections.push({ kind, hasRelay, title: `${kind} host → stdio upstream`, floor: directLabel, floorNote: floorNote(kind, mode), proxyMode: pmode, proxyError: proxyErr, directError: directErr, rows });
  }
  return sections;
}

function floorNote(kind, mode) {
  if (kind === 'stdio') return 'direct floor: the SDK client (or the light client) talking to the SDK echo server over stdio';
  if (kind === 'http') return `direct floor: the same echo server behind the SDK's StreamableHTTPServerTransport (stateful, ${mode === 'sse' ? 'SSE responses' : 'enableJsonResponse: true'}), over HTTP on 127.0.0.1`;
  return 'direct floor: direct stdio (the SDK has no WebSocket server transport), so this ratio includes the cost of a network front';
}

function cell(s, failed) {
  if (failed) return `FAILED: ${failed.replace(/\|/g, '/').slice(0, 80)}`;
  return fmtSpread(s);
}

function renderMarkdown(results, o) {
  const L = [];
  const m = results.meta;
  L.push(`# mcpmux benchmark — ${m.date}`);
  L.push('');
  L.push(`Node ${m.node}, ${m.cpus} × ${m.cpuModel}, ${m.memGb} GB; load average before ${m.loadBefore.join(' ')}, after ${m.loadAfter?.join(' ') ?? '?'}; mcpmux ${m.git}.`);
  L.push(`${o.rounds} round(s); ${o.warmup} warm-up + ${o.calls} sequential calls; throughput ${o.inflight} in flight for ${o.duration} s. Cells: median over rounds (min–max). Ratio: mcpmux ÷ direct of the medians (range of the per-round ratios).`);
  L.push(`1-minute load average at the start of each round: ${results.rounds.map((r) => r.loadavgAtStart.toFixed(2)).join(', ')}${results.rounds.some((r) => r.loadavgAtStart > 1.5) ? ' — **other load on the machine: figures are disturbed, read the ratio ranges**' : ''}.`);
  if (m.serve) L.push(`mcpmux serve: ${m.serve}`);
  L.push('');
  for (const s of results.sections) {
    L.push(`## ${s.title}`);
    L.push('');
    L.push(`${s.floorNote}.${s.proxyMode ? ` mcpmux answered POSTs with ${s.proxyMode === 'sse' ? 'SSE' : 'JSON'}.` : ''}`);
    if (s.directError) L.push(`\n**${s.floor} failed:** ${s.directError.split('\n')[0]}`);
    if (s.proxyError) L.push(`\n**mcpmux ${s.kind}: not available** — ${s.proxyError.split('\n')[0]}`);
    L.push('');
    if (s.hasRelay) L.push(`The "no-op relay" column is \`bench/relay.mjs\` in mcpmux's place: a process that only pipes bytes both ways, the cheapest possible middle process; its ratio to the direct floor is in brackets. The last three columns hold mcpmux against the relay of the same round (medians of the per-round figures) and issue 23's targets: p50 within relay + 30 µs, calls/s at least 0.95x the relay's.\n`);
    L.push(`| figure | ${s.floor} |${s.hasRelay ? ' no-op relay |' : ''} mcpmux ${s.kind} | ratio | added | target |${s.hasRelay ? ' ÷ relay | over relay | target vs relay |' : ''}`);
    L.push(`|---|---:|${s.hasRelay ? '---:|' : ''}---:|---:|---:|---|${s.hasRelay ? '---:|---:|---|' : ''}`);
    for (const r of s.rows) {
      let d = cell(r.direct, r.directFailed);
      let p = cell(r.proxy, r.proxyFailed);
      if (r.directPair) {
        d = `${fmt(r.direct.med)} / ${fmt(r.directPair.med)}`;
        p = `${fmt(r.proxy.med)} / ${fmt(r.proxyPair.med)}`;
      }
      if (s.proxyError && !r.proxy.n) p = 'n/a';
      const ratio = Number.isFinite(r.ratio) ? `${r.ratio.toFixed(2)}x${r.ratios.n > 1 && r.ratios.min !== r.ratios.max ? ` (${r.ratios.min.toFixed(2)}–${r.ratios.max.toFixed(2)})` : ''}` : '';
      let x = '';
      if (s.hasRelay) {
        if (r.relayFailed) x = cell(undefined, r.relayFailed);
        else if (r.relayPair) x = `${fmt(r.relay.med)} / ${fmt(r.relayPair.med)}`;
        else x = `${fmt(r.relay?.med)}${Number.isFinite(r.relay?.med / r.direct.med) ? ` (${(r.relay.med / r.direct.med).toFixed(2)}x)` : ''}`;
        x = ` ${x} |`;
      }
      // What mcpmux adds, in the row's own unit, for times (a ratio hides a tiny floor).
      const added = /\(ms\)/.test(r.label) && !r.directPair && Number.isFinite(r.ratio) ? `${r.proxy.med - r.direct.med >= 0 ? '+' : '−'}${fmt(Math.abs(r.proxy.med - r.direct.med))} ms` : '';
      let vs = '';
      if (s.hasRelay) {
        const rr = r.vsRelay;
        const ratioR = rr && Number.isFinite(rr.med) ? `${rr.med.toFixed(2)}x${rr.n > 1 && rr.min !== rr.max ? ` (${rr.min.toFixed(2)}–${rr.max.toFixed(2)})` : ''}` : '';
        const o = r.overRelay;
        const abs = Math.abs(o?.med);
        const over = Number.isFinite(abs) && /\(ms\)/.test(r.label) ? `${o.med >= 0 ? '+' : '−'}${abs < 1 ? `${Math.round(abs * 1000)} µs` : `${fmt(abs)} ms`}` : '';
        vs = ` ${ratioR} | ${over} | ${r.relayVerdict ?? ''} |`;
      }
      L.push(`| ${r.label} | ${d} |${x} ${p} | ${ratio} | ${added} | ${r.verdict ?? ''} |${vs}`);
    }
    L.push('');
  }
  if (results.governance) renderGovernance(L, results.governance, o, Boolean(results.interleaved?.results?.governance));
  if (results.interleaved) {
    if (results.interleaved.error) L.push(`## ${INTERLEAVED_TITLE}`, '', `**failed:** ${results.interleaved.error.split('\n')[0]}`, '');
    // A run saved before the section measured both clients (--render of an older latest.json).
    else if (!o.interleavedRun?.clients) L.push(`## ${INTERLEAVED_TITLE}`, '', 'Saved by an older bench (the light client only, in another shape): see its latest.md.', '');
    else L.push(renderInterleaved(results.interleaved.results, o.interleavedRun, m.git, '##'));
  }
  if (results.sharedLimits) renderSharedLimits(L, results.sharedLimits, o);
  if (results.lists) renderLists(L, results.lists);
  if (results.surface) renderSurface(L, results.surface);
  if (results.startup) L.push(renderStartup(results.startup));
  if (results.twenty) {
    const t = results.twenty;
    L.push(`## ${o.twentyServers} upstreams × ${o.twentyTools} tools (stdio host)`);
    L.push('');
    if (t.error) L.push(`**failed:** ${t.error.split('\n')[0]}\n`);
    L.push('| figure | reference | mcpmux | ratio | target |');
    L.push('|---|---:|---:|---:|---|');
    const lp = spread(t.rounds.map((r) => r.mux?.list?.p50));
    const lr = spread(t.rounds.map((r) => r.ref?.list?.p50));
    L.push(`| initialize: spawn → answered (ms) | | ${fmtSpread(spread(t.rounds.map((r) => r.mux?.initMs)))} | | |`);
    L.push(`| spawn → all ${o.twentyServers * (o.twentyTools + 1)} tools listed (ms) | | ${fmtSpread(spread(t.rounds.map((r) => r.mux?.completeMs)))} | | |`);
    L.push(`| tools/list, all pages, p50 (ms); reference: direct stdio to one ${o.twentyTools}-tool server | ${fmtSpread(lr)} | ${fmtSpread(lp)} | ${fmt(lp.med / lr.med)}x | |`);
    const br = spread(t.rounds.map((r) => r.ref?.list?.toLastByteP50));
    const bp = spread(t.rounds.map((r) => r.mux?.list?.toLastByteP50));
    L.push(`| tools/list served: request sent → last byte of the answer received, p50 (ms), before the client parses it | ${fmtSpread(br)} | ${fmtSpread(bp)} | ${fmt(bp.med / br.med)}x | ${Number.isFinite(bp.med) ? (bp.med < 5 ? 'ok' : '**MISSED**') + ' (< 5 ms)' : ''} |`);
    L.push(`| of which the client's JSON.parse of the answer, estimate (ms) | ${fmtSpread(spread(t.rounds.map((r) => r.ref?.list?.clientParseMs)))} | ${fmtSpread(spread(t.rounds.map((r) => r.mux?.list?.clientParseMs)))} | | |`);
    L.push(`| tools/list p99 (ms) | ${fmtSpread(spread(t.rounds.map((r) => r.ref?.list?.p99)))} | ${fmtSpread(spread(t.rounds.map((r) => r.mux?.list?.p99)))} | | |`);
    const mx = t.rounds.find((r) => r.mux)?.mux;
    const rf = t.rounds.find((r) => r.ref)?.ref;
    if (mx) L.push(`| tools listed, pages, JSON bytes | ${rf ? `${rf.list.tools}, ${rf.list.pages}, ${rf.list.bytes}` : ''} | ${mx.list.tools}, ${mx.list.pages}, ${mx.list.bytes} | | |`);
    const hwm = spread(t.rounds.map((r) => (r.mux?.mem ? r.mux.mem.hwmKb / 1024 : NaN)));
    L.push(`| mcpmux peak RSS (VmHWM), idle after listing (MB) | | ${fmtSpread(hwm)} | | ${Number.isFinite(hwm.med) ? (hwm.med < 80 ? 'ok' : '**MISSED**') + ' (< 80 MB)' : ''} |`);
    const ds = t.defaultStartup;
    if (ds) L.push(ds.error ? `| default startupMs (10 s): probe failed | | ${ds.error.split('\n')[0].slice(0, 100)} | | |` : `| default startupMs (10 s): initialize (ms); tools listed at initialize / 30 s later (of ${ds.expected}); "upstream failed" log lines | | ${fmt(ds.initMs)}; ${ds.toolsAtInit} / ${ds.toolsAfter30s}; ${ds.upstreamFailuresLogged} | | ${ds.toolsAtInit < ds.expected ? '**incomplete**' : 'ok'} |`);
    L.push(`| mcpmux RSS (VmRSS), idle (MB) | | ${fmtSpread(spread(t.rounds.map((r) => (r.mux?.mem ? r.mux.mem.rssKb / 1024 : NaN))))} | | |`);
    L.push('');
  }
  if (results.profile) {
    const p = results.profile;
    L.push('## Profile: mcpmux stdio process during the light-client throughput phase');
    L.push('');
    if (p.error) L.push(`**failed:** ${p.error.split('\n')[0]}`);
    else {
      L.push(`\`${p.file}\` — ${fmt(p.callsPerSec)} calls/s under --cpu-prof (${p.calls} calls, light client, ${o.inflight} in flight, ${o.duration} s). The profile covers the whole process life, startup included; self time per function:`);
      L.push('');
      L.push(p.table);
    }
    L.push('');
  }
  const left = results.rounds.flatMap((r) => Object.values(r).filter((x) => x?.leftovers?.length).map((x) => `${x.target}: ${x.leftovers.length}`));
  if (left.length) L.push(`**Processes left behind after shutdown (killed by the bench):** ${left.join('; ')}\n`);
  return L.join('\n');
}

/** Governance on ÷ off, per round; the budget is 10 %. */
function renderGovernance(L, g, o, interleaved) {
  L.push('## Governance on vs off (stdio host → stdio upstream)');
  L.push('');
  L.push('The same `mcpmux stdio` in front of the echo server, measured back to back in each round: off (no policy, no limits, no audit, no metrics), and on (policy with 50 rules, 3 rate-limit rules that apply to every call but never refuse, the audit log with `redacted` arguments, `/metrics` on an admin port scraped every second).');
  L.push('');
  if (g.error) L.push(`**failed:** ${g.error.split('\n')[0]}\n`);
  L.push('| figure | governance off | governance on | ratio on ÷ off | target |');
  L.push('|---|---:|---:|---:|---|');
  const rows = [
    ['tools/call p50, light client (ms)', 'seqLight.p50', '<='],
    ['tools/call p50, SDK client (ms)', 'seqSdk.p50', '<='],
    ['tools/call p99, light client (ms)', 'seqLight.p99', ''],
    ['tools/call p99, SDK client (ms)', 'seqSdk.p99', ''],
    ['throughput, light client (calls/s)', 'tputLight.callsPerSec', '>='],
    ['throughput, SDK client (calls/s)', 'tputSdk.callsPerSec', '>='],
    ['CPU/call of the mcpmux process, light client (ms)', 'tputLight.cpuMsPerCall.0', ''],
    ['CPU/call of the mcpmux process, SDK client (ms)', 'tputSdk.cpuMsPerCall.0', ''],
  ];
  for (const [label, path, op] of rows) {
    const off = spread(g.rounds.map((r) => get(r.off, path)));
    const on = spread(g.rounds.map((r) => get(r.on, path)));
    const ratios = spread(g.rounds.map((r) => get(r.on, path) / get(r.off, path)));
    const ratio = on.med / off.med;
    const range = ratios.n > 1 && ratios.min !== ratios.max ? ` (${ratios.min.toFixed(2)}–${ratios.max.toFixed(2)})` : '';
    let target = op === '<=' ? verdict({ op: '<=', x: 1.1 }, ratio) : op === '>=' ? verdict({ op: '>=', x: 0.9 }, ratio) : '';
    // The p50 clause is judged with off and on open at once (the interleaved section, both clients).
    if (op === '<=' && interleaved) target = 'see the interleaved section';
    L.push(`| ${label} | ${fmtSpread(off)} | ${fmtSpread(on)} | ${Number.isFinite(ratio) ? ratio.toFixed(2) + 'x' + range : ''} | ${target} |`);
  }
  const lines = g.rounds.map((r) => r.auditLines).filter((n) => n !== undefined);
  const scrapes = g.rounds.map((r) => r.on?.scrapes).filter((n) => n !== undefined);
  L.push(`| audit lines written; /metrics scrapes (per round) | | ${lines.join(', ')}; ${scrapes.join(', ')} | | |`);
  L.push('');
}

// ---- tool search on the real-server corpus ----------------------------------------------------
// Optional: the corpus is fetched from the npm registry once (cached in .cache/surface-corpus/);
// with no registry and no cache the section is skipped with a line saying so, never failed.

async function measureSurface() {
  phase('surface: tool-search corpus (fetched once, then cached)');
  try {
    await fetchCorpus({ quiet: false });
  } catch (e) {
    return { skipped: `the real-server corpus could not be fetched (no npm registry?): ${errText(e).split('\n')[0]}` };
  }
  phase('surface: recall, latency and build time');
  const recall = await runRecall({ fetch: false });
  phase('surface: tokens of the all-mode and search-mode lists, and of search answers');
  try {
    recall.tokens = await runTokenSurface();
  } catch (e) {
    recall.tokens = { error: errText(e) };
  }
  return recall;
}

function renderSurface(L, s) {
  L.push('## Tool search on real servers');
  L.push('');
  if (s.skipped) L.push(`skipped: ${s.skipped}`);
  else if (s.error) L.push(`**failed:** ${s.error.split('\n')[0]}`);
  else L.push(renderRecall(s).trimEnd());
  L.push('');
  if (s.tokens?.error) L.push(`tokens: **failed:** ${s.tokens.error.split('\n')[0]}`, '');
  else if (s.tokens) L.push(renderTokenSurface(s.tokens).trimEnd(), '');
}

// ---- main -------------------------------------------------------------------------------------

async function main() {
  // `--peers`: mcpmux beside supergateway, mcp-proxy and mcp-hub instead (bench/peers.mjs).
  if (process.argv.includes('--peers')) return (await import('./peers.mjs')).runPeers(process.argv.slice(2).filter((a) => a !== '--peers'));
  const o = parseOptions(process.argv.slice(2));
  if (o.render) {
    // Re-render the markdown of a saved latest.json (no measurement).
    const saved = JSON.parse(readFileSync(o.render, 'utf8'));
    saved.sections = summarise(saved, saved.options);
    process.stdout.write(renderMarkdown(saved, saved.options) + '\n');
    return;
  }
  installCleanup();
  const watchdog = setTimeout(() => {
    process.stderr.write(`bench: gave up after ${o.maxMinutes} minutes (during: ${currentPhase}); killing every child\n`);
    process.exit(1); // the exit hook kills the tracked children
  }, o.maxMinutes * 60_000);
  watchdog.unref();

  if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) throw new Error('dist/ is missing: run `npm run build` (or `npm run bench`, which builds first)');
  mkdirSync(RESULTS, { recursive: true });
  const tmp = mkdtempSync(join(tmpdir(), 'mcpmux-bench-'));
  const results = { meta: meta(o), options: o, rounds: [] };
  try {
    const one = join(tmp, 'one.json');
    writeFileSync(one, JSON.stringify({ mcpServers: { echo: { command: NODE, args: [ECHO] } }, listen: { host: '127.0.0.1', port: 0 } }, null, 2));
    const twenty = join(tmp, 'twenty.json');
    const servers = echoServersConfig(ECHO, o.twentyServers, o.twentyTools, NODE);
    // 20 SDK servers booting at once on 2 cores can take longer than the default startupMs
    // (10 s, also the upstream initialize timeout); the timed run gives them 60 s, and
    // probeDefaultStartup() reports what the default does.
    // These rows measure listing the whole catalogue: surface "all", or the default "auto" would
    // give this 2 020-tool session the search surface (a few tools) and the figures would not
    // compare with earlier runs.
    const whole = { mode: 'all' };
    writeFileSync(twenty, JSON.stringify({ mcpServers: servers, timeouts: { startupMs: 60_000 }, surface: whole }, null, 2));
    const twentyDefault = join(tmp, 'twenty-default.json');
    writeFileSync(twentyDefault, JSON.stringify({ mcpServers: servers, surface: whole }, null, 2));

    const targets = {
      'direct stdio': stdioTarget('direct', { label: 'direct stdio', spawnArgs: () => [ECHO] }),
      'relay stdio': stdioTarget('relay', { label: 'relay stdio', spawnArgs: () => [RELAY, NODE, ECHO] }),
      'mcpmux stdio': stdioTarget('mcpmux', { label: 'mcpmux stdio', spawnArgs: () => [MCPMUX, 'stdio', '--config', one] }),
      'direct http': netTarget('http', 'direct', {
        label: 'direct http',
        spawnArgs: () => [ECHO, '--http', '0', '--max-body', String(16 * 1024 * 1024), ...(o.httpMode === 'sse' ? ['--sse'] : [])],
        urlOf: (m) => m.url,
      }),
      'mcpmux http': netTarget('http', 'mcpmux', {
        label: 'mcpmux http',
        spawnArgs: () => [MCPMUX, 'serve', '--config', one, '--port', '0'],
        urlOf: (m) => new URL('/mcp', new URL(m.url).origin).href,
      }),
      'mcpmux ws': netTarget('ws', 'mcpmux', {
        label: 'mcpmux ws',
        spawnArgs: () => [MCPMUX, 'serve', '--config', one, '--port', '0'],
        urlOf: (m) => (typeof m.ws === 'string' ? m.ws : new URL('/ws', new URL(m.url).origin.replace(/^http/, 'ws')).href),
      }),
    };
    const order = [];
    const add = (k) => !order.includes(k) && order.push(k);
    for (const kind of o.only) {
      if (kind === 'stdio') (add('direct stdio'), o.relay && add('relay stdio'), add('mcpmux stdio'));
      if (kind === 'http') (add('direct http'), add('mcpmux http'));
      if (kind === 'ws') (add('direct stdio'), add('mcpmux ws'));
    }

    let serveUnavailable;
    for (let round = 1; round <= o.rounds; round++) {
      const r = { round, errors: {}, loadavgAtStart: loadavg()[0] };
      results.rounds.push(r);
      for (const k of order) {
        const t = targets[k];
        if ((k === 'mcpmux http' || k === 'mcpmux ws') && serveUnavailable) {
          r.errors[k] = serveUnavailable;
          continue;
        }
        phase(`round ${round}/${o.rounds}: ${k}`);
        try {
          r[k] = await measureTarget(t, o);
        } catch (e) {
          const msg = errText(e);
          r.errors[k] = msg;
          process.stderr.write(`bench: ${k} failed: ${msg}\n`);
          if ((k === 'mcpmux http' || k === 'mcpmux ws') && /before listening|no "listening"/.test(msg)) {
            serveUnavailable = `\`mcpmux serve\` did not start: ${msg.split('\n')[0]}`;
            const tail = msg.split('--- its stderr:\n')[1];
            if (tail) serveUnavailable += ` — stderr: ${tail.split('\n').slice(-3).join(' ').slice(0, 300)}`;
            results.meta.serve = serveUnavailable;
          }
        }
      }
    }

    if (o.governance) {
      const auditPath = join(tmp, 'audit.jsonl');
      const governed = join(tmp, 'governed.json');
      writeFileSync(governed, JSON.stringify(governedConfig({ command: NODE, args: [ECHO] }, auditPath), null, 2));
      const off = stdioTarget('mcpmux', { label: 'governance off', spawnArgs: () => [MCPMUX, 'stdio', '--config', one] });
      const on = stdioTarget('mcpmux', { label: 'governance on', spawnArgs: () => [MCPMUX, 'stdio', '--config', governed, '--admin-port', '0'] });
      results.governance = { rounds: [] };
      for (let round = 1; round <= o.rounds; round++) {
        const r = {};
        results.governance.rounds.push(r);
        try {
          r.off = await measureCalls(off, o, { scrape: false });
          r.on = await measureCalls(on, o, { scrape: true });
          r.auditLines = readFileSync(auditPath, 'utf8').split('\n').filter(Boolean).length;
          rmSync(auditPath, { force: true });
        } catch (e) {
          r.error = errText(e);
          results.governance.error ??= r.error;
          process.stderr.write(`bench: governance failed: ${r.error}\n`);
        }
      }
    }

    // The sequential p50 of targets 1 and 2 with the compared processes open at once: measured
    // one process after another (above), a p50 moves 50-100 µs between windows on a small VM.
    if (o.interleavedRun) {
      try {
        results.interleaved = { results: await measureInterleaved(o.interleavedRun, phase) };
      } catch (e) {
        results.interleaved = { error: errText(e) };
        process.stderr.write(`bench: interleaved failed: ${results.interleaved.error}\n`);
      }
    }

    // tools/list of 10 x 100 over HTTP, first and repeated (bench/lists.mjs): with --only lists.
    if (o.lists) {
      try {
        results.lists = await measureLists(o, { phase });
      } catch (e) {
        results.lists = { error: errText(e) };
        process.stderr.write(`bench: lists failed: ${results.lists.error}\n`);
      }
    }

    // Governance with the rate-limit buckets in Redis vs in memory (bench/shared-limits.mjs).
    if (o.sharedLimits) {
      try {
        results.sharedLimits = await measureSharedLimits(o, { phase });
      } catch (e) {
        results.sharedLimits = { rounds: [], error: errText(e) };
        process.stderr.write(`bench: shared limits failed: ${results.sharedLimits.error}\n`);
      }
      if (results.sharedLimits.skipped) process.stderr.write(`bench: shared limits skipped: ${results.sharedLimits.skipped}\n`);
    }

    if (o.twenty && o.only.includes('stdio')) {
      results.twenty = { rounds: [] };
      for (let round = 1; round <= o.rounds; round++) {
        const r = {};
        results.twenty.rounds.push(r);
        try {
          r.ref = await measureDirectHundred(o);
          r.mux = await measureTwenty(o, twenty);
        } catch (e) {
          r.error = errText(e);
          results.twenty.error ??= r.error;
          process.stderr.write(`bench: 20x100 failed: ${r.error}\n`);
        }
      }
      try {
        results.twenty.defaultStartup = await probeDefaultStartup(o, twentyDefault);
      } catch (e) {
        results.twenty.defaultStartup = { error: errText(e) };
      }
    }

    // Start-up as a host feels it (bench/startup.mjs): with stdio, or alone with --only startup.
    if (o.only.includes('stdio') || o.startupOnly) {
      try {
        results.startup = await measureStartup(o, { phase, tmp, root: ROOT });
      } catch (e) {
        results.startup = { error: errText(e) };
        process.stderr.write(`bench: start-up failed: ${results.startup.error}\n`);
      }
    }

    if (o.surface) {
      try {
        results.surface = await measureSurface();
      } catch (e) {
        results.surface = { error: errText(e) };
        process.stderr.write(`bench: surface failed: ${results.surface.error}\n`);
      }
      if (results.surface.skipped) process.stderr.write(`bench: surface skipped: ${results.surface.skipped}\n`);
    }

    if (o.profile) {
      try {
        results.profile = await profileStdio(o, one);
      } catch (e) {
        results.profile = { error: errText(e) };
      }
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }

  results.meta.loadAfter = loadavg().map((x) => x.toFixed(2));
  results.sections = summarise(results, o);
  const md = renderMarkdown(results, o);
  writeFileSync(join(RESULTS, 'latest.json'), JSON.stringify(results, (k, v) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 2));
  writeFileSync(join(RESULTS, 'latest.md'), md + '\n');
  process.stdout.write(md + '\n');
  process.stderr.write(`bench: wrote ${join(RESULTS, 'latest.json')} and latest.md\n`);
  clearTimeout(watchdog);
}

function meta(o) {
  let git = 'unknown';
  try {
    git = execFileSync('git', ['describe', '--always', '--dirty'], { cwd: ROOT, timeout: 5000, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    /* not a git checkout */
  }
  const c = cpus();
  return {
    date: new Date().toISOString(),
    node: process.versions.node,
    cpus: c.length,
    cpuModel: c[0]?.model ?? '?',
    memGb: Math.round(totalmem() / 2 ** 30),
    loadBefore: loadavg().map((x) => x.toFixed(2)),
    git,
    quick: o.quick,
  };
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`bench: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  },
);
