// `mcpmux tools [--json]`: the merged tool table exactly as hosts will see it. With
// `--approve NAME` (repeatable) or `--approve-all` (`--all`), records the current definitions of held
// tools as approved (tool pinning, governance/pins.ts); a running daemon sees the file change
// (with `store` in the config, the approval goes to Redis and every daemon sees it).
// With `--tokens`, prints what those definitions cost in tokens per server, and what each toolset
// would send in each surface mode (docs/tokens.md). With `--search QUERY`, prints what
// search_tools would answer a host. `--toolset NAME` narrows all of these to one toolset.
//
// The views, the search surface's list and search answers are built by the daemon's own
// functions (surface/view.ts) from the same lists, so what this prints is what a host is sent.

import type { Config, SurfaceMode } from '../config/types.js';
import { ANONYMOUS_CLIENT } from '../config/types.js';
import { unknownToolset } from '../config/suggest.js';
import { compileGlobs } from '../governance/glob.js';
import type { Params } from '../protocol/mcp.js';
import { decideBySize, decideWithoutList, type SurfaceDecision } from '../surface/decide.js';
import { aboutServer } from '../surface/meta-tools.js';
import { ToolIndex } from '../surface/search-index.js';
import { buildToolView, searchableTools, searchSurfaceTools, searchToolResult, type ServerTools, type ToolView } from '../surface/view.js';
import type { Router } from '../router/router.js';
import { loadOrReport, type GlobalOptions } from './config-file.js';
import { startedRouter, tolerateClosedStdout } from './runtime.js';
import { UsageError } from './usage-error.js';

export interface ToolsOptions extends GlobalOptions {
  json?: boolean;
  client?: string;
  approve?: string[];
  approveAll?: boolean;
  /** `--all`: the same as `--approve-all`. */
  all?: boolean;
  /** `--tokens`: the token cost of the definitions, per server and in total, and per toolset and mode. */
  tokens?: boolean;
  /** `--toolset NAME`: only this toolset's tools. */
  toolset?: string;
  /** `--search QUERY`: what search_tools answers. */
  search?: string;
  /** `--limit N` (with --search): search_tools' `limit` argument, as a host would send it. */
  limit?: string;
}

