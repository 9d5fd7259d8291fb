// The one interface every transport implements, host-facing or upstream-facing.
// A transport moves parsed JSON values; it knows framing, not JSON-RPC semantics.

import type { Frame, Wire } from '../jsonrpc/framing.js';
import type { Incoming, JsonRpcId } from '../jsonrpc/message.js';

/** A frame the transport could not turn into a value (bad JSON, over the size limit). */
export type FrameError = Exclude<Frame, { ok: true }>;

/**
 * `related` is the id of the peer's request a message belongs to (the request a response
 * answers, or the request a progress notification or a server-initiated request is part of).
 * Transports that have a stream per request (Streamable HTTP) use it to pick the stream; the
 * others ignore it.
 */
export interface Transport {
  /**
   * Sends one message or a batch. A dead transport drops it and reports via onclose. Throws
   * only an RpcError, for a request or notification that cannot be serialised (nested deeper
   * than JSON.stringify goes); a response that cannot be becomes an error response instead.
   * Returns what was written (or queued) when the transport encoded the message itself, so the
   * caller can learn its size (`wireBytes`) without encoding it again; undefined when dropped.
   */
  send(msg: Incoming, related?: JsonRpcId): Wire | void;
  /** Closes the transport; resolves once it is closed. Idempotent. */
  close(): Promise<void>;
  /**
   * A parsed value arrived (not yet checked to be JSON-RPC). `related` is the id of OUR request
   * on whose response stream it came, where the transport knows it (Streamable HTTP). `bytes`
   * is the size of the message as it arrived (line, body or frame), where the transport knows it.
   */
  onmessage?: (value: unknown, related?: JsonRpcId, bytes?: number) => void;
  onframeerror?: (err: FrameError) => void;
  /**
   * Set by the endpoint: whether a success response's result may now be handed up as its text
   * (a RawResult, jsonrpc/raw-result.ts) rather than parsed. Transports that cannot tell leave
   * it unused and always parse.
   */
  rawResults?: () => boolean;
  /** The transport is gone; called once. */
  onclose?: (reason: string) => void;
}
