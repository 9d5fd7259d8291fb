// Rewrites the resource URIs inside results an upstream returns, so that every URI a host sees
// can be read or subscribed to through mcpmux. Objects are modified in place: they were parsed
// from the upstream's message a moment ago and belong to nobody else.

import type { Params } from '../protocol/mcp.js';

type UriMap = (uri: string) => string;

/** A content block: `resource` blocks embed {uri,...}; `resource_link` blocks carry uri. */
function rewriteBlock(block: unknown, map: UriMap): void {
  if (typeof block !== 'object' || block === null) return;
  const b = block as Params;
  if (b.type === 'resource_link' && typeof b.uri === 'string') b.uri = map(b.uri);
  else if (b.type === 'resource' && typeof b.resource === 'object' && b.resource !== null) {
    const r = b.resource as Params;
    if (typeof r.uri === 'string') r.uri = map(r.uri);
  }
}

function rewriteBlocks(blocks: unknown, map: UriMap): void {
  if (Array.isArray(blocks)) for (const b of blocks) rewriteBlock(b, map);
  else rewriteBlock(blocks, map);
}

/** tools/call result: `content[]`. */
export function rewriteToolResult(result: Params, map: UriMap): Params {
  rewriteBlocks(result.content, map);
  return result;
}

/** prompts/get result: `messages[].content` (one block, or an array in some servers). */
export function rewritePromptResult(result: Params, map: UriMap): Params {
  const messages = result.messages;
  if (Array.isArray(messages)) for (const m of messages) rewriteBlocks((m as Params | null)?.content, map);
  return result;
}

/** resources/read result: `contents[].uri`. */
export function rewriteReadResult(result: Params, map: UriMap): Params {
  const contents = result.contents;
  if (Array.isArray(contents)) {
    for (const c of contents) {
      if (typeof c === 'object' && c !== null && typeof (c as Params).uri === 'string') {
        (c as Params).uri = map((c as Params).uri as string);
      }
    }
  }
  return result;
}