export async function runTools(opts: ToolsOptions): Promise<number> {
  tolerateClosedStdout();
  if (opts.all) opts.approveAll = true;
  const approving = (opts.approve?.length ?? 0) > 0 || opts.approveAll === true;
  if (opts.tokens && approving) throw new UsageError('--tokens cannot be combined with --approve or --approve-all');
  if (opts.search !== undefined && (opts.tokens || approving)) throw new UsageError('--search cannot be combined with --tokens, --approve or --approve-all');
  if (opts.toolset !== undefined && approving) throw new UsageError('--toolset cannot be combined with --approve or --approve-all (approval is per tool, not per toolset)');
  if (opts.limit !== undefined && opts.search === undefined) throw new UsageError('--limit goes with --search');
  if (opts.search !== undefined && opts.search.trim() === '') throw new UsageError('--search needs a query: say in words what you want to do (e.g. --search "read a file")');
  const limit = opts.limit === undefined ? undefined : Number(opts.limit);
  // Any number goes through as a host would send it; search_tools clamps it to 1..50.
  if (limit !== undefined && (opts.limit!.trim() === '' || !Number.isFinite(limit))) throw new UsageError(`--limit must be a number, not ${JSON.stringify(opts.limit)}`);
  const config = await loadOrReport(opts);
  if (!config) return 1;
  const client = opts.client ?? ANONYMOUS_CLIENT;
  if (client !== ANONYMOUS_CLIENT && !config.listen.auth.tokens.some((t) => t.client === client)) {
    throw new UsageError(`--client: no client named ${JSON.stringify(client)} in listen.auth.tokens`);
  }
  // An unknown toolset fails as `mcpmux stdio --toolset` does: the name is config, not syntax.
  if (opts.toolset !== undefined && !Object.hasOwn(config.toolsets, opts.toolset)) {
    process.stderr.write(`mcpmux: --toolset: ${unknownToolset(opts.toolset, config.toolsets)}\n`);
    return 1;
  }
  // A client whose token names a toolset gets it unless the URL names another: so does this view of it.
  if (opts.toolset === undefined && !approving) {
    const own = config.listen.auth.tokens.find((t) => t.client === client && t.toolset !== undefined)?.toolset;
    if (own !== undefined) {
      opts.toolset = own;
      process.stderr.write(`mcpmux: client ${client}'s sessions get toolset "${own}" (its token in listen.auth.tokens); --toolset names another\n`);
    }
  }
  const { router, pins, store } = await startedRouter(config, opts);
  try {
    // The approvals must be read before the lists are judged (from Redis with `store`): an
    // approval that cannot be recorded, or read against, fails rather than guesses.
    const pinsUnread = await pins.ready();
    if (pinsUnread !== undefined) {
      if (approving) {
        process.stderr.write(`mcpmux: cannot approve: the tool approvals are kept in the shared store (Redis), which is unreachable (${pinsUnread})\n`);
        return 1;
      }
      process.stderr.write(`mcpmux: the tool approvals in the shared store (Redis) cannot be read (${pinsUnread}); the tools of pinned servers are left out\n`);
    }
    const listed = await router.allTools(client);
    const { failed: unread } = listed;
    let { tools, servers } = listed;
    if (opts.toolset !== undefined) {
      const inToolset = compileGlobs(config.toolsets[opts.toolset]!.tools);
      tools = tools.filter((t) => inToolset(t.name as string));
      servers = servers.map((s) => ({ server: s.server, tools: s.tools.filter((t) => inToolset(t.name as string)) }));
    }
    if (opts.approve?.length || opts.approveAll) {
      // Every definition seen while listing, held or not: match NAME as server/tool, as the
      // public name (prefix + separator + tool), or as the tool's own name on any server.
      const pairs: { server: string; tool: string }[] = [];
      const unknown = new Set(opts.approve ?? []);
      for (const [server, defs] of pins.seen) {
        const s = config.servers.find((x) => x.name === server);
        const publicOf = (tool: string) => (s?.prefix ? `${s.prefix}${config.namespace.separator}${tool}` : tool);
        for (const tool of defs.keys()) {
          const names = [`${server}/${tool}`, publicOf(tool), tool];
          const hit = opts.approveAll ? true : names.some((n) => unknown.has(n));
          if (!hit) continue;
          pairs.push({ server, tool });
          for (const n of names) unknown.delete(n);
        }
      }
      if (unknown.size > 0) throw new UsageError(`--approve: no tool named ${[...unknown].map((n) => JSON.stringify(n)).join(', ')}`);
      let approved: typeof pairs;
      try {
        approved = await pins.approve(pairs);
      } catch (err) {
        process.stderr.write(`mcpmux: cannot approve: ${(err as Error).message}\n`);
        return 1;
      }
      const named = (ps: typeof pairs) => ps.map((p) => `${p.server}/${p.tool}`).join(', ');
      process.stdout.write(`approved ${approved.length} tool definition(s): ${named(approved)}\n`);
      // Servers without pinTools hold nothing and record nothing: there is nothing to approve.
      const loose = pairs.filter((p) => !approved.includes(p));
      if (loose.length > 0 && !opts.approveAll) process.stdout.write(`not pinned (nothing to approve): ${named(loose)}\n`);
      return 0;
    }
    const lists: ServerTools[] = listed.servers.map((s) => ({ server: s.server, items: s.tools }));
    if (opts.search !== undefined) {
      const view = viewOf(config, router, lists, opts.toolset);
      const index = ToolIndex.build(searchableTools(view, config.surface));
      const result = searchToolResult(config.surface, view, index, { query: opts.search, ...(limit !== undefined && { limit }) });
      if (opts.json) process.stdout.write(JSON.stringify(result, null, 2) + '\n');
      else process.stdout.write(`${((result.content as { text: string }[])[0]!).text}\n`);
    } else if (opts.tokens) {
      const report = await tokenCosts(servers, client, opts.toolset);
      report.surfaces = await surfaceCosts(config, router, lists, opts.toolset);
      printTokens(report, opts.json === true);
    } else if (opts.json) {
      process.stdout.write(JSON.stringify(tools, null, 2) + '\n');
    } else {
      const width = Math.max(4, ...tools.map((t) => String(t.name).length));
      process.stdout.write(`${'NAME'.padEnd(width)}  DESCRIPTION\n`);
      for (const t of tools) {
        const d = typeof t.description === 'string' ? t.description.split('\n')[0]!.slice(0, 80) : '';
        process.stdout.write(`${String(t.name).padEnd(width)}  ${d}\n`);
      }
    }
    const failed = router.list().filter((u) => u.state !== 'ready');
    for (const u of failed) process.stderr.write(`mcpmux: server ${u.name} is not available: ${u.reason}\n`);
    for (const f of unread) process.stderr.write(`mcpmux: the tools of server ${f.server} are left out: ${f.error.message}\n`);
    return 0;
  } finally {
    await pins.close();
    await router.close();
    await store?.close();
  }
}

