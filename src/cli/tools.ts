// `mcpmux tools [--json]`: the merged tool table exactly as hosts will see it. With
// `--approve NAME` (repeatable) or `--approve-all` (`--all`), records the current definitions of held
// tools as approved (tool pinning, governance/pins.ts); a running daemon sees the file change.
// With `--tokens`, prints what those definitions cost in tokens per server (surface/tokens.ts).

import { ANONYMOUS_CLIENT } from '../config/types.js';
import { loadOrReport, startedRouter, tolerateClosedStdout, UsageError, type GlobalOptions } from './runtime.js';

export interface ToolsOptions extends GlobalOptions {
  json?: boolean;
  client?: string;
  approve?: string[];
  approveAll?: boolean;
  /** `--all`: the same as `--approve-all`. */
  all?: boolean;
  /** `--tokens`: the token cost of the definitions, per server and in total. */
  tokens?: boolean;
}

export async function runTools(opts: ToolsOptions): Promise<number> {
  tolerateClosedStdout();
  const config = await loadOrReport(opts);
  if (!config) return 1;
  const client = opts.client ?? ANONYMOUS_CLIENT;
  if (client !== ANONYMOUS_CLIENT && !config.listen.auth.tokens.some((t) => t.client === client)) {
    throw new UsageError(`--client: no client named ${JSON.stringify(client)} in listen.auth.tokens`);
  }
  if (opts.all) opts.approveAll = true;
  if (opts.tokens && (opts.approve?.length || opts.approveAll)) throw new UsageError('--tokens cannot be combined with --approve or --approve-all');
  const { router, pins } = await startedRouter(config, opts);
  try {
    const { tools, servers, failed: unread } = await router.allTools(client);
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
      const approved = pins.approve(pairs);
      const named = (ps: typeof pairs) => ps.map((p) => `${p.server}/${p.tool}`).join(', ');
      process.stdout.write(`approved ${approved.length} tool definition(s): ${named(approved)}\n`);
      // Servers without pinTools hold nothing and record nothing: there is nothing to approve.
      const loose = pairs.filter((p) => !approved.includes(p));
      if (loose.length > 0 && !opts.approveAll) process.stdout.write(`not pinned (nothing to approve): ${named(loose)}\n`);
      return 0;
    }
    if (opts.tokens) {
      printTokens(await tokenCosts(servers), opts.json === true);
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
    pins.close();
    await router.close();
  }
}

/** The `--json` form of `mcpmux tools --tokens`. */
export interface TokenReport {
  /** The tokenizer encoding counted with (gpt-tokenizer). */
  encoding: 'o200k_base';
  servers: { server: string; tools: number; tokens: number }[];
  total: { tools: number; tokens: number };
}

/**
 * Exact counts, each tool's definition as a host receives it (toolDefinitionText). The tokenizer
 * module loads here, in the CLI process only.
 */
async function tokenCosts(servers: { server: string; tools: Record<string, unknown>[] }[]): Promise<TokenReport> {
  const { countTokens, toolDefinitionText } = await import('../surface/tokens.js');
  const rows: TokenReport['servers'] = [];
  for (const s of servers) {
    let tokens = 0;
    for (const t of s.tools) tokens += await countTokens(toolDefinitionText(t));
    rows.push({ server: s.server, tools: s.tools.length, tokens });
  }
  const total = { tools: rows.reduce((n, r) => n + r.tools, 0), tokens: rows.reduce((n, r) => n + r.tokens, 0) };
  return { encoding: 'o200k_base', servers: rows, total };
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
}
