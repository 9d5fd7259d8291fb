// How much may wait for a peer that does not read what mcpmux writes to it.
//
// Node buffers every write a slow reader has not taken yet; a host that stops reading its
// stdout, SSE stream or WebSocket would otherwise grow mcpmux without bound (measured: +180 to
// +370 MB under a notification flood). Past this many bytes waiting, the connection is dropped
// (its session ends, or for a Streamable HTTP stream the host may reconnect and resume), with a
// log line. Room for a few of the largest messages, so a slow but live reader of a large
// answer is never cut off.

export const MIN_BACKLOG_BYTES = 1024 * 1024;

export function maxBacklogBytes(maxMessageBytes: number): number {
  return Math.max(4 * maxMessageBytes, MIN_BACKLOG_BYTES);
}

/** The reason given when a peer is dropped for not reading. */
export function notReading(waiting: number): string {
  return `the peer is not reading what mcpmux sends (${waiting} bytes waiting)`;
}
