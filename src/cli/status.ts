// Seeing the daemon: `GET /status` (and `POST /status/restart?server=NAME`) on the operator
// routes, and the `mcpmux status` / `mcpmux restart` commands that read and use them; the web
// console (src/console/) reads and uses the same routes, and the few it adds here:
// `POST /status/reload`, `POST /status/approve?server=S&tool=T` and `GET /status/audit`.
// All need a token when `listen.auth.tokens` is set, on the main listener and on an admin port
// alike (they name the config's servers, pids and errors, and change them). Restart, reload and
// approve are operator actions: only a client marked `"admin": true` may (403 otherwise), and
// every attempt by a known client is published (mcpmux:operator:action), so the audit log
// records it; reading the audit lines is for admins too.

import { publishOperatorAction, type OperatorActionEvent } from '../observe/events.js';
import { printable } from '../observe/log-format.js';
import { AUDIT_RING_LINES } from '../observe/audit-ring.js';
import type { ClusterStatus } from '../cluster/registry.js';
import type { Router, RouterStatus } from '../router/router.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HeldTool } from '../governance/pins.js';
import { RateLimiter } from '../governance/rate-limit.js';
import type { SharedRateLimiter } from '../governance/shared-rate-limit.js';
import { OPERATOR_HEADER, type Caller, type OperatorRoutes } from '../transport/http/admin.js';
import { HttpRpcCode, sendError, sendJson } from '../transport/http/respond.js';
import { queryOf } from '../transport/http/url.js';
import { VERSION } from '../version.js';
import type { Reloader, ReloadRecord } from './reload.js';
import type { Observers, Runtime } from './runtime.js';
import { UsageError } from './usage-error.js';

const DEFAULT_BASE = 'http://127.0.0.1:7330';
/** The audit lines /status/audit gives unless `?last=` says (what the console shows). */
const AUDIT_LAST = 50;

/** What /status says of the daemon beyond the router: the config file and its last reload. */
export interface DaemonInfo {
  configPath: string | undefined;
  lastReload(): ReloadRecord | undefined;
  /** Of the sessions open, how many are idle now (serve's HTTP sessions; none under stdio). */
  idleSessions?(): number;
  /** In a cluster: this daemon and the others as Redis knows them (cluster/registry.ts). */
  cluster?(): Promise<ClusterStatus>;
  /** Tool pinning: what it holds now, and approving it (POST /status/approve). */
  pins?: { held(): HeldTool[]; approve(pairs: { server: string; tool: string; fingerprint?: string }[]): Promise<{ server: string; tool: string }[]> };
  /** The rate limiter in force: its buckets near their limit go into /status. */
  limiter?(): RateLimiter | SharedRateLimiter;
  /** Reloads the config now, as SIGHUP does (POST /status/reload); resolves to that reload's record. */
  reload?(): Promise<ReloadRecord | undefined>;
  /** The last `last` audit lines as written (GET /status/audit); `on`: whether the audit log is on at all. */
  audit?(last: number): { on: boolean; lines: string[] };
}

