// The one interface every transport implements, host-facing or upstream-facing.
// A transport moves parsed JSON values; it knows framing, not JSON-RPC semantics.

import type { Frame } from '../jsonrpc/framing.js';
import type { Incoming } from '../jsonrpc/message.js';

/** A frame the transport could not turn into a value (bad JSON, over the size limit). */
export type FrameError = Exclude<Frame, { ok: true }>;

export interface Transport {
  /** Sends one message or a batch. Never throws; a dead transport drops and reports via onclose. */
  send(msg: Incoming): void;
  /** Closes the transport; resolves once it is closed. Idempotent. */
  close(): Promise<void>;
  /** A parsed value arrived (not yet checked to be JSON-RPC). */
  onmessage?: (value: unknown) => void;
  onframeerror?: (err: FrameError) => void;
  /** The transport is gone; called once. */
  onclose?: (reason: string) => void;
}
