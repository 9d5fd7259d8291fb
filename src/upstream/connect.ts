// Opens the transport an upstream's config asks for. Each kind lives in its own file.

import type { ServerConfig } from '../config/types.js';
import type { Logger } from '../observe/logger.js';
import type { Transport } from '../transport/transport.js';
import { spawnChild } from './child.js';

export interface Connection {
  transport: Transport;
  /** Child pid for stdio upstreams. */
  pid: number | undefined;
  /** Resolves (never rejects) with a description once the connection is gone for good. */
  exited: Promise<string>;
  /** Ends the connection (for a child: the spec's shutdown order). */
  stop(): Promise<void>;
  /**
   * Set by remote transports when the server ended our session (HTTP 404): the upstream is
   * re-initialized at once instead of after a backoff.
   */
  expired?: boolean;
}

export function connectUpstream(cfg: ServerConfig, maxMessageBytes: number, log: Logger): Connection {
  switch (cfg.transport) {
    case 'stdio':
      return spawnChild(cfg, maxMessageBytes, log);
    case 'http':
    case 'sse':
    case 'ws':
      throw new Error(`the ${cfg.transport} upstream transport is not implemented yet`);
  }
}
