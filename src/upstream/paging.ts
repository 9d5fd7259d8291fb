// Reading every page of one upstream's list (tools/list, prompts/list, resources/list,
// resources/templates/list): the one loop mcpmux has for it, shared by name resolution,
// `mcpmux tools` and `mcpmux check --probe`. (A host paging through mcpmux's merged lists is
// paced by the host, one upstream page per host page: catalogue.ts.)
//
// How many pages there are is the upstream's to say, and one that always answers with a
// nextCursor would be read forever. So a walk is bounded: past MAX_WALK_PAGES pages or
// MAX_WALK_ITEMS items it ends with an error naming the server, and the caller's cancellation
// ends it at once, the page in flight included.

import { cancelledError, type CancelSignal } from '../jsonrpc/cancel.js';
import { ErrorCode, RpcError } from '../jsonrpc/message.js';

/** Pages one walk reads at most: a list that goes on past them is "too long". */
export const MAX_WALK_PAGES = 1000;
/** Items one walk reads at most, whatever the page sizes. */
export const MAX_WALK_ITEMS = 100_000;

/** One page as a walk counts it: how many items it had, and the cursor of the next (if any). */
export interface WalkedPage {
  items: number;
  next: string | undefined;
}

/** The cursor of the page after this one; undefined at the end ("" and non-strings end a list too). */
export function nextCursorOf(result: Record<string, unknown>): string | undefined {
  const next = result.nextCursor;
  return typeof next === 'string' && next !== '' ? next : undefined;
}

/**
 * Reads page after page through `page` (the first with no cursor) until one has no next
 * cursor. Throws an RpcError naming `server` past the bounds, and -32800 once `signal` fires
 * (without waiting for the page in flight: `page` gets the signal to cancel it upstream).
 */
export async function walkPages(
  server: string,
  method: string,
  page: (cursor: string | undefined, signal: CancelSignal) => Promise<WalkedPage>,
  signal: CancelSignal,
): Promise<void> {
  let cursor: string | undefined;
  let pages = 0;
  let items = 0;
  do {
    if (pages >= MAX_WALK_PAGES) throw new ListTooLong(server, method, `${MAX_WALK_PAGES} pages`);
    const p = await untilCancelled(page(cursor, signal), signal);
    pages++;
    items += p.items;
    if (items > MAX_WALK_ITEMS) throw new ListTooLong(server, method, `${MAX_WALK_ITEMS} items`);
    cursor = p.next;
  } while (cursor !== undefined);
}

/** A list that went on past a walk's bounds: the message names the server and the bound. */
export class ListTooLong extends RpcError {
  constructor(
    readonly server: string,
    readonly method: string,
    bound: string,
  ) {
    super(ErrorCode.InternalError, `server "${server}": its ${method} went on past ${bound}; stopped reading it there`, { server, method });
  }
}


/** `p`, or a -32800 rejection as soon as `signal` fires (a page shared by other walks may go on). */
function untilCancelled<T>(p: Promise<T>, signal: CancelSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(cancelledError(signal));
  return new Promise<T>((resolve, reject) => {
    const off = signal.onCancel(() => reject(cancelledError(signal)));
    p.then(
      (v) => (off(), resolve(v)),
      (e: unknown) => (off(), reject(e)),
    );
  });
}

