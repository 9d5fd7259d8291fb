// A real HAProxy (Debian's package, installed by .ci/run) in front of a test's daemons, run from
// the file users copy: contrib/haproxy/haproxy.cfg with only its addresses changed (the
// frontend's bind, the `server` lines, the stats socket's path). Everything else, the
// stickiness, health checks, retries and timeouts, is what ships. Every HAProxy a file starts
// is stopped after it (stopAllHaproxy in afterAll).

import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import { exitWithin, freePort, ROOT, tempDir, waitFor } from './harness.js';

export const HAPROXY_BIN = '/usr/sbin/haproxy';
export const HAPROXY_CFG = path.join(ROOT, 'contrib/haproxy/haproxy.cfg');
/** The shipped file's backend, whose servers a test replaces. */
export const BACKEND = 'mcpmux';

/** One row of `show stat` for a server of the backend. */
export interface ServerStat {
  /** `UP`, `DOWN`, `UP 1/2`, `DOWN 1/2`, `MAINT`, `NOLB`... as HAProxy says it. */
  status: string;
  /** Sessions (requests, in HTTP mode) it has sent to this server so far. */
  total: number;
}

export interface Haproxy {
  port: number;
  base: string;
  /** The frontend's /mcp. */
  url: string;
  child: ChildProcess;
  /** What it printed (its log). */
  output(): string;
  /** The backend's servers, by the names the test gave them. */
  servers(): Promise<Map<string, ServerStat>>;
  /** A command on its stats socket (e.g. `show table mcpmux`); resolves to the answer. */
  command(line: string): Promise<string>;
  /** Waits until `pred` holds for server `name`'s stat (WAIT_MS bound unless given). */
  waitServer(name: string, pred: (s: ServerStat) => boolean, timeoutMs?: number): Promise<ServerStat>;
  stop(): Promise<void>;
}

const running = new Set<Haproxy>();

/**
 * The shipped config with the test's addresses: the frontend binds `127.0.0.1:port`, the
 * backend's servers are `backends` (name -> port on 127.0.0.1) in place of the shipped ones,
 * and the stats socket is `socket`. Throws if the shipped file no longer has what it replaces.
 */
export function testConfig(port: number, backends: Record<string, number>, socket: string): string {
  const lines = readFileSync(HAPROXY_CFG, 'utf8').split('\n');
  const out: string[] = [];
  let section = '';
  let bound = false;
  let servers = false;
  let stats = false;
  for (const line of lines) {
    const t = line.trim();
    if (/^\S/.test(line) && t !== '' && !t.startsWith('#')) section = t;
    if (/^bind\s/.test(t) && section.startsWith('frontend ')) {
      out.push(`    bind 127.0.0.1:${port}`);
      bound = true;
    } else if (/^stats socket\s/.test(t)) {
      out.push(line.replace(/stats socket \S+/, `stats socket ${socket}`));
      stats = true;
    } else if (/^server\s/.test(t) && section === `backend ${BACKEND}`) {
      if (!servers) for (const [name, p] of Object.entries(backends)) out.push(`    server ${name} 127.0.0.1:${p}`);
      servers = true;
    } else {
      out.push(line);
    }
  }
  if (!bound || !servers || !stats) throw new Error(`${HAPROXY_CFG}: expected a frontend bind, a stats socket and server lines in backend ${BACKEND}`);
  return out.join('\n');
}

/**
 * Starts HAProxy (foreground, -db) in front of `backends` and resolves once it listens and
 * every server is UP (their /readyz answered 200 twice), or, with `up: false`, once it listens.
 */
export async function startHaproxy(backends: Record<string, number>, opts: { up?: boolean } = {}): Promise<Haproxy> {
  const dir = tempDir();
  const socket = path.join(dir, 'haproxy.sock');
  const port = await freePort();
  const file = path.join(dir, 'haproxy.cfg');
  writeFileSync(file, testConfig(port, backends, socket));
  const child = spawn(HAPROXY_BIN, ['-db', '-f', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (out += c));
  const exited = new Promise<unknown>((resolve) => child.once('exit', resolve));
  const command = (line: string): Promise<string> => statsCommand(socket, line);
  const servers = async (): Promise<Map<string, ServerStat>> => parseStat(await command('show stat'));
  const h: Haproxy = {
    port,
    base: `http://127.0.0.1:${port}`,
    url: `http://127.0.0.1:${port}/mcp`,
    child,
    output: () => out,
    servers,
    command,
    waitServer: (name, pred, timeoutMs) =>
      waitFor(
        async () => {
          const s = (await servers()).get(name);
          return s && pred(s) ? s : undefined;
        },
        { what: `haproxy server ${name}`, intervalMs: 50, ...(timeoutMs !== undefined && { timeoutMs }) },
      ),
    async stop() {
      running.delete(h);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exitWithin(child, exited, 5_000);
    },
  };
  running.add(h);
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`haproxy exited (${child.exitCode}):\n${out}`);
      const stat = await servers().catch(() => undefined);
      if (!stat) return undefined;
      return opts.up === false || Object.keys(backends).every((name) => stat.get(name)?.status === 'UP');
    },
    { what: `haproxy listening with every server UP:\n${out}`, intervalMs: 50 },
  );
  return h;
}

/** One command on HAProxy's stats socket; the answer is everything it writes before closing. */
function statsCommand(socket: string, line: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(socket);
    let text = '';
    s.setEncoding('utf8');
    s.on('data', (c: string) => (text += c));
    s.on('end', () => resolve(text));
    s.on('error', reject);
    s.setTimeout(5_000, () => s.destroy(new Error(`haproxy stats socket: no answer to ${line}`)));
    s.write(`${line}\n`);
  });
}

/** `show stat` (CSV, a `# ` header) -> the backend's servers. */
function parseStat(csv: string): Map<string, ServerStat> {
  const [head, ...rows] = csv.split('\n').filter((l) => l !== '');
  const cols = head!.replace(/^# /, '').split(',');
  const at = (name: string): number => cols.indexOf(name);
  const out = new Map<string, ServerStat>();
  for (const row of rows) {
    const f = row.split(',');
    if (f[at('pxname')] !== BACKEND || f[at('svname')] === 'BACKEND') continue;
    out.set(f[at('svname')]!, { status: f[at('status')]!, total: Number(f[at('stot')]) });
  }
  return out;
}

/** Stops every HAProxy still running (for afterAll). */
export async function stopAllHaproxy(): Promise<void> {
  await Promise.allSettled([...running].map((h) => h.stop()));
}
