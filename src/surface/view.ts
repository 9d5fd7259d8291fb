// What a session may see of the tools (its "view"), and what the search surface makes of it: the
// tools/list a search-mode session gets and search_tools' answer. Pure: the lists, the filter and
// the config go in. The daemon (router/surface.ts) and `mcpmux tools --tokens / --search`
// (cli/tools.ts) call these same functions, so what the CLI prints is what a host is sent.

import type { SurfaceConfig } from '../config/types.js';
import { isKeptNumber } from '../jsonrpc/big-numbers.js';
import { isObject } from '../objects.js';
import type { Matcher } from '../governance/glob.js';
import type { Params } from '../protocol/mcp.js';
import { toolViewUris } from '../protocol/apps.js';
import { callToolDefinition, foundTools, searchAnswer, searchToolDefinition, type ServerLine } from './meta-tools.js';
import { MAX_QUERY_CHARS } from './terms.js';
import type { SearchableTool, ToolIndex } from './search-index.js';
import { estimateTokens, toolDefinitionText } from './tokens.js';

/** One server's tools as listed (public names, the client's policy already applied or not). */
export interface ServerTools {
  server: string;
  items: readonly Params[];
}

/** What a session may see of the tools now. */
export interface ToolView {
  /** Public name -> server and the tool as hosts see it, in config order. */
  byName: Map<string, { server: string; tool: Params }>;
  /** The servers with at least one tool in the view, as the meta-tools' descriptions name them. */
  servers: ServerLine[];
  /** Estimated tokens of the definitions the model is shown (app-only tools cost it nothing): what auto weighs. */
  tokens: number;
}

/**
 * The view of `servers`' tools that `allows` lets through (policy and toolset), the first of a
 * public name kept. `about`: a server's one-line description (aboutServer), for the meta-tools.
 */
export function buildToolView(servers: readonly ServerTools[], allows: (name: string) => boolean, about: (server: string) => string | undefined): ToolView {
  const byName = new Map<string, { server: string; tool: Params }>();
  const lines: ServerLine[] = [];
  let tokens = 0;
  for (const { server, items } of servers) {
    let n = 0;
    for (const tool of items) {
      const name = tool.name as string;
      if (!allows(name) || byName.has(name)) continue;
      byName.set(name, { server, tool });
      // App-only tools are never shown to the model: they cost it nothing.
      if (!appOnly(tool)) tokens += estimateTokens(toolDefinitionText(tool));
      n++;
    }
    if (n > 0) lines.push({ name: server, tools: n, about: about(server) });
  }
  return { byName, servers: lines, tokens };
}

/**
 * A search-mode session's tools/list: the two meta-tools, then every tool listed in search mode
 * too (alwaysVisible ones, tools that open an MCP Apps view, and the app-only tools such views call).
 * `always`: surface.alwaysVisible compiled.
 */
export function searchSurfaceTools(surface: SurfaceConfig, view: ToolView, always: Matcher): Params[] {
  const searchable = [...view.byName.values()].filter((t) => !appOnly(t.tool)).length;
  const tools: Params[] = [
    searchToolDefinition(surface.searchToolName, surface.callToolName, searchable, view.servers, surface.searchLimit),
    callToolDefinition(surface.callToolName, surface.searchToolName, view.servers),
  ];
  for (const [name, { tool }] of view.byName) {
    // A host renders a view only for a tool it listed, and a view calls app-only tools through it.
    if (name === surface.searchToolName || name === surface.callToolName) continue;
    if (always(name) || toolViewUris(tool).length > 0 || appOnly(tool)) tools.push(tool);
  }
  return tools;
}

/**
 * The tools search_tools searches: the view's, less the app-only ones and any server tool a
 * meta-tool's name shadows (search mode cannot call it). `meta`: the meta-tools' names.
 */
export function searchableTools(view: ToolView, meta?: Pick<SurfaceConfig, 'searchToolName' | 'callToolName'>): SearchableTool[] {
  const tools: SearchableTool[] = [];
  for (const [name, { server, tool }] of view.byName) {
    if (appOnly(tool) || name === meta?.searchToolName || name === meta?.callToolName) continue;
    tools.push({
      name,
      server,
      ...(typeof tool.title === 'string' && { title: tool.title }),
      ...(typeof tool.description === 'string' && { description: tool.description }),
      ...(typeof tool.inputSchema === 'object' && tool.inputSchema !== null && { inputSchema: tool.inputSchema as Params }),
    });
  }
  return tools;
}

/**
 * search_tools' result for `args` (the call's `arguments`): the ranked matches, or a tool error
 * (isError) a model can act on. `index`: ToolIndex.build(searchableTools(view)).
 */
export function searchToolResult(surface: SurfaceConfig, view: ToolView, index: ToolIndex, args: unknown): Params {
  if (!isObject(args)) {
    return toolError(`${surface.searchToolName} needs arguments {query: string, limit?: integer, server?: string}`);
  }
  const { query, server } = args as Params;
  // A number too big for a double arrives kept as its digits (jsonrpc/big-numbers.ts): as many as may be.
  const limit = isKeptNumber((args as Params).limit) ? (String((args as Params).limit).includes('-') ? 1 : 50) : (args as Params).limit;
  if (typeof query !== 'string' || query.trim() === '') return toolError('query must be a non-empty string: say in words what you want to do');
  if (limit !== undefined && (typeof limit !== 'number' || !Number.isFinite(limit))) return toolError('limit must be a number (1 to 50)');
  if (server !== undefined && typeof server !== 'string') return toolError('server must be a string (a server name)');
  if (server !== undefined && !view.servers.some((s) => s.name === server)) {
    return toolError(`no server named ${JSON.stringify(server)} among this session's: ${view.servers.map((s) => s.name).join(', ') || 'none'}`);
  }
  const text = query.length > MAX_QUERY_CHARS ? query.slice(0, MAX_QUERY_CHARS) : query;
  const hits = index.search(text, { limit: limit ?? surface.searchLimit, ...(server !== undefined && { server }) });
  return searchAnswer(text, foundTools(hits, view.byName), index.size);
}

/**
 * An MCP Apps tool only its view may call: `_meta.ui.visibility` without "model". Hosts keep
 * such tools from the model; search never offers them and call_tool refuses them.
 */
export function appOnly(tool: Params): boolean {
  const ui = (tool._meta as Params | undefined)?.ui as Params | undefined;
  const visibility = ui?.visibility;
  return Array.isArray(visibility) && !visibility.includes('model');
}

function toolError(text: string): Params {
  return { content: [{ type: 'text', text }], isError: true };
}