/** The `--json` form of `mcpmux tools --tokens` (docs/tokens.md). */
export interface TokenReport {
  /** The tokenizer encoding counted with (gpt-tokenizer). */
  encoding: 'o200k_base';
  /** The client whose policy applies (`anonymous` unless --client). */
  client: string;
  /** --toolset, when given: every figure is narrowed to it. */
  toolset?: string;
  servers: { server: string; tools: number; tokens: number }[];
  total: { tools: number; tokens: number };
  /** Every tool's own count, in list order: `total.tokens` is their sum. */
  tools: { name: string; server: string; tokens: number }[];
  /** What a session is sent, with no toolset and with each toolset (or only --toolset's). */
  surfaces: SurfaceCost[];
}

/** What one toolset (or none) sends in each mode, and which mode a host gets. */
export interface SurfaceCost {
  /** null: a session with no toolset. */
  toolset: string | null;
  /** The mode configured for it: the toolset's `surface`, else surface.mode. */
  configured: SurfaceMode;
  /** Mode "all": every tool the session may see, listed. `estimate`: the daemon's estimate of what auto weighs (app-only tools left out). */
  all: { tools: number; tokens: number; estimate: number };
  /** Mode "search": the meta-tools, then the alwaysVisible and MCP Apps tools; `names` in list order. */
  search: { tools: number; tokens: number; names: string[] };
  /** What auto picks for it, weighing the daemon's estimate against maxDirectTools and maxDirectTokens. */
  auto: SurfaceDecision;
  /** What a host that does not search tools itself is given (one in surface.nativeSearchClients gets "all" under auto). */
  given: SurfaceDecision;
}

/**
 * Exact counts, each tool's definition as a host receives it (toolDefinitionText). The tokenizer
 * module loads here, in the CLI process only.
 */
async function tokenCosts(servers: { server: string; tools: Record<string, unknown>[] }[], client: string, toolset: string | undefined): Promise<TokenReport> {
  const rows: TokenReport['servers'] = [];
  const tools: TokenReport['tools'] = [];
  for (const s of servers) {
    let tokens = 0;
    for (const t of s.tools) {
      const n = await toolTokens(t);
      tools.push({ name: t.name as string, server: s.server, tokens: n });
      tokens += n;
    }
    rows.push({ server: s.server, tools: s.tools.length, tokens });
  }
  const total = { tools: rows.reduce((n, r) => n + r.tools, 0), tokens: rows.reduce((n, r) => n + r.tokens, 0) };
  return { encoding: 'o200k_base', client, ...(toolset !== undefined && { toolset }), servers: rows, total, tools, surfaces: [] };
}

/** The exact count of one definition (each tool object counted once, however many views hold it). */
const counted = new WeakMap<object, number>();
async function toolTokens(tool: object): Promise<number> {
  let n = counted.get(tool);
  if (n === undefined) {
    const { countTokens, toolDefinitionText } = await import('../surface/tokens.js');
    counted.set(tool, (n = await countTokens(toolDefinitionText(tool))));
  }
  return n;
}

async function sumTokens(tools: Iterable<object>): Promise<number> {
  let sum = 0;
  for (const t of tools) sum += await toolTokens(t);
  return sum;
}

