// What the router needs of a host session (HostSession implements it). The router reaches
// host sessions only through this, never through the class: data flows down, answers come back.

import type { CancelSignal } from '../jsonrpc/cancel.js';
import type { Result } from '../jsonrpc/endpoint.js';
import type { JsonRpcId } from '../jsonrpc/message.js';
import type { HostTransport } from '../observe/events.js';
import type { LogLevel, Params } from '../protocol/mcp.js';
import type { Era } from '../protocol/modern.js';
import type { ProtocolVersion } from '../protocol/versions.js';

export interface SessionPort {
  readonly id: string;
  /** The client its bearer token names, or `anonymous` (policy, rate limits, audit). */
  readonly client: string;
  readonly transport: HostTransport;
  readonly protocolVersion: ProtocolVersion;
  readonly clientCapabilities: Params;
  /** What the host said it is (initialize, or a 2026-07-28 request's _meta): auto reads its name. */
  readonly clientInfo?: Params;
  /** The toolset chosen for it (--toolset, its token's toolset, ?toolset=): a name in `toolsets`. */
  readonly toolset?: string;
  /** Which revision family the host speaks (undefined until its first request). */
  readonly era?: Era;
  /** One stateless request (2026-07-28 over HTTP): no `sharing: "session"` servers of its own. */
  readonly stateless?: boolean;
  /** Set by logging/setLevel; undefined means "everything". */
  logLevel: LogLevel | undefined;
  /**
   * `related`: the host's request this message belongs to, if any (picks the HTTP stream).
   * `server`: the upstream (config name) it came from, for a log message.
   */
  notify(method: string, params?: Params, related?: JsonRpcId, server?: string): void;
  /** The host's request `hostRequestId` was sent on to upstream `server` (its call's server). */
  routed?(hostRequestId: JsonRpcId, server: string): void;
  /** OIDC sessions: the host's latest validated JWT (compact JWS), updated by every authenticated HTTP request of the session; undefined for static-token and stdio sessions. Never logged. */
  hostToken?(): string | undefined;
  /** A server-initiated request to the host (sampling, elicitation, roots). */
  request(method: string, params: Params | undefined, signal: CancelSignal, related?: JsonRpcId): Promise<Result>;
}
