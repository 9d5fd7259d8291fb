// What comes back from a 2026-07-28 upstream, made into what the rest of mcpmux expects of an
// upstream's answer: the revision's own fields that say nothing about the content are taken
// off (`resultType: "complete"`, the server naming itself in `_meta`); a modern host gets them
// back from mcpmux itself (protocol/modern.ts). `input_required` results stay as they are:
// whoever asked must see that input is needed.

import type { Result } from '../jsonrpc/endpoint.js';
import type { Params } from '../protocol/mcp.js';
import { META } from '../protocol/modern.js';

export function fromModern(result: Result): Result {
  if (result.resultType === 'complete') delete result.resultType;
  const meta = result._meta as Params | undefined;
  if (meta && META.serverInfo in meta) {
    delete meta[META.serverInfo];
    if (Object.keys(meta).length === 0) delete result._meta;
  }
  return result;
}
