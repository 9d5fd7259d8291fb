// End-to-end test helpers: spawn the built mcpmux binary (or any stdio MCP server) and talk to
// it through the official SDK Client or as a raw JSON-RPC peer. See test/fixtures.test.ts for
// usage examples against test/fixtures/upstream.mjs.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createServer as createNetServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { ClientCapabilities } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const MUX_BIN = path.join(ROOT, 'bin/mcpmux.js');
export const UPSTREAM_FIXTURE = path.join(ROOT, 'test/fixtures/upstream.mjs');
export const EVERYTHING = path.join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');

/** A stdio server entry, as in a mcpmux config's `mcpServers`. */
export interface ServerEntry {
  command: string;
  args: string[];
  env?: Record<string, string>;
  cwd?: string;
}

/** Options of test/fixtures/upstream.mjs (documented at the top of that file). */
export interface FixtureOptions {
  name?: string;
  tools?: number;
  prompts?: number;
  resources?: number;
  templates?: number;
  pageSize?: number;
  instructions?: string;
  capabilities?: Record<string, object | false>;
  protocolVersion?: string;
  specialTools?: boolean;
  events?: string;
}

/**
 * A server entry that runs the upstream fixture. Note: mcpmux expands `${...}` in config
 * strings, so keep `${` out of fixture options.
 */
export function fixture(opts: FixtureOptions = {}): ServerEntry {
  return { command: process.execPath, args: [UPSTREAM_FIXTURE, JSON.stringify(opts)] };
}

/** A server entry for @modelcontextprotocol/server-everything over stdio. */
export function everything(): ServerEntry {
  return { command: process.execPath, args: [EVERYTHING, 'stdio'] };
}

/**
 * Passthrough result schema: `client.request({method, params}, looseSchema)` keeps unknown
 * fields, unlike the typed helpers (listTools() etc. strip them).
 */
export const looseSchema = z.looseObject({});

// ---- temp files ---------------------------------------------------------------------------------

export function tempDir(): string {
  return mkdtempSync(path.join(os.tmpdir(), 'mcpmux-test-'));
}

/** A path (not created) named `name` inside a fresh temp dir, e.g. for an events file. */
export function tempFile(name = 'file'): string {
  return path.join(tempDir(), name);
}

/**
 * Writes `obj` as JSON into a fresh temp dir and returns the file's path. A config that does not
 * set `timeouts.startupWaitMs` gets it equal to startupMs: tests that list tools right after
 * initialize expect every upstream, and on a loaded 2-core CI machine a fixture may take longer
 * than the default 3 s wait to start. Tests of the wait itself set it.
 */
export async function writeConfig(obj: unknown, name = 'mcpmux.json'): Promise<string> {
  const file = tempFile(name);
  await writeFile(file, JSON.stringify(withFullStartupWait(obj), null, 2));
  return file;
}

function withFullStartupWait(obj: unknown): unknown {
  if (typeof obj !== 'object' || obj === null || !('mcpServers' in obj)) return obj;
  const timeouts = (obj as { timeouts?: unknown }).timeouts;
  if (timeouts !== undefined && (typeof timeouts !== 'object' || timeouts === null || Array.isArray(timeouts))) return obj;
  const t = (timeouts ?? {}) as Record<string, unknown>;
  if ('startupWaitMs' in t || (t.startupMs !== undefined && typeof t.startupMs !== 'number')) return obj;
  return { ...obj, timeouts: { ...t, startupWaitMs: (t.startupMs as number | undefined) ?? 10_000 } };
}

// ---- polling --------------------------------------------------------------------------------------

/**
 * How long a wait for an event or a condition may take by default before the test fails. Only
 * a failing test ever reaches it, so it is generous: on a loaded 2-core machine (a CI run beside
 * other work), 5 s was passed by waits for things that did happen.
 */
/** Runs `fn(i)` for i in [0, count) with at most `width` at a time (each worker takes the next index). */
export async function eachConcurrently(count: number, width: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < count) await fn(next++);
    }),
  );
}

export const WAIT_MS = 15_000;

