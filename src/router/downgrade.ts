// What an older or less capable host can take. Older peers ignore unknown fields, but not
// unknown content types or methods, so those are translated or refused here.

import { materialise } from '../jsonrpc/opaque.js';
import type { Params } from '../protocol/mcp.js';
import { mapBlocks, mapMessageBlocks } from './rewrite.js';
import type { SessionPort } from './router.js';

/**
 * Rewrites content blocks a host's protocol version does not know: `resource_link` (2025-06-18)
 * becomes a text block naming the link; `audio` (2025-03-26) becomes a text note. Results for
 * current hosts are returned untouched, at the cost of one string comparison.
 */
export function adaptForHost(version: string, result: Params): Params {
  if (knowsEveryBlock(version)) return result;
  // Blocks are rewritten into text here: long values kept raw must be real strings first.
  materialise(result);
  mapBlocks(result, 'content', adaptBlock, version);
  mapMessageBlocks(result, adaptBlock, version);
  return result;
}

/** A host of this version takes every content block a server may send as it is. */
export function knowsEveryBlock(version: string): boolean {
  return version >= '2025-06-18';
}

function adaptBlock(b: Params, version: string): Params {
  if (b.type === 'resource_link') {
    const label = typeof b.title === 'string' ? b.title : typeof b.name === 'string' ? b.name : 'resource';
    const desc = typeof b.description === 'string' ? ` — ${b.description}` : '';
    return { type: 'text', text: `Resource link: ${label} <${String(b.uri)}>${desc}` };
  }
  if (b.type === 'audio' && version < '2025-03-26') {
    return { type: 'text', text: `[audio (${String(b.mimeType ?? 'unknown type')}) omitted: not supported by protocol ${version}]` };
  }
  return b;
}

/**
 * Why this host cannot take this server-initiated request, or undefined if it can. A host that
 * did not declare a capability never receives the request; the upstream gets the reason.
 */
export function hostCanTake(session: SessionPort, method: string, params: Params): string | undefined {
  const caps = session.clientCapabilities;
  switch (method) {
    case 'sampling/createMessage': {
      const sampling = caps.sampling as Params | undefined;
      if (!sampling) return 'The host does not support sampling (it did not declare the sampling capability)';
      if ((params.tools !== undefined || params.toolChoice !== undefined) && !sampling.tools) {
        return 'The host does not support tool use in sampling (it did not declare sampling.tools)';
      }
      return undefined;
    }
    case 'elicitation/create': {
      const el = caps.elicitation as Params | undefined;
      if (!el) return 'The host does not support elicitation (it did not declare the elicitation capability)';
      const url = params.mode === 'url';
      // An empty elicitation capability means form mode only.
      const form = el.form !== undefined || Object.keys(el).length === 0;
      if (url && !el.url) return 'The host does not support URL elicitation (it did not declare elicitation.url)';
      if (!url && !form) return 'The host does not support form elicitation (it did not declare elicitation.form)';
      return undefined;
    }
    case 'roots/list':
      return caps.roots ? undefined : 'The host does not support roots (it did not declare the roots capability)';
    default:
      return `Method not found: ${method}`;
  }
}
