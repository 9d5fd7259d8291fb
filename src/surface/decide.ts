// Which surface a session gets: every tool listed ("all") or the search surface ("search").
// Pure: the config, the session's toolset and host name, and (for auto) the size of what the
// session may see go in; a decision and the reason a person reads in /status come out.

import type { SurfaceConfig, SurfaceMode, ToolsetConfig } from '../config/types.js';
import { globsOf } from '../governance/glob.js';

export type Surface = 'all' | 'search';

export interface SurfaceDecision {
  mode: Surface;
  /** Why, in words (for /status and logs). */
  reason: string;
}

/** What a session may see, as auto weighs it. */
export interface ViewSize {
  tools: number;
  /** Estimated tokens of their definitions (tokens.ts). */
  tokens: number;
}

/** The mode in force for a session before its list is weighed: the toolset's, else the config's. */
export function configuredMode(surface: SurfaceConfig, toolset: ToolsetConfig | undefined): SurfaceMode {
  return toolset?.surface ?? surface.mode;
}

/** Whether the host says it is one that searches tools itself (surface.nativeSearchClients). */
export function searchesItself(surface: SurfaceConfig, clientName: unknown): boolean {
  if (typeof clientName !== 'string' || clientName === '') return false;
  return globsOf(surface.nativeSearchClients)(clientName);
}

/**
 * The decision that needs no list: a fixed mode, or a host that searches itself. Undefined when
 * auto must weigh the session's list (`decideBySize`).
 */
export function decideWithoutList(surface: SurfaceConfig, toolsetName: string | undefined, toolset: ToolsetConfig | undefined, clientName: unknown): SurfaceDecision | undefined {
  const mode = configuredMode(surface, toolset);
  const by = toolset?.surface !== undefined ? `toolset "${toolsetName}"` : 'surface.mode';
  if (mode === 'all') return { mode: 'all', reason: `${by} is "all"` };
  if (mode === 'search') return { mode: 'search', reason: `${by} is "search"` };
  if (searchesItself(surface, clientName)) return { mode: 'all', reason: `the host (${String(clientName)}) searches tools itself (surface.nativeSearchClients)` };
  return undefined;
}

/** auto: every tool listed while the list is within both budgets. */
export function decideBySize(surface: SurfaceConfig, size: ViewSize): SurfaceDecision {
  const within = `${size.tools} tools (at most ${surface.maxDirectTools}), about ${size.tokens} tokens (at most ${surface.maxDirectTokens})`;
  if (size.tools > surface.maxDirectTools) return { mode: 'search', reason: `auto: ${size.tools} tools, more than surface.maxDirectTools (${surface.maxDirectTools})` };
  if (size.tokens > surface.maxDirectTokens) return { mode: 'search', reason: `auto: about ${size.tokens} tokens of definitions, more than surface.maxDirectTokens (${surface.maxDirectTokens})` };
  return { mode: 'all', reason: `auto: ${within}` };
}
