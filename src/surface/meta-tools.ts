// The two tools of the search surface, as hosts see them, and what search_tools answers.
//
// search_tools finds tools among those the session may see; call_tool calls one by its public
// name. Their descriptions name the connected servers (one short line each, bounded), so a model
// knows what is worth searching for. A search answer carries the matches twice, as the spec
// asks of structured results: `structuredContent` (declared by outputSchema) for hosts that read
// it, and a compact text rendering for the many that hand the model `content` only. It stays
// under a token budget.

import { isObject } from '../objects.js';
import type { Params } from '../protocol/mcp.js';
import type { SearchHit } from './search-index.js';
import { estimateTokens } from './tokens.js';

/** One server as the meta-tools' descriptions name it. */
export interface ServerLine {
  name: string;
  tools: number;
  /** What the server says it is for (serverInfo.description or title, or its instructions' first sentence). */
  about: string | undefined;
}

/** Servers named in a description at most (the rest are counted), and characters per line. */
const MAX_SERVER_LINES = 40;
const MAX_LINE_CHARS = 100;
/** A search answer stops taking matches once it costs this many (estimated) tokens; one match is always given. */
export const SEARCH_RESULT_MAX_TOKENS = 8000;
/**
 * The budget as the daemon's estimate sees it: 5 % under, so that the exact count stays within
 * SEARCH_RESULT_MAX_TOKENS (on the corpus the estimate ran up to 2.3 % under the exact count on
 * whole answers; bench/surface/token-surface.mjs measures it).
 */
const BUDGET_BY_ESTIMATE = Math.floor(SEARCH_RESULT_MAX_TOKENS * 0.95);
/** Characters of a description shown in the text rendering (structuredContent has it whole). */
const TEXT_DESCRIPTION_CHARS = 300;
const TEXT_PARAM_CHARS = 80;

const SEARCH_OUTPUT_SCHEMA = {
  type: 'object',
  properties: {
    tools: {
      type: 'array',
      description: 'Matching tools, best first.',
      items: {
        type: 'object',
        properties: {
          name: { type: 'string', description: 'The name to call it by (with call_tool, or directly).' },
          title: { type: 'string' },
          server: { type: 'string', description: 'The server that provides it.' },
          description: { type: 'string' },
          inputSchema: { type: 'object', description: "The tool's arguments (JSON Schema)." },
          execution: { type: 'object', description: 'Whether it may or must run as a task (taskSupport), as the tool declares it.' },
        },
        required: ['name', 'server', 'inputSchema'],
      },
    },
  },
  required: ['tools'],
} as const;

/** The search meta-tool's definition. `total`: the tools it searches among. */
export function searchToolDefinition(name: string, callName: string, total: number, servers: readonly ServerLine[], limit: number): Params {
  return {
    name,
    title: 'Search tools',
    description:
      `Search the ${total} tools of the connected servers and get the best matches with their arguments. ` +
      `Describe what you want to do in a few words. Then call a match with ${callName} (or by its name).` +
      serverList(servers),
    inputSchema: {
      type: 'object',
      properties: {
        query: { type: 'string', description: 'What you want to do, in words (e.g. "create a GitHub issue", "read a file").' },
        limit: { type: 'integer', minimum: 1, maximum: 50, description: `How many matches to return (default ${limit}).` },
        server: { type: 'string', description: 'Search only the tools of this server.' },
      },
      required: ['query'],
    },
    outputSchema: SEARCH_OUTPUT_SCHEMA,
    annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  };
}

/** The call meta-tool's definition. */
export function callToolDefinition(name: string, searchName: string, servers: readonly ServerLine[]): Params {
  return {
    name,
    title: 'Call a tool',
    // The servers by name only: search_tools' description says what each is for (no need to pay twice).
    description:
      `Call one of the connected servers' tools by the name ${searchName} gave, with its arguments as that tool's input schema describes.` +
      (servers.length ? ` Servers: ${servers.slice(0, MAX_SERVER_LINES).map((s) => s.name).join(', ')}${servers.length > MAX_SERVER_LINES ? `, and ${servers.length - MAX_SERVER_LINES} more` : ''}.` : ''),
    inputSchema: {
      type: 'object',
      properties: {
        name: { type: 'string', description: `The tool's name, as ${searchName} returned it.` },
        arguments: { type: 'object', description: "The tool's arguments.", additionalProperties: true },
      },
      required: ['name'],
    },
    // A host may ask for a task through it; the tool called decides whether it runs as one.
    execution: { taskSupport: 'optional' },
  };
}

