// A real redis-server (Debian's package, installed by .ci/run) on a free loopback port, for the
// tests of the shared store. Nothing is written to disk; every server a file starts is stopped
// after it (stopAllRedis in afterAll).

import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { exitWithin, freePort, waitFor } from './harness.js';

export const REDIS_BIN = '/usr/bin/redis-server';

export interface RedisServer {
  port: number;
  url: string;
  child: ChildProcess;
  /** Runs one redis-cli command against it (for tests that look inside); resolves to its output. */
  cli(...args: string[]): Promise<string>;
  /** SIGKILL: Redis gone at once, as in a crash. */
  kill(): Promise<void>;
  /** Stops it (SIGTERM). */
  stop(): Promise<void>;
  /** Starts it again on the same port (after kill or stop). */
  restart(): Promise<void>;
}

const servers = new Set<RedisServer>();

/** Starts redis-server on a free port (or `port`) and resolves once it accepts connections. */
export async function startRedis(opts: { port?: number; password?: string } = {}): Promise<RedisServer> {
  const port = opts.port ?? (await freePort());
  let child = await launch(port, opts.password);
  const auth = opts.password ? ['-a', opts.password, '--no-auth-warning'] : [];
  const r: RedisServer = {
    port,
    url: opts.password ? `redis://:${encodeURIComponent(opts.password)}@127.0.0.1:${port}/0` : `redis://127.0.0.1:${port}/0`,
    get child() {
      return child;
    },
    cli: (...args) => redisCli(port, [...auth, ...args]),
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exitWithin(child, exited(child), 5_000);
    },
    async stop() {
      servers.delete(r);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exitWithin(child, exited(child), 5_000);
    },
    async restart() {
      await r.kill();
      servers.add(r);
      child = await launch(port, opts.password);
    },
  };
  servers.add(r);
  return r;
}

function exited(child: ChildProcess): Promise<unknown> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', resolve));
}

async function launch(port: number, password?: string): Promise<ChildProcess> {
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning'];
  if (password) args.push('--requirepass', password);
  const child = spawn(REDIS_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (out += c));
  const failed = new Promise<never>((_, reject) => child.once('error', reject));
  // Ready when it answers PING (its own "Ready to accept" line is not printed at loglevel warning).
  await Promise.race([
    failed,
    waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`redis-server exited (${child.exitCode}): ${out}`);
        const ping = await redisCli(port, [...(password ? ['-a', password, '--no-auth-warning'] : []), 'PING']).catch(() => '');
        return ping === 'PONG' ? true : undefined;
      },
      { what: `redis-server on port ${port}` },
    ),
  ]);
  return child;
}

const run = promisify(execFile);

/** redis-cli (async: a test holding HTTP connections must not stop its event loop). */
async function redisCli(port: number, args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8', timeout: 5_000 });
  return stdout.trim();
}

/** Stops every Redis still running (for afterAll). */
export async function stopAllRedis(): Promise<void> {
  await Promise.allSettled([...servers].map((s) => s.stop()));
}