/** Polls `fn` until it returns a truthy value (which is returned); rejects after timeoutMs. */
export async function waitFor<T>(
  fn: () => T | Promise<T>,
  { timeoutMs = WAIT_MS, intervalMs = 20, what = 'condition' }: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() >= deadline) throw new Error(`waitFor: ${what} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Every line of a fixture events file, parsed ([] if the file does not exist yet). */
export function readEvents(file: string): any[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

/** Waits until an event matching `pred` is in the file, and returns it. */
export function waitForEvent(file: string, pred: (e: any) => boolean, timeoutMs = WAIT_MS): Promise<any> {
  return waitFor(() => readEvents(file).find(pred), { timeoutMs, what: `event in ${file}` });
}

// ---- child bookkeeping ------------------------------------------------------------------------------

const open = new Set<{ close(): Promise<unknown> }>();

/** Closes everything started by this module and not yet closed (use in afterEach). */
export async function closeAll(): Promise<void> {
  await Promise.allSettled([...open].map((p) => p.close()));
}

/**
 * The first value `pick` returns for a JSON line on `stream` (other lines are skipped), from a
 * process that is starting. Rejects after `ms`, or if the process exits first; `log()` is the
 * text to show then (its stderr).
 */
export function awaitJsonLine<T>(
  stream: NodeJS.ReadableStream,
  exited: Promise<unknown>,
  pick: (value: any) => T | undefined,
  opts: { ms: number; what: string; log: () => string },
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${opts.what} within ${opts.ms / 1000} s:\n${opts.log()}`)), opts.ms);
    void exited.then((e) => (clearTimeout(timer), reject(new Error(`the process exited before ${opts.what} (${JSON.stringify(e)}):\n${opts.log()}`))));
    let buf = '';
    stream.setEncoding('utf8');
    stream.on('data', (c: string) => {
      buf += c;
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        let found: T | undefined;
        try {
          found = pick(JSON.parse(line));
        } catch {
          continue; // not a JSON line
        }
        if (found !== undefined) {
          clearTimeout(timer);
          resolve(found);
        }
      }
    });
  });
}

/** Live processes whose command line holds `marker` (Linux /proc; a zombie's is empty: it is gone). */
export function processesMentioning(marker: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(marker)) out.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

function childEnv(...extra: (Record<string, string> | undefined)[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const src of [process.env, ...extra]) {
    for (const [k, v] of Object.entries(src ?? {})) if (typeof v === 'string') env[k] = v;
  }
  return env;
}

// ---- SDK client peer ----------------------------------------------------------------------------------

export interface ClientOptions {
  clientCapabilities?: ClientCapabilities;
  env?: Record<string, string>;
  /** Extra argv appended after the config (startMux only). */
  args?: string[];
  /**
   * Called before connect: register request handlers (roots/list, sampling, elicitation)
   * here, because a peer may send requests right after initialization.
   */
  beforeConnect?: (client: Client) => void;
}

export interface Connected {
  client: Client;
  transport: StdioClientTransport;
  stderr(): string;
  /** Closes the client and waits (bounded) for the child to exit; kills it on overrun. */
  close(): Promise<void>;
}

/** Spawns `entry` with the SDK's StdioClientTransport and connects a Client named "test-host". */
export async function connectStdio(entry: ServerEntry, opts: ClientOptions = {}): Promise<Connected> {
  const transport = new StdioClientTransport({
    command: entry.command,
    args: entry.args,
    env: childEnv(entry.env, opts.env),
    ...(entry.cwd && { cwd: entry.cwd }),
    stderr: 'pipe',
  });
  let err = '';
  transport.stderr?.on('data', (c: Buffer) => (err += c.toString('utf8')));
  const client = new Client({ name: 'test-host', version: '0.0.0' }, { capabilities: opts.clientCapabilities ?? {} });
  opts.beforeConnect?.(client);
  let pid: number | null = null;
  const peer: Connected = {
    client,
    transport,
    stderr: () => err,
    async close() {
      open.delete(peer);
      pid ??= transport.pid;
      await client.close().catch(() => {}); // ends stdin, then SIGTERM/SIGKILL after 2 s each
      if (pid === null) return;
      const p = pid;
      await waitFor(() => !isAlive(p), { timeoutMs: 6000, what: `exit of pid ${p}` }).catch(() => {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          /* already gone */
        }
      });
    },
  };
  open.add(peer);
  try {
    await client.connect(transport);
    pid = transport.pid;
  } catch (e) {
    await peer.close();
    throw new Error(`connect to ${entry.command} ${entry.args.join(' ')} failed: ${(e as Error).message}\n--- stderr ---\n${err}`);
  }
  return peer;
}

function muxEntry(config: string, args: string[] = []): ServerEntry {
  return { command: process.execPath, args: [MUX_BIN, 'stdio', '--config', config, ...args] };
}

/** Runs `node bin/mcpmux.js stdio --config <file>` and connects an SDK client to it. */
export async function startMux(config: string | object, opts: ClientOptions = {}): Promise<Connected> {
  const file = typeof config === 'string' ? config : await writeConfig(config);
  return connectStdio(muxEntry(file, opts.args), opts);
}

// ---- raw JSON-RPC peer ----------------------------------------------------------------------------------