/** The daemon's view for a client's lists (policy applied) and a toolset, as router/surface.ts makes it. */
function viewOf(config: Config, router: Router, lists: readonly ServerTools[], toolset: string | undefined): ToolView {
  const inToolset = toolset === undefined ? () => true : compileGlobs(config.toolsets[toolset]!.tools);
  const ups = router.list();
  return buildToolView(lists, inToolset, (server) => {
    const up = ups.find((u) => u.name === server);
    return aboutServer(up?.info?.serverInfo, up?.info?.instructions);
  });
}

async function surfaceCosts(config: Config, router: Router, lists: readonly ServerTools[], only: string | undefined): Promise<SurfaceCost[]> {
  const names: (string | null)[] = only !== undefined ? [only] : [null, ...Object.keys(config.toolsets)];
  const always = compileGlobs(config.surface.alwaysVisible);
  const out: SurfaceCost[] = [];
  for (const name of names) {
    const ts = name === null ? undefined : config.toolsets[name];
    const view = viewOf(config, router, lists, name ?? undefined);
    const listed = [...view.byName.values()].map((t) => t.tool);
    const search = searchSurfaceTools(config.surface, view, always);
    const size = { tools: view.byName.size, tokens: view.tokens };
    const auto = decideBySize(config.surface, size);
    out.push({
      toolset: name,
      configured: ts?.surface ?? config.surface.mode,
      all: { tools: listed.length, tokens: await sumTokens(listed), estimate: view.tokens },
      search: { tools: search.length, tokens: await sumTokens(search), names: search.map((t) => t.name as string) },
      auto,
      // No host name: what every host outside surface.nativeSearchClients gets.
      given: decideWithoutList(config.surface, name ?? undefined, ts, undefined) ?? auto,
    });
  }
  return out;
}

function printTokens(report: TokenReport, json: boolean): void {
  if (json) {
    process.stdout.write(JSON.stringify(report, null, 2) + '\n');
    return;
  }
  const width = Math.max(6, 'total'.length, ...report.servers.map((r) => r.server.length));
  const line = (name: string, tools: number | string, tokens: number | string) =>
    `${name.padEnd(width)}  ${String(tools).padStart(5)}  ${String(tokens).padStart(7)}\n`;
  process.stdout.write(line('SERVER', 'TOOLS', 'TOKENS'));
  for (const r of report.servers) process.stdout.write(line(r.server, r.tools, r.tokens));
  process.stdout.write(line('total', report.total.tools, report.total.tokens));
  process.stdout.write(`(tokens of the tool definitions as JSON, counted with the o200k_base encoding)\n`);
  if (report.surfaces.length === 0) return;
  const label = (s: SurfaceCost) => (s.toolset === null ? '(none)' : s.toolset);
  const tw = Math.max('TOOLSET'.length, ...report.surfaces.map((s) => label(s).length));
  const row = (toolset: string, mode: string, tools: number | string, tokens: number | string, sent: string) =>
    `${toolset.padEnd(tw)}  ${mode.padEnd(6)}  ${String(tools).padStart(5)}  ${String(tokens).padStart(7)}  ${sent}`.trimEnd() + '\n';
  process.stdout.write(`\nWhat a session is sent${report.client === ANONYMOUS_CLIENT ? '' : ` (client ${report.client})`}, per toolset and mode:\n`);
  process.stdout.write(row('TOOLSET', 'MODE', 'TOOLS', 'TOKENS', 'SENT'));
  for (const s of report.surfaces) {
    const mark = (m: 'all' | 'search') => (s.given.mode === m ? `<- ${s.given.reason}` : '');
    process.stdout.write(row(label(s), 'all', s.all.tools, s.all.tokens, mark('all')));
    process.stdout.write(row(label(s), 'search', s.search.tools, s.search.tokens, mark('search')));
    if (s.given.reason !== s.auto.reason) process.stdout.write(`${''.padEnd(tw)}  (auto would pick "${s.auto.mode}": ${s.auto.reason.replace(/^auto: /, '')})\n`);
  }
  process.stdout.write(
    '(SENT: what a host gets; under auto, hosts in surface.nativeSearchClients get "all". auto weighs the\n' +
      " daemon's estimate of the tokens, shown as \"about\"; the TOKENS column is exact)\n",
  );
}
