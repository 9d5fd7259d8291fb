// Seeing the daemon: `GET /status` (and `POST /status/restart?server=NAME`) on the operator
// routes, and the `mcpmux status` / `mcpmux restart` commands that read and use them.
// On the main listener both need a token when `listen.auth.tokens` is set (they name the
// config's servers and can restart them); on an admin port they are open, like /metrics.

import type { Router } from '../router/router.js';
import type { OperatorRoutes } from '../transport/http/admin.js';
import { HttpRpcCode, sendError, sendJson } from '../transport/http/respond.js';
import { queryOf } from '../transport/http/url.js';
import { VERSION } from '../version.js';
import type { ReloadRecord } from './reload.js';
import { UsageError } from './runtime.js';

const DEFAULT_BASE = 'http://127.0.0.1:7330';

/** What /status says of the daemon beyond the router: the config file and its last reload. */
export interface DaemonInfo {
  configPath: string | undefined;
  lastReload(): ReloadRecord | undefined;
}

export function addStatusRoutes(routes: OperatorRoutes, router: Router, info: DaemonInfo): void {
  const startedAt = Date.now();
  routes.set(
    '/status',
    (req, res) => {
      if (req.method !== 'GET') return sendError(res, 405, HttpRpcCode.Transport, 'Method Not Allowed', { allow: 'GET' });
      sendJson(res, 200, {
        version: VERSION,
        pid: process.pid,
        uptimeS: Math.round((Date.now() - startedAt) / 1000),
        config: { path: info.configPath ?? null },
        lastReload: info.lastReload() ?? null,
        ...router.status(),
      });
    },
    { needsToken: true },
  );
  routes.set(
    '/status/restart',
    (req, res) => {
      if (req.method !== 'POST') return sendError(res, 405, HttpRpcCode.Transport, 'Method Not Allowed', { allow: 'POST' });
      const server = queryOf(req).get('server');
      if (!server) return sendError(res, 400, HttpRpcCode.Transport, 'Bad Request: ?server=NAME is required');
      if (!router.restart(server)) return sendError(res, 404, HttpRpcCode.Transport, `Not Found: no shared upstream named ${JSON.stringify(server)}`);
      sendJson(res, 202, { server, restarting: true });
    },
    { needsToken: true },
  );
}

export interface StatusOptions {
  url?: string;
  json?: boolean;
}

function headers(): Record<string, string> {
  const token = process.env.MCPMUX_TOKEN;
  return token ? { authorization: `Bearer ${token}` } : {};
}

async function call(base: string, path: string, init: RequestInit = {}): Promise<Response> {
  try {
    return await fetch(new URL(path, base.endsWith('/') ? base : `${base}/`), { ...init, headers: { ...headers(), ...(init.headers as object) }, signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    throw new UsageError(`cannot reach the daemon at ${base}: ${(err as Error).cause ? String((err as Error & { cause: Error }).cause.message) : (err as Error).message}`);
  }
}

/** `mcpmux status [--json] [--url BASE]`. */
export async function runStatus(opts: StatusOptions): Promise<number> {
  const base = opts.url ?? DEFAULT_BASE;
  const res = await call(base, 'status');
  const body = await res.text();
  if (!res.ok) {
    process.stderr.write(`mcpmux status: ${base} answered ${res.status}: ${body.slice(0, 300)}\n`);
    return 1;
  }
  if (opts.json) {
    process.stdout.write(body.endsWith('\n') ? body : `${body}\n`);
    return 0;
  }
  const s = JSON.parse(body) as {
    version: string;
    pid: number;
    uptimeS: number;
    config: { path: string | null };
    lastReload: ReloadRecord | null;
    upstreams: { name: string; transport: string; state: string; gaveUp?: boolean; pid?: number; restarts: number; inFlight: number; tools: number; prompts: number; resources: number; lastError?: string }[];
    sessions: { total: number; byTransport: Record<string, number>; byClient: Record<string, number> };
  };
  const out: string[] = [];
  out.push(`mcpmux ${s.version}, pid ${s.pid}, up ${s.uptimeS} s, config ${s.config.path ?? '(none)'}`);
  const r = s.lastReload;
  if (r) out.push(`last reload: ${r.result} at ${r.at} (${r.trigger})${r.error ? `: ${r.error.split('\n').join(' ')}` : ''}`);
  const kv = (o: Record<string, number>) => Object.entries(o).map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
  out.push(`sessions: ${s.sessions.total} (${kv(s.sessions.byTransport)}; clients: ${kv(s.sessions.byClient)})`);
  out.push('');
  const rows = [['server', 'state', 'transport', 'pid', 'restarts', 'in flight', 'tools', 'prompts', 'resources', 'last error']];
  for (const u of s.upstreams) {
    rows.push([u.name, u.gaveUp ? `${u.state} (given up)` : u.state, u.transport, u.pid?.toString() ?? '', String(u.restarts), String(u.inFlight), String(u.tools), String(u.prompts), String(u.resources), u.lastError ?? '']);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const r of rows) out.push(r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd());
  process.stdout.write(out.join('\n') + '\n');
  return 0;
}

/** `mcpmux restart NAME [--url BASE]`. */
export async function runRestart(name: string, opts: { url?: string }): Promise<number> {
  const base = opts.url ?? DEFAULT_BASE;
  const res = await call(base, `status/restart?server=${encodeURIComponent(name)}`, { method: 'POST' });
  const body = await res.text();
  if (res.status !== 202) {
    process.stderr.write(`mcpmux restart: ${base} answered ${res.status}: ${body.slice(0, 300)}\n`);
    return 1;
  }
  process.stdout.write(`mcpmux restart: ${name} is restarting\n`);
  return 0;
}
