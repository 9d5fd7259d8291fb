// The HTTP headers a 2026-07-28 request carries (MCP-Protocol-Version, Mcp-Method, Mcp-Name,
// Mcp-Param-*): set by the Streamable HTTP upstream transport and by `mcpmux connect`.

import { NAMED } from '../protocol/modern.js';
import { PARAM_HEADERS } from './modern.js';

/** The headers 2026-07-28 requires on a POST: the version, the method, and the target's name. */
export function modernHeaders(h: Headers, version: string, msg: { method?: unknown; params?: Record<string, unknown> }): void {
  h.delete('mcp-session-id');
  h.set('mcp-protocol-version', version);
  if (typeof msg.method === 'string') h.set('mcp-method', msg.method);
  const field = typeof msg.method === 'string' ? NAMED[msg.method] : undefined;
  const name = field ? msg.params?.[field] : undefined;
  if (typeof name === 'string') h.set('mcp-name', headerSafe(name));
  // Tool arguments the server wants mirrored (x-mcp-header), found by the Upstream.
  const params = (msg.params as { [PARAM_HEADERS]?: Record<string, string> } | undefined)?.[PARAM_HEADERS];
  for (const [k, v] of Object.entries(params ?? {})) h.set(`mcp-param-${k}`, headerSafe(v));
}

/** A value as a header may carry it: as it is when plain visible ASCII, else `=?base64?…?=`. */
function headerSafe(v: string): string {
  const plain = /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(v) && !(v.startsWith('=?base64?') && v.endsWith('?='));
  return plain ? v : `=?base64?${Buffer.from(v, 'utf8').toString('base64')}?=`;
}