export function addStatusRoutes(routes: OperatorRoutes, router: Router, info: DaemonInfo): void {
  const startedAt = Date.now();
  routes.set(
    '/status',
    async (req, res, caller) => {
      if (req.method !== 'GET') return sendError(res, 405, HttpRpcCode.Transport, 'Method Not Allowed', { allow: 'GET' });
      // Never rejects: a Redis that is down is said inside the section.
      const cluster = await info.cluster?.();
      const limiter = info.limiter?.();
      // A client that is no admin sees its own sessions and buckets only: the others' name
      // clients (OIDC persons' claims among them), their toolsets and the tools they call.
      const own = caller.admin ? undefined : (caller.client ?? '');
      sendJson(res, 200, {
        version: VERSION,
        pid: process.pid,
        uptimeS: Math.round((Date.now() - startedAt) / 1000),
        config: { path: info.configPath ?? null },
        lastReload: info.lastReload() ?? null,
        ...withIdle(router.status(), info.idleSessions?.() ?? 0),
        // The web console's additions: sessions one by one, held tools, buckets near their limit.
        sessionList: router.sessionList(undefined, own),
        ...(info.pins && { held: info.pins.held() }),
        ...(limiter && { rateLimits: limiter instanceof RateLimiter ? { shared: false, near: limiter.nearLimit(undefined, undefined, own) } : { shared: true, near: [] } }),
        ...(cluster && { cluster }),
      });
    },
    { needsToken: true },
  );
  routes.set(
    '/status/restart',
    (req, res, caller) => {
      if (req.method !== 'POST') return sendError(res, 405, HttpRpcCode.Transport, 'Method Not Allowed', { allow: 'POST' });
      const server = queryOf(req).get('server') ?? undefined;
      const audit = auditor('restart', req, caller, server);
      // Before anything that would tell a non-operator which servers exist.
      if (!admitted(res, caller, audit, 'restart upstreams')) return;
      if (!server) {
        audit('error', 400);
        return sendError(res, 400, HttpRpcCode.Transport, 'Bad Request: ?server=NAME is required');
      }
      if (!router.restart(server)) {
        audit('error', 404);
        return sendError(res, 404, HttpRpcCode.Transport, `Not Found: no shared upstream named ${JSON.stringify(server)}`);
      }
      audit('ok', 202);
      sendJson(res, 202, { server, restarting: true });
    },
    { needsToken: true, action: true },
  );
  const { pins, reload, audit: auditLines } = info;
  if (pins) {
    // What `mcpmux tools --approve server/tool` does, for a tool held now (the console's button).
    routes.set(
      '/status/approve',
      async (req, res, caller) => {
        if (req.method !== 'POST') return sendError(res, 405, HttpRpcCode.Transport, 'Method Not Allowed', { allow: 'POST' });
        const q = queryOf(req);
        const server = q.get('server') ?? undefined;
        const tool = q.get('tool') ?? undefined;
        const audit = auditor('approve', req, caller, server, tool);
        if (!admitted(res, caller, audit, 'approve held tools')) return;
        if (!server || !tool) {
          audit('error', 400);
          return sendError(res, 400, HttpRpcCode.Transport, "Bad Request: ?server=NAME&tool=NAME are required (the tool's own name on that server)");
        }
        const held = pins.held().find((h) => h.server === server && h.tool === tool);
        if (!held) {
          audit('error', 404);
          return sendError(res, 404, HttpRpcCode.Transport, `Not Found: no held tool ${JSON.stringify(tool)} of ${JSON.stringify(server)}`);
        }
        // `fingerprint`: the definition the operator saw (the console sends it, from /status's
        // `held`). Changed again since: not approved, look again.
        const fingerprint = q.get('fingerprint') ?? undefined;
        if (fingerprint !== undefined && fingerprint !== held.fingerprint) {
          audit('error', 409);
          return sendError(res, 409, HttpRpcCode.Transport, `Conflict: ${server}/${tool} changed again since it was shown; look at its definition again before approving`);
        }
        try {
          const done = await pins.approve([{ server, tool, fingerprint: held.fingerprint }]);
          if (done.length === 0) {
            audit('error', 409);
            return sendError(res, 409, HttpRpcCode.Transport, `Conflict: ${server}/${tool} changed while it was being approved; look at its definition again`);
          }
        } catch (err) {
          audit('error', 503);
          return sendError(res, 503, HttpRpcCode.Transport, `Service Unavailable: cannot record the approval: ${(err as Error).message}`);
        }
        audit('ok', 200);
        sendJson(res, 200, { server, tool, approved: true });
      },
      { needsToken: true, action: true },
    );
  }
  if (reload) {
    // What SIGHUP does; answered once the reload is applied or refused, with its record.
    routes.set(
      '/status/reload',
      async (req, res, caller) => {
        if (req.method !== 'POST') return sendError(res, 405, HttpRpcCode.Transport, 'Method Not Allowed', { allow: 'POST' });
        const audit = auditor('reload', req, caller, undefined);
        if (!admitted(res, caller, audit, 'reload the config')) return;
        const record = await reload();
        const applied = record?.result === 'applied';
        audit(applied ? 'ok' : 'error', 200);
        sendJson(res, 200, record ?? { result: 'refused', error: 'no reload took place' });
      },
      { needsToken: true, action: true },
    );
  }
  if (auditLines) {
    // The last audit lines (`?last=N`, 50 unless said, 200 at most), as the file got them. For
    // an admin a token names only: they name every client's calls (with full session ids, and
    // argument values under audit.arguments "full") and the file is 0600. Without tokens
    // "admin" is whoever reaches the port, which a restart may be, not a reading of that file.
    routes.set(
      '/status/audit',
      (req, res, caller) => {
        if (req.method !== 'GET') return sendError(res, 405, HttpRpcCode.Transport, 'Method Not Allowed', { allow: 'GET' });
        if (caller.client === undefined) return sendError(res, 403, HttpRpcCode.Transport, 'Forbidden: audit lines need an admin token (set listen.auth.tokens with a client marked "admin": true); without tokens they are in the audit file only');
        if (!caller.admin) return sendError(res, 403, HttpRpcCode.Transport, `Forbidden: audit lines need an admin token: client ${JSON.stringify(caller.client)} may not read the audit log (only a client with "admin": true in listen.auth.tokens may)`);
        const asked = queryOf(req).get('last');
        const last = asked === null ? AUDIT_LAST : Number(asked);
        if (!Number.isInteger(last) || last < 0) return sendError(res, 400, HttpRpcCode.Transport, `Bad Request: ?last= is a count of lines (0 to ${AUDIT_RING_LINES})`);
        sendJson(res, 200, auditLines(Math.min(last, AUDIT_RING_LINES)));
      },
      { needsToken: true, action: true },
    );
  }
}

