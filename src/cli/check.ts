// `mcpmux check [--probe] [--strict]`: validate the config; with --probe, start every upstream
// and report. A server disabled for a missing variable is listed with the reason; the config is
// still valid (exit 0) unless --strict, which exits 1 for it (for scripts and install).

import { isPerClient, type Config } from '../config/types.js';
import { Policy } from '../governance/policy.js';
import { NEVER } from '../jsonrpc/cancel.js';
import { printable } from '../observe/log-format.js';
import type { Params } from '../protocol/mcp.js';
import type { ItemKind } from '../router/forward.js';
import { NameIndex, wrapUri } from '../router/naming.js';
import { nextCursorOf, walkPages } from '../upstream/paging.js';
import type { Upstream } from '../upstream/upstream.js';
import { probeStore } from '../store/store.js';
import { loadOrReport, type GlobalOptions } from './config-file.js';
import { startedRouter, tolerateClosedStdout } from './runtime.js';

export interface CheckOptions extends GlobalOptions {
  probe?: boolean;
  strict?: boolean;
}

export async function runCheck(opts: CheckOptions): Promise<number> {
  tolerateClosedStdout();
  const config = await loadOrReport(opts);
  if (!config) return 1;
  const enabled = config.servers.filter((s) => !s.disabled);
  process.stdout.write(`${config.path}: ok (${enabled.length} server(s) enabled, ${config.servers.length - enabled.length} disabled)\n`);
  const unavailable = config.servers.filter((s) => s.unavailable);
  for (const s of unavailable) process.stdout.write(`  ${s.name}: disabled (${s.unavailable!.reason})\n`);
  const strictFailed = opts.strict === true && unavailable.length > 0;
  if (strictFailed) {
    process.stderr.write(`mcpmux check: --strict: ${unavailable.length} server(s) disabled for a missing environment variable: ${unavailable.map((s) => s.name).join(', ')}\n`);
  }
  if (!opts.probe) return strictFailed ? 1 : 0;

  let failed = 0;
  if (config.store) {
    // The URL is never printed: it may hold a password.
    const why = await probeStore(config.store);
    if (why) failed++;
    process.stdout.write(`  store: ${why ? `Redis unreachable: ${printable(why)}` : 'Redis reachable'}\n`);
  }
  // Unavailable servers were listed above, on stdout: not warned about again in the log.
  const { router, store } = await startedRouter(config, opts, { unavailable: true });
  const denied = new DeniedCount(config);
  try {
    for (const up of router.list()) {
      const { ok, line } = await describe(up, denied);
      if (!ok) failed++;
      // Its serverInfo, its error and its stderr are the upstream's words: their control
      // characters must not drive the person's terminal.
      process.stdout.write(`  ${up.name}: ${printable(line)}\n`);
      // The server's own last words are usually the real reason ("exited with code 3" is not).
      if (!ok) for (const said of up.stderr) process.stdout.write(`      stderr| ${printable(said)}\n`);
    }
    // A connection per host client, each with its client's login: none to probe without a host.
    for (const s of enabled) if (s.sharing === 'shared' && isPerClient(s)) process.stdout.write(`  ${s.name}: per client (a login and a connection per host client; not probed: mcpmux status shows each client's)\n`);
  } finally {
    await router.close();
    await store?.close();
  }
  return failed || strictFailed ? 1 : 0;
}

/**
 * How many of a server's items policy hides from every host: its own allow/deny (on its own
 * names and URIs) and the global `policy` lists (on public names and host-visible URIs, named
 * as the router names them: servers are described in config order, as a contested name goes to
 * the earlier one). Per-client lists are left out: they differ from one client to the next.
 */
class DeniedCount {
  private readonly policy: Policy;
  private readonly names: NameIndex;

  constructor(private readonly config: Config) {
    this.policy = new Policy(config);
    const rank = new Map(config.servers.map((s, i) => [s.name, i]));
    this.names = new NameIndex({ separator: config.namespace.separator, maxLength: config.namespace.maxNameLength, rank: (s) => rank.get(s) ?? Number.MAX_SAFE_INTEGER });
  }

  denies(up: Upstream, kind: ItemKind, item: unknown): boolean {
    const own = typeof item === 'object' && item !== null ? (item as Params)[kind === 'resources' ? 'uri' : 'name'] : undefined;
    if (typeof own !== 'string') return false;
    if (!this.policy.serverAllows(up.name, kind, own)) return true;
    const shown =
      kind === 'resources'
        ? up.config.resources.namespace === 'passthrough'
          ? own
          : wrapUri(up.name, own)
        : this.names.publish(kind, up.name, up.config.prefix, own);
    return !this.policy.globalAllows(kind, shown);
  }
}

/** One upstream's line: FAILED and why, or what it is and how many items it lists (and policy hides). */
async function describe(up: Upstream, denied: DeniedCount): Promise<{ ok: boolean; line: string }> {
  const failed = (why: string) => ({ ok: false, line: `FAILED (${why})` });
  if (up.state !== 'ready') return failed(up.reason || up.state);
  const caps = up.capabilities;
  const counts: string[] = [];
  for (const [cap, method, key] of [
    ['tools', 'tools/list', 'tools'],
    ['prompts', 'prompts/list', 'prompts'],
    ['resources', 'resources/list', 'resources'],
  ] as const) {
    if (!caps[cap]) continue;
    try {
      const { n, hidden } = await countAll(up, method, key, (item) => denied.denies(up, key, item));
      counts.push(`${n} ${key}${hidden > 0 ? ` (${hidden} denied)` : ''}`);
    } catch (err) {
      return failed((err as Error).message);
    }
  }
  const info = up.info!;
  const server = info.serverInfo as Params;
  return {
    ok: true,
    line: `ok, ${String(server.name ?? '?')} ${String(server.version ?? '')}, ` + `protocol ${info.protocolVersion}, capabilities [${Object.keys(caps).join(', ')}], ${counts.join(', ')}`,
  };
}

/** How many items a list has (and of them, `denies` says no to), every page read: bounded like every walk (upstream/paging.ts). */
async function countAll(up: Upstream, method: string, key: string, denies: (item: unknown) => boolean): Promise<{ n: number; hidden: number }> {
  let n = 0;
  let hidden = 0;
  await walkPages(
    up.name,
    method,
    async (cursor, signal) => {
      const page = await up.request(method, cursor === undefined ? {} : { cursor }, { signal });
      const items = Array.isArray(page[key]) ? (page[key] as unknown[]) : [];
      n += items.length;
      for (const item of items) if (denies(item)) hidden++;
      return { items: items.length, next: nextCursorOf(page) };
    },
    NEVER,
  );
  return { n, hidden };
}
