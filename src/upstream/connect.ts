// Opens the transport an upstream's config asks for. Each kind lives in its own file; the remote
// kinds (http, sse, ws) are wrapped in a RemoteLink that accepts sends at once (Upstream sends
// initialize immediately) and hands them on when the real transport is ready.

import type { RemoteServerConfig, ServerConfig } from '../config/types.js';
import type { Incoming, JsonRpcId } from '../jsonrpc/message.js';
import type { Logger } from '../observe/logger.js';
import type { FrameError, Transport } from '../transport/transport.js';
import { spawnChild } from './child.js';
import type { PrestartedChildren } from './prestart.js';

export interface Connection {
  transport: Transport;
  /** Resolves (never rejects) with a description once the connection is gone for good. */
  exited: Promise<string>;
  /** Ends the connection (for a child: the spec's shutdown order, within `grace`). */
  stop(grace?: StopGrace): Promise<void>;
  /**
   * Set by remote transports when the server ended our session (HTTP 404): the upstream is
   * re-initialized at once instead of after a backoff.
   */
  expired?: boolean;
  /** The child's process id (stdio upstreams). */
  pid?: number;
  /** Set by the HTTP transport when the server wants a login (401) that mcpmux does not have. */
  needsLogin?: boolean;
  /**
   * Set when the connection can never work as configured (a stdio command not found or not
   * executable): why, for a person to fix. Restarting is pointless, so it is not retried.
   */
  readonly permanent?: string;
  /** A stdio child's last stderr lines (bounded), unscrubbed: what it said before it failed. */
  stderrTail?(): string[];
}

/**
 * How long a child gets after its stdin is closed, then after SIGTERM, before SIGKILL. A stdio
 * host that closed mcpmux's stdin waits only so long itself before it signals mcpmux.
 */
export interface StopGrace {
  afterEofMs: number;
  afterTermMs: number;
}

/** What http.ts, sse.ts and ws.ts provide: a Transport that may need a moment before it can send. */
export interface RemoteTransport extends Transport {
  /** Resolves once send() may be called; never rejects (a failure arrives through onclose). */
  readonly ready: Promise<void>;
  /** The server ended our session (HTTP 404): re-initialize at once. */
  readonly expired: boolean;
  /** The server wants a login mcpmux does not have (HTTP 401). */
  readonly needsLogin?: boolean;
  /** Closes; what it still sends on the way out (an HTTP session's DELETE) gets at most `withinMs`. */
  close(withinMs?: number): Promise<void>;
}

/**
 * Whose login a connection carries: a perClient server's connection is one host client's
 * (`client`), and `subject` gives the freshest host token among that client's sessions (grants
 * that act for the host). Absent: the server's one login.
 */
export interface LoginIdentity {
  client?: string;
  subject?: () => string | undefined;
}

/** `prestarted`: children `mcpmux stdio` spawned before it loaded; a stdio server adopts its own, once. */
export function connectUpstream(cfg: ServerConfig, maxMessageBytes: number, log: Logger, who?: LoginIdentity, prestarted?: PrestartedChildren): Connection {
  if (cfg.transport === 'stdio') return spawnChild(cfg, maxMessageBytes, log, prestarted?.take(cfg));
  const link = new RemoteLink();
  // The remote transports (and fetch, ws, the SSE parser) load only when a config uses them:
  // a stdio-only mcpmux saves their memory. The link queues sends until the transport is there.
  openRemote(cfg, maxMessageBytes, log, link, who).then(
    (t) => link.use(t),
    (err: Error) => link.fail(`cannot open ${cfg.transport} transport: ${err.message}`),
  );
  return {
    transport: link,
    exited: link.exited,
    // A remote connection has no child to wait for, but may say goodbye (an HTTP session's
    // DELETE): that too must end within the first step of the grace (a stdio host is waiting).
    stop: (grace?: StopGrace) => link.close(grace?.afterEofMs),
    get expired() {
      return link.expired;
    },
    get needsLogin() {
      return link.needsLogin;
    },
  };
}

