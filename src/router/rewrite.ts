// Rewrites the resource URIs inside results an upstream returns, so that every URI a host sees
// can be read or subscribed to through mcpmux. Objects are modified in place: they were parsed
// from the upstream's message a moment ago and belong to nobody else.

import { isObject } from '../objects.js';
import type { Params } from '../protocol/mcp.js';
import { wrapUri } from './naming.js';

/** A content block: `resource` blocks embed {uri,...}; `resource_link` blocks carry uri. */
function rewriteBlock(b: Params, server: string): Params {
  if (b.type === 'resource_link' && typeof b.uri === 'string') b.uri = wrapUri(server, b.uri);
  else if (b.type === 'resource' && typeof b.resource === 'object' && b.resource !== null) {
    const r = b.resource as Params;
    if (typeof r.uri === 'string') r.uri = wrapUri(server, r.uri);
  }
  return b;
}

/** tools/call result: `content[]`. */
export function rewriteToolResult(result: Params, server: string): Params {
  mapBlocks(result, 'content', rewriteBlock, server);
  return result;
}

/** prompts/get result: `messages[].content` (one block, or an array in some servers). */
export function rewritePromptResult(result: Params, server: string): Params {
  mapMessageBlocks(result, rewriteBlock, server);
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

/**
 * Replaces each content block in `holder[key]` (one block, or an array of them) by
 * `fn(block, arg)`. Shared by the URI rewriting here and the downgrades for older hosts;
 * `arg` rather than a closure, because tool results pass through here on every call.
 */
export function mapBlocks<A>(holder: Params, key: string, fn: (block: Params, arg: A) => Params, arg: A): void {
  const v = holder[key];
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) if (isObject(v[i])) v[i] = fn(v[i], arg);
  } else if (isObject(v)) {
    holder[key] = fn(v, arg);
  }
}

/** mapBlocks over `result.messages[].content` (prompts/get results). */
export function mapMessageBlocks<A>(result: Params, fn: (block: Params, arg: A) => Params, arg: A): void {
  const messages = result.messages;
  if (Array.isArray(messages)) for (const m of messages) if (isObject(m)) mapBlocks(m, 'content', fn, arg);
}