function serverList(servers: readonly ServerLine[]): string {
  if (servers.length === 0) return '';
  const lines = servers.slice(0, MAX_SERVER_LINES).map((s) => clip(`- ${s.name} (${s.tools} tool${s.tools === 1 ? '' : 's'})${s.about ? `: ${oneLine(s.about)}` : ''}`, MAX_LINE_CHARS));
  const more = servers.length - lines.length;
  return `\n\nServers:\n${lines.join('\n')}${more > 0 ? `\n- and ${more} more` : ''}`;
}

/** What a server says it is for, in one short line, from what it told mcpmux at its handshake. */
export function aboutServer(serverInfo: Params | undefined, instructions: string | undefined): string | undefined {
  const described = serverInfo?.description;
  if (typeof described === 'string' && described.trim() !== '') return oneLine(described);
  const title = serverInfo?.title;
  if (typeof title === 'string' && title.trim() !== '') return oneLine(title);
  if (instructions && instructions.trim() !== '') return firstSentence(instructions);
  return undefined;
}

/** A tool found, as search_tools shows it. `name` is the public name. */
export interface FoundTool {
  name: string;
  server: string;
  tool: Params;
}

/** search_tools' answer: the matches in order, cut where the token budget ends (at least one). */
export function searchAnswer(query: string, found: readonly FoundTool[], searched: number): Params {
  const tools: Params[] = [];
  const lines: string[] = [];
  let cost = 0;
  for (const f of found) {
    const entry: Params = { name: f.name };
    if (typeof f.tool.title === 'string') entry.title = f.tool.title;
    entry.server = f.server;
    if (typeof f.tool.description === 'string') entry.description = f.tool.description;
    entry.inputSchema = isObject(f.tool.inputSchema) ? f.tool.inputSchema : { type: 'object' };
    // Whether it runs as a task (required, optional): the host must know to ask for one.
    if (isObject(f.tool.execution)) entry.execution = f.tool.execution;
    const line = renderTool(entry);
    const more = estimateTokens(JSON.stringify(entry)) + estimateTokens(line);
    if (tools.length > 0 && cost + more > BUDGET_BY_ESTIMATE) break;
    cost += more;
    tools.push(entry);
    lines.push(line);
  }
  const cut = found.length - tools.length;
  const head =
    tools.length === 0
      ? `No tool matches "${clip(oneLine(query), 200)}" among ${searched} tools. Try other words, or fewer.`
      : `${tools.length} of ${searched} tools match "${clip(oneLine(query), 200)}", best first${cut > 0 ? ` (${cut} more left out to keep this short; ask with fewer words or a server)` : ''}:`;
  return { content: [{ type: 'text', text: [head, ...lines].join('\n\n') }], structuredContent: { tools } };
}

/** `name (server): description` and its arguments, one line each. */
function renderTool(entry: Params): string {
  const about = typeof entry.description === 'string' ? `: ${clip(oneLine(entry.description), TEXT_DESCRIPTION_CHARS)}` : typeof entry.title === 'string' ? `: ${entry.title}` : '';
  const schema = entry.inputSchema as Params;
  const props = isObject(schema.properties) ? (schema.properties as Record<string, unknown>) : {};
  const required = new Set(Array.isArray(schema.required) ? (schema.required as unknown[]) : []);
  const args = Object.entries(props).map(([k, v]) => {
    const p = isObject(v) ? (v as Params) : {};
    const type = typeof p.type === 'string' ? p.type : Array.isArray(p.type) ? (p.type as unknown[]).join('|') : Array.isArray(p.enum) ? 'enum' : 'any';
    const desc = typeof p.description === 'string' ? ` - ${clip(oneLine(p.description), TEXT_PARAM_CHARS)}` : '';
    return `${k}${required.has(k) ? '' : '?'}: ${type}${desc}`;
  });
  return `${entry.name as string} (${entry.server as string})${about}\n  arguments: ${args.length ? args.join('; ') : 'none'}`;
}

/** Hits of the index as found tools (the index knows public names and servers; `byName` the definitions). */
export function foundTools(hits: readonly SearchHit[], byName: ReadonlyMap<string, { server: string; tool: Params }>): FoundTool[] {
  const out: FoundTool[] = [];
  for (const h of hits) {
    const t = byName.get(h.tool.name);
    if (t) out.push({ name: h.tool.name, server: t.server, tool: t.tool });
  }
  return out;
}

function oneLine(s: string): string {
  return s.replace(/\s+/g, ' ').trim();
}

function clip(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

function firstSentence(s: string): string {
  const line = oneLine(s);
  const end = line.search(/[.!?](\s|$)/);
  return end > 0 ? line.slice(0, end + 1) : line;
}
