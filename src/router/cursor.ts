// mcpmux's pagination cursor: which list, which upstream, and that upstream's own cursor,
// signed with a key that lives only as long as this process. A cursor that was forged, edited,
// made by another mcpmux process, or made for another list fails verification (-32602).

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { isText } from '../jsonrpc/big-numbers.js';
import { ErrorCode, RpcError } from '../jsonrpc/message.js';

export interface CursorState {
  /** The list method the cursor belongs to, e.g. `tools/list`. */
  list: string;
  /** Upstream name to continue with. */
  server: string;
  /** That upstream's cursor (undefined: its first page). */
  cursor: string | undefined;
}

const KEY = randomBytes(32);
const MAC_BYTES = 16;

function mac(payload: string): Buffer {
  return createHmac('sha256', KEY).update(payload).digest().subarray(0, MAC_BYTES);
}

export function encodeCursor(state: CursorState): string {
  const payload = Buffer.from(JSON.stringify([state.list, state.server, state.cursor ?? null])).toString('base64url');
  return payload + '.' + mac(payload).toString('base64url');
}

export function decodeCursor(list: string, cursor: unknown): CursorState {
  const bad = (why: string): RpcError => new RpcError(ErrorCode.InvalidParams, `Invalid cursor: ${why}`);
  if (!isText(cursor)) throw bad('must be a string');
  const dot = cursor.indexOf('.');
  if (dot < 0) throw bad('not issued by this mcpmux');
  const payload = cursor.slice(0, dot);
  const given = Buffer.from(cursor.slice(dot + 1), 'base64url');
  const want = mac(payload);
  if (given.length !== want.length || !timingSafeEqual(given, want)) throw bad('not issued by this mcpmux (or stale)');
  const [l, server, inner] = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as [string, string, string | null];
  if (l !== list) throw bad(`issued for ${l}, not ${list}`);
  return { list, server, cursor: inner ?? undefined };
}