export interface RawPeer {
  child: ChildProcess;
  /** Every raw stdout line, in order (assert each parses as JSON-RPC). */
  lines: string[];
  /** Every stdout line that parsed as JSON. */
  messages: any[];
  /** Writes one line: an object as JSON, a string as-is (a newline is appended if missing). */
  send(msg: object | string): void;
  /** The next not-yet-consumed parsed message matching `pred` (earlier ones included). */
  next(pred?: (m: any) => boolean, timeoutMs?: number): Promise<any>;
  /** Sends a request with a fresh numeric id (from 1) and resolves with the whole response. */
  request(method: string, params?: object, timeoutMs?: number): Promise<any>;
  /** initialize + notifications/initialized; resolves with the initialize response. */
  initialize(params?: object): Promise<any>;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Ends stdin and waits for exit (bounded); kills with SIGKILL on overrun. */
  close(timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Spawns mcpmux (`target` = config path) or any stdio server (`target` = ServerEntry, e.g.
 * fixture({...})) and exposes its stdout as JSON-RPC lines.
 */
export function startRawMux(target: string | ServerEntry, opts: { env?: Record<string, string>; args?: string[] } = {}): RawPeer {
  const entry = typeof target === 'string' ? muxEntry(target, opts.args) : target;
  const child = spawn(entry.command, entry.args, { env: childEnv(entry.env, opts.env), cwd: entry.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const messages: any[] = [];
  const unconsumed: any[] = [];
  const waiters: { pred: (m: any) => boolean; resolve: (m: any) => void; reject: (e: Error) => void }[] = [];
  let err = '';
  let buf = '';
  let nextId = 1;
  let exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;

  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  child.stdout!.setEncoding('utf8').on('data', (c: string) => {
    buf += c;
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).replace(/\r$/, '');
      buf = buf.slice(i + 1);
      lines.push(line);
      let m: any;
      try {
        m = JSON.parse(line);
      } catch {
        continue;
      }
      messages.push(m);
      const w = waiters.findIndex((x) => x.pred(m));
      if (w >= 0) waiters.splice(w, 1)[0]!.resolve(m);
      else unconsumed.push(m);
    }
  });
  child.stdin!.on('error', () => {}); // EPIPE after the child died surfaces via `exited`
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      exitInfo = { code, signal };
      for (const w of waiters.splice(0)) w.reject(new Error(`process exited (${code ?? signal}) while waiting; stderr:\n${err}`));
      resolve(exitInfo);
    });
  });

  const peer: RawPeer = {
    child,
    lines,
    messages,
    send(msg) {
      const line = typeof msg === 'string' ? msg : JSON.stringify(msg);
      child.stdin!.write(line.endsWith('\n') ? line : line + '\n');
    },
    next(pred = () => true, timeoutMs = WAIT_MS) {
      const i = unconsumed.findIndex(pred);
      if (i >= 0) return Promise.resolve(unconsumed.splice(i, 1)[0]);
      if (exitInfo) return Promise.reject(new Error(`process already exited; stderr:\n${err}`));
      return new Promise((resolve, reject) => {
        const w = {
          pred,
          resolve: (m: any) => (clearTimeout(timer), resolve(m)),
          reject: (e: Error) => (clearTimeout(timer), reject(e)),
        };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(w), 1);
          reject(new Error(`next(): no matching message within ${timeoutMs} ms; last lines:\n${lines.slice(-5).join('\n')}\nstderr:\n${err}`));
        }, timeoutMs);
        waiters.push(w);
      });
    },
    request(method, params, timeoutMs = WAIT_MS) {
      const id = nextId++;
      peer.send({ jsonrpc: '2.0', id, method, ...(params && { params }) });
      return peer.next((m) => m.id === id && !('method' in m), timeoutMs);
    },
    async initialize(params) {
      const res = await peer.request(
        'initialize',
        params ?? { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw-test', version: '0.0.0' } },
      );
      peer.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      return res;
    },
    stderr: () => err,
    exited,
    async close(timeoutMs = 5000) {
      open.delete(peer);
      if (exitInfo) return exitInfo;
      child.stdin!.end();
      return exitWithin(child, exited, timeoutMs);
    },
  };
  open.add(peer);
  return peer;
}

/** Alias of startRawMux for non-mux targets, e.g. `startRaw(fixture({name: 'a'}))`. */
export const startRaw = (entry: ServerEntry, opts?: { env?: Record<string, string> }) => startRawMux(entry, opts);

/** Waits for a child to exit, killing it with SIGKILL if it has not within `timeoutMs`. */
export async function exitWithin<T>(child: { kill(signal: NodeJS.Signals): unknown }, exited: Promise<T>, timeoutMs: number): Promise<T> {
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  try {
    return await exited;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs `node bench/run.mjs ...args` (the benchmark harness, or another of bench/'s scripts) to
 * its exit, SIGKILL past `timeoutMs`; resolves with its exit code and everything it wrote.
 */
export async function runBench(args: string[], timeoutMs: number, script = 'bench/run.mjs'): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [path.join(ROOT, script), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const code = await exitWithin(child, exited, timeoutMs);
  return { code, stdout, stderr };
}

/** A port nothing listens on right now (bound, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createNetServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/**
 * Runs `node bin/mcpmux.js ...args` to its end (SIGKILL past `timeoutMs`) without blocking this
 * process. Use it instead of spawnSync in any test that also holds HTTP connections: spawnSync
 * stops the event loop, so a keep-alive socket the daemon closed meanwhile is not seen closing,
 * and the next fetch reuses it and fails with "other side closed" (seen on a loaded machine).
 */
export function runMux(args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [MUX_BIN, ...args], { env: { ...process.env, ...opts.env }, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
  return new Promise((resolve, reject) => {
    child.once('error', (err) => (clearTimeout(timer), reject(err)));
    child.once('close', (status) => (clearTimeout(timer), resolve({ status, stdout, stderr })));
  });
}
