// How long a client may take to send a request, for every HTTP listener of mcpmux.

import type { ServerOptions } from 'node:http';

/**
 * Slow clients (slowloris) are cut off: Node's defaults hold a request's headers for 60 s and
 * its body for 300 s, checked every 30 s. Nothing legitimate on a local daemon takes 10 s to
 * send headers or 30 s to send a body (16 MB at 0.5 MB/s). Node answers 408 and closes.
 */
export const HEADERS_TIMEOUT_MS = 10_000;
export const REQUEST_TIMEOUT_MS = 30_000;
/** How often Node checks those timeouts (its default, 30 s, would make them 40 s and 60 s). */
const TIMEOUT_CHECK_MS = 1000;

/** Options for node:http's createServer. */
export function httpOptions(headersTimeoutMs = HEADERS_TIMEOUT_MS, requestTimeoutMs = REQUEST_TIMEOUT_MS): ServerOptions {
  return { headersTimeout: headersTimeoutMs, requestTimeout: Math.max(requestTimeoutMs, headersTimeoutMs), connectionsCheckingInterval: Math.min(TIMEOUT_CHECK_MS, headersTimeoutMs) };
}