async function openRemote(cfg: RemoteServerConfig, max: number, log: Logger, link: RemoteLink, who: LoginIdentity | undefined): Promise<RemoteTransport> {
  const { safeUrl } = await import('./fetch.js');
  log.info({ transport: cfg.transport, url: safeUrl(cfg.url) }, 'connecting to upstream');
  switch (cfg.transport) {
    case 'http': {
      const http = await import('./http.js');
      const { LegacySseTransport } = await import('./sse.js');
      // Every Streamable HTTP server may want a login: its stored tokens (if any) go with each request.
      const { OAuthTokens } = await import('./oauth/tokens.js');
      return new http.StreamableHttpTransport(cfg.url, cfg.headers, max, log, {
        auth: new OAuthTokens(cfg, log, who),
        // The spec's backwards-compatibility probe: same URL, legacy transport, same first message.
        onLegacy: (first, why) => link.use(new LegacySseTransport(cfg.url, cfg.headers, max, log, why), first),
      });
    }
    case 'sse':
      return new (await import('./sse.js')).LegacySseTransport(cfg.url, cfg.headers, max, log);
    case 'ws':
      return new (await import('./ws.js')).WsTransport(cfg.url, cfg.headers, max, log);
  }
}

/**
 * The Transport an Upstream sees for a remote server: queues sends until the current remote
 * transport is ready, and lets the HTTP probe swap in the legacy transport underneath.
 */
class RemoteLink implements Transport {
  onmessage?: (value: unknown, related?: JsonRpcId) => void;
  onframeerror?: (err: FrameError) => void;
  onclose?: (reason: string) => void;
  readonly exited: Promise<string>;

  private inner: RemoteTransport | undefined;
  /** Sends waiting for `inner` to be ready; undefined once they flow straight through. */
  private queue: [Incoming, JsonRpcId | undefined][] | undefined = [];
  private closed = false;
  private resolveExited!: (how: string) => void;

  constructor() {
    this.exited = new Promise((resolve) => (this.resolveExited = resolve));
  }

  get expired(): boolean {
    return this.inner?.expired ?? false;
  }

  get needsLogin(): boolean {
    return this.inner?.needsLogin ?? false;
  }

  /** Makes `inner` the transport; `resend` goes first (the message the previous one gave back). */
  use(inner: RemoteTransport, resend?: Incoming): void {
    if (this.closed) return void inner.close();
    this.inner = inner;
    this.queue = [...(resend === undefined ? [] : [[resend, undefined] as [Incoming, undefined]]), ...(this.queue ?? [])];
    // Only the current inner transport may speak: a replaced one is inert.
    inner.onmessage = (v, related) => this.inner === inner && this.onmessage?.(v, related);
    inner.onframeerror = (e) => this.inner === inner && this.onframeerror?.(e);
    inner.onclose = (reason) => this.inner === inner && this.finish(reason);
    void inner.ready.then(() => {
      if (this.inner !== inner || this.closed) return;
      const queued = this.queue ?? [];
      this.queue = undefined;
      for (const [msg, related] of queued) {
        try {
          inner.send(msg, related);
        } catch {
          // Only requests and notifications can throw (encodeChunks), and the Upstream sends
          // those once ready, never through this queue: nothing to report to.
        }
      }
    });
  }

  send(msg: Incoming, related?: JsonRpcId): void {
    if (this.closed) return;
    if (this.queue) this.queue.push([msg, related]);
    else this.inner?.send(msg, related);
  }

  async close(withinMs?: number): Promise<void> {
    this.finish('closed');
    await this.inner?.close(withinMs);
  }

  /** The transport could not even be created. */
  fail(reason: string): void {
    this.finish(reason);
  }

  private finish(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.queue = undefined;
    this.resolveExited(reason);
    this.onclose?.(reason);
  }
}