/** What a long-running command's /status adds for the console: pins, buckets, reload, audit lines. */
export function operatorInfo(runtime: Runtime, observers: Observers, reloader: Reloader): Pick<DaemonInfo, 'pins' | 'limiter' | 'reload' | 'audit'> {
  return {
    pins: runtime.pins,
    limiter: () => runtime.limiter,
    reload: () => reloader.reload('http').then(() => reloader.last),
    audit: (last) => ({ on: observers.audit !== undefined, lines: observers.auditRing.snapshot(last) }),
  };
}

/** Publishes an operator action's outcome (the audit log's line for it). */
function auditor(action: OperatorActionEvent['action'], req: IncomingMessage, caller: Caller, target: string | undefined, tool?: string): Audit {
  return (outcome, status) => publishOperatorAction({ action, client: caller.client, target, ...(tool !== undefined && { tool }), outcome, status, remote: req.socket.remoteAddress });
}

type Audit = (outcome: OperatorActionEvent['outcome'], status: number) => void;

/** Whether the caller may take operator actions; else answers 403 (audited) and returns false. */
function admitted(res: ServerResponse, caller: Caller, audit: Audit, what: string): boolean {
  if (caller.admin) return true;
  audit('denied', 403);
  sendError(res, 403, HttpRpcCode.Transport, `Forbidden: client ${JSON.stringify(caller.client)} may not ${what} (only a client with "admin": true in listen.auth.tokens may)`);
  return false;
}

/** The router's session counts, and how many of them are idle (`idle` <= `total`). */
function withIdle(status: RouterStatus, idle: number): RouterStatus & { sessions: { idle: number } } {
  return { ...status, sessions: { ...status.sessions, idle } };
}

/** Where `mcpmux status`, `mcpmux restart` and `mcpmux connect` find the bearer token (status and restart: unless `--token-env` names another variable). */
export const TOKEN_ENV = 'MCPMUX_TOKEN';

export interface StatusOptions {
  url?: string;
  json?: boolean;
  /** The environment variable holding the token (never the token itself: a command line is public). */
  tokenEnv?: string;
}

