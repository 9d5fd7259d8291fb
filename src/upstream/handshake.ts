// How mcpmux opens an upstream, in either era. Legacy: the initialize handshake. Modern
// (2026-07-28): no handshake, a server/discover for the server's identity and capabilities.
// `auto` tries initialize first (almost every server speaks it, and a legacy server asked an
// unknown method first may never answer) and switches to modern when the server refuses
// initialize naming a modern version (-32022, as 2026-07-28-only servers do).

import type { Endpoint, Result } from '../jsonrpc/endpoint.js';
import { RpcError } from '../jsonrpc/message.js';
import { publishUpstreamRequest, upstreamRequestClock } from '../observe/events.js';
import type { Params } from '../protocol/mcp.js';
import { META, MODERN_VERSIONS, ModernError, isModernVersion, type Era, type ModernVersion } from '../protocol/modern.js';
import { LATEST_VERSION, isSupportedVersion, type ProtocolVersion } from '../protocol/versions.js';

export interface ServerInfo {
  era: Era;
  protocolVersion: ProtocolVersion | ModernVersion;
  capabilities: Params;
  serverInfo: Params;
  instructions: string | undefined;
}

export interface HandshakeOptions {
  server: string;
  era: 'auto' | 'modern' | 'legacy';
  clientCapabilities: Params;
  clientInfo: Params;
  startupMs: number;
}

export async function handshake(ep: Endpoint, o: HandshakeOptions): Promise<ServerInfo> {
  if (o.era === 'modern') return discover(ep, o);
  try {
    return await initialize(ep, o);
  } catch (err) {
    if (o.era === 'auto' && speaksModern(err)) return discover(ep, o);
    throw err;
  }
}

/** A refusal of initialize that names a modern version it supports. */
function speaksModern(err: unknown): boolean {
  if (!(err instanceof RpcError) || err.code !== ModernError.UnsupportedProtocolVersion) return false;
  const supported = (err.data as Params | undefined)?.supported;
  return Array.isArray(supported) && supported.some(isModernVersion);
}

async function initialize(ep: Endpoint, o: HandshakeOptions): Promise<ServerInfo> {
  const result = await observed(ep, o, 'initialize', { protocolVersion: LATEST_VERSION, capabilities: o.clientCapabilities, clientInfo: o.clientInfo });
  const version = result.protocolVersion;
  if (!isSupportedVersion(version)) throw new Error(`unsupported protocol version ${JSON.stringify(version)}`);
  ep.notify('notifications/initialized');
  return {
    era: 'legacy',
    protocolVersion: version,
    capabilities: (result.capabilities as Params) ?? {},
    serverInfo: (result.serverInfo as Params) ?? {},
    instructions: typeof result.instructions === 'string' ? result.instructions : undefined,
  };
}

async function discover(ep: Endpoint, o: HandshakeOptions): Promise<ServerInfo> {
  const result = await observed(ep, o, 'server/discover', { _meta: envelope(o.clientCapabilities, o.clientInfo) });
  const versions = Array.isArray(result.supportedVersions) ? (result.supportedVersions as unknown[]) : [];
  const version = MODERN_VERSIONS.find((v) => versions.includes(v));
  if (!version) throw new Error(`server/discover offers no version mcpmux speaks (${JSON.stringify(versions).slice(0, 120)})`);
  return {
    era: 'modern',
    protocolVersion: version,
    capabilities: (result.capabilities as Params) ?? {},
    serverInfo: ((result._meta as Params | undefined)?.[META.serverInfo] as Params | undefined) ?? {},
    instructions: typeof result.instructions === 'string' ? result.instructions : undefined,
  };
}

/** The `_meta` keys every request to a modern server carries. */
export function envelope(capabilities: Params, clientInfo: Params): Params {
  return { [META.protocolVersion]: MODERN_VERSIONS[0], [META.clientCapabilities]: capabilities, [META.clientInfo]: clientInfo };
}

/** mcpmux's own request during the handshake: never cancelled, bounded by startupMs, observed. */
function observed(ep: Endpoint, o: HandshakeOptions, method: string, params: Params): Promise<Result> {
  const t0 = upstreamRequestClock();
  return ep.request(ep.allocateId(), method, params, { timeoutMs: o.startupMs, cancelOnExpire: false }).then(
    (r) => (publishUpstreamRequest(t0, o.server, method, undefined), r),
    (err: unknown) => {
      publishUpstreamRequest(t0, o.server, method, undefined, err);
      throw err;
    },
  );
}
