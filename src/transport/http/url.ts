// A request's target (`req.url`: path and query, no origin) split in one place: the path is
// what routes match, the query what a route reads (`/messages?sessionId=`, `/status/restart?server=`).

import type { IncomingMessage } from 'node:http';

/** The path and the query string (without its `?`; empty when there is none). */
export function splitTarget(target: string): { path: string; query: string } {
  const q = target.indexOf('?');
  return q < 0 ? { path: target, query: '' } : { path: target.slice(0, q), query: target.slice(q + 1) };
}

export function pathOf(req: IncomingMessage): string {
  return splitTarget(req.url ?? '/').path;
}

export function queryOf(req: IncomingMessage): URLSearchParams {
  return new URLSearchParams(splitTarget(req.url ?? '/').query);
}