function headers(tokenEnv = TOKEN_ENV): Record<string, string> {
  const token = process.env[tokenEnv];
  if (token === undefined && tokenEnv !== TOKEN_ENV) throw new UsageError(`--token-env ${tokenEnv}: that environment variable is not set`);
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** What to say beside a refusal, so the fix is in the message. */
function hint(status: number, tokenEnv = TOKEN_ENV): string {
  if (status === 401) {
    const which = tokenEnv === TOKEN_ENV ? `$${TOKEN_ENV} (or the variable --token-env names)` : `$${tokenEnv}`;
    return process.env[tokenEnv]
      ? ` (the token in $${tokenEnv} is not one of listen.auth.tokens: set ${which} to one that is)`
      : ` (the daemon wants a token: set ${which} to a token from listen.auth.tokens)`;
  }
  if (status === 403) return ' (this token\'s client is not marked "admin": true in listen.auth.tokens)';
  if (status === 404) return ' (with listen.adminPort set, these routes are on the admin port: --url http://127.0.0.1:<adminPort>)';
  return '';
}

/**
 * The daemon's answer, or undefined (said on stderr) when nothing answered: the command then
 * exits 1, as for any failure; 2 is for a command line that is wrong.
 */
async function call(command: string, base: string, path: string, init: RequestInit = {}, tokenEnv?: string): Promise<Response | undefined> {
  const auth = headers(tokenEnv);
  let url: URL;
  try {
    url = new URL(path, base.endsWith('/') ? base : `${base}/`);
  } catch {
    throw new UsageError(`--url ${base}: not a URL (e.g. http://127.0.0.1:7330)`);
  }
  try {
    return await fetch(url, { ...init, headers: { ...auth, ...(init.headers as object) }, signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    const why = (err as Error).cause ? String((err as Error & { cause: Error }).cause.message) : (err as Error).message;
    process.stderr.write(`mcpmux ${command}: cannot reach the daemon at ${base}: ${why} (is \`mcpmux serve\` running there? --url names another address)\n`);
    return undefined;
  }
}

/** `mcpmux status [--json] [--url BASE]`. */
export async function runStatus(opts: StatusOptions): Promise<number> {
  const base = opts.url ?? DEFAULT_BASE;
  const res = await call('status', base, 'status', {}, opts.tokenEnv);
  if (!res) return 1;
  const body = await res.text();
  if (!res.ok) {
    process.stderr.write(`mcpmux status: ${base} answered ${res.status}: ${body.slice(0, 300)}${hint(res.status, opts.tokenEnv)}\n`);
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
    // null: no host has asked that server for the list yet (shown as "-", with a note).
    upstreams: { name: string; client?: string; transport: string; state: string; gaveUp?: boolean; pid?: number; restarts: number; inFlight: number; tools: number | null; prompts: number | null; resources: number | null; lastError?: string; stderr?: string[]; unavailable?: { missing: string[]; reason: string } }[];
    sessions: { total: number; byTransport: Record<string, number>; byClient: Record<string, number>; idle?: number };
    surface?: { mode: string; sessions: { client: string; toolset: string | null; mode: string; reason: string | null; tools: number | null; tokens: number | null; sessions: number }[] };
    cluster?: ClusterStatus;
  };
  const out: string[] = [];
  out.push(`mcpmux ${s.version}, pid ${s.pid}, up ${s.uptimeS} s, config ${s.config.path ?? '(none)'}`);
  const r = s.lastReload;
  if (r) out.push(`last reload: ${r.result} at ${r.at} (${r.trigger})${r.error ? `: ${r.error.split('\n').join(' ')}` : ''}`);
  const kv = (o: Record<string, number>) => Object.entries(o).map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
  out.push(`sessions: ${s.sessions.total} (${kv(s.sessions.byTransport)}; clients: ${kv(s.sessions.byClient)})${s.sessions.idle ? `, ${s.sessions.idle} idle` : ''}`);
  // Which tool surface each kind of session got, and why (a host's name, the size of its list).
  if (s.surface) {
    out.push(`tool surface: mode ${s.surface.mode}`);
    for (const g of s.surface.sessions) {
      const who = `${g.client}${g.toolset ? ` (toolset ${g.toolset})` : ''}`;
      out.push(`  ${g.sessions} session${g.sessions === 1 ? '' : 's'} of ${who}: ${g.mode}${g.reason ? `, ${printable(g.reason)}` : ''}`);
    }
  }
  if (s.cluster) out.push(...clusterLines(s.cluster));
  out.push('');
  const rows = [['server', 'state', 'transport', 'pid', 'restarts', 'in flight', 'tools', 'prompts', 'resources', 'last error']];
  for (const u of s.upstreams) {
    // A perClient server has a connection (and a state: ready, needs-login) per host client.
    rows.push([u.client === undefined ? u.name : `${u.name} (client ${printable(u.client)})`, u.gaveUp ? `${u.state} (given up)` : u.state, u.transport, u.pid?.toString() ?? '', String(u.restarts), String(u.inFlight), count(u.tools), count(u.prompts), count(u.resources), printable(u.lastError ?? u.unavailable?.reason ?? '')]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const r of rows) out.push(r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd());
  // A failed server's own last stderr lines, under the table: usually the real reason.
  for (const u of s.upstreams) {
    if (!u.stderr?.length) continue;
    out.push('', `${u.name}: its last stderr lines`);
    // An upstream's own words: its control characters must not drive this terminal.
    for (const said of u.stderr) out.push(`  stderr| ${printable(said)}`);
  }
  // An unavailable server's "-" is explained by its reason (it never started), not by this note.
  if (s.upstreams.some((u) => u.state !== 'unavailable' && (u.tools === null || u.prompts === null || u.resources === null))) out.push('', '-: not listed yet (nothing has read that list from the server since it started: mcpmux lists tools and prompts ahead of hosts only for shared servers that announce list changes)');
  process.stdout.write(out.join('\n') + '\n');
  return 0;
}

/** The cluster section of `mcpmux status`: this daemon, the store, and the daemons Redis knows. */
function clusterLines(c: ClusterStatus): string[] {
  const store = `store ${c.store.health}${c.store.reason ? ` (${printable(c.store.reason)})` : ''}`;
  const out = [`cluster: this daemon ${c.id} at ${c.advertiseUrl} (${c.state}), ${store}`];
  if (!c.daemons) {
    out.push(`  ${printable(c.error ?? 'the daemons cannot be read')}`);
    return out;
  }
  for (const d of c.daemons) out.push(`  ${d.id}  ${d.advertiseUrl}  ${d.state}  ${d.version}  up ${d.uptimeS} s  seen ${d.seenMsAgo} ms ago${d.self ? '  (this one)' : ''}`);
  return out;
}

/** A count from /status; null (or absent, from an older daemon) is a list not read yet. */
function count(n: number | null | undefined): string {
  return typeof n === 'number' ? String(n) : '-';
}

/** `mcpmux restart NAME [--url BASE] [--token-env VAR]`. */
export async function runRestart(name: string, opts: { url?: string; tokenEnv?: string }): Promise<number> {
  const base = opts.url ?? DEFAULT_BASE;
  const res = await call('restart', base, `status/restart?server=${encodeURIComponent(name)}`, { method: 'POST', headers: { [OPERATOR_HEADER]: '1' } }, opts.tokenEnv);
  if (!res) return 1;
  const body = await res.text();
  if (res.status !== 202) {
    // A 404 naming the server is about the server, not about where the routes are.
    const why = res.status === 404 && body.includes('no shared upstream') ? '' : hint(res.status, opts.tokenEnv);
    process.stderr.write(`mcpmux restart: ${base} answered ${res.status}: ${body.slice(0, 300)}${why}\n`);
    return 1;
  }
  process.stdout.write(`mcpmux restart: ${name} is restarting\n`);
  return 0;
}
