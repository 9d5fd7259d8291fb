// Rewrites the resource URIs inside results an upstream returns, so that every URI a host sees
// can be read or subscribed to through mcpmux. Objects are modified in place: they were parsed
// from the upstream's message a moment ago and belong to nobody else.

import type { Params } from '../protocol/mcp.js';
import { wrapUri } from './naming.js';

/** A content block: `resource` blocks embed {uri,...}; `resource_link` blocks carry uri. */
function rewriteBlock(block: unknown, server: string): void {
  if (typeof block !== 'object' || block === null) return;
  const b = block as Params;
  if (b.type === 'resource_link' && typeof b.uri === 'string') b.uri = wrapUri(server, b.uri);
  else if (b.type === 'resource' && typeof b.resource === 'object' && b.resource !== null) {
    const r = b.resource as Params;
    if (typeof r.uri === 'string') r.uri = wrapUri(server, r.uri);
  }
}

function rewriteBlocks(blocks: unknown, server: string): void {
  if (Array.isArray(blocks)) for (const b of blocks) rewriteBlock(b, server);
  else rewriteBlock(blocks, server);
}

/** tools/call result: `content[]`. */
export function rewriteToolResult(result: Params, server: string): Params {
  rewriteBlocks(result.content, server);
  return result;
}

/** prompts/get result: `messages[].content` (one block, or an array in some servers). */
export function rewritePromptResult(result: Params, server: string): Params {
  const messages = result.messages;
  if (Array.isArray(messages)) for (const m of messages) rewriteBlocks((m as Params | null)?.content, server);
  return result;
}

/** resources/read result: `contents[].uri`. */
export function rewriteReadResult(result: Params, server: string): Params {
  const contents = result.contents;
  if (Array.isArray(contents)) {
    for (const c of contents) {
      if (typeof c === 'object' && c !== null && typeof (c as Params).uri === 'string') {
        (c as Params).uri = wrapUri(server, (c as Params).uri as string);
      }
    }
  }
  return result;
}
