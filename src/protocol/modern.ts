// The 2026-07-28 revision ("modern": stateless, no initialize). Every request carries its
// protocol version and client capabilities in `_meta`; results carry `resultType`, and the
// cacheable ones freshness hints. This file is that vocabulary: names, codes and the checks
// of a modern request's envelope, with no state.

import { ErrorCode, RpcError } from '../jsonrpc/message.js';
import type { Params } from './mcp.js';

/** Modern revisions mcpmux speaks, newest first. */
/** Which revision family a peer speaks: 2024-11-05 to 2025-11-25 (legacy), or 2026-07-28 on. */
export type Era = 'legacy' | 'modern';

export const MODERN_VERSIONS = ['2026-07-28'] as const;
export type ModernVersion = (typeof MODERN_VERSIONS)[number];

export const META = {
  protocolVersion: 'io.modelcontextprotocol/protocolVersion',
  clientCapabilities: 'io.modelcontextprotocol/clientCapabilities',
  clientInfo: 'io.modelcontextprotocol/clientInfo',
  logLevel: 'io.modelcontextprotocol/logLevel',
  serverInfo: 'io.modelcontextprotocol/serverInfo',
  subscriptionId: 'io.modelcontextprotocol/subscriptionId',
} as const;

/** Error codes the revision defines (from the sub-range MCP reserves, -32020..-32099). */
export const ModernError = {
  HeaderMismatch: -32020,
  MissingRequiredClientCapability: -32021,
  UnsupportedProtocolVersion: -32022,
} as const;

/** What a modern host may ask. Anything else is -32601 (404 over HTTP). */
export const MODERN_METHODS: ReadonlySet<string> = new Set([
  'server/discover',
  'subscriptions/listen',
  'tools/list',
  'tools/call',
  'prompts/list',
  'prompts/get',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'completion/complete',
]);

/** Results that carry `ttlMs` and `cacheScope` (clients refuse them without). */
export const CACHEABLE: ReadonlySet<string> = new Set(['server/discover', 'tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read']);

/** Methods whose HTTP POST must name its target in `Mcp-Name` (params.name, or params.uri). */
export const NAMED: Readonly<Record<string, 'name' | 'uri'>> = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri' };

export function isModernVersion(v: unknown): v is ModernVersion {
  return typeof v === 'string' && (MODERN_VERSIONS as readonly string[]).includes(v);
}

/** The version a request declares in its `_meta`, if it declares one (the mark of a modern request). */
export function declaredVersion(params: unknown): string | undefined {
  const meta = (params as Params | undefined)?._meta as Params | undefined;
  const v = meta?.[META.protocolVersion];
  return typeof v === 'string' ? v : undefined;
}

/** A modern request's envelope, checked. */
export interface Envelope {
  version: ModernVersion;
  capabilities: Params;
  clientInfo: Params | undefined;
}

/**
 * Checks the `_meta` every modern request carries: a supported version (else -32022 naming
 * what is supported) and client capabilities (else -32602).
 */
export function readEnvelope(params: Params | undefined): Envelope {
  const meta = params?._meta as Params | undefined;
  const version = meta?.[META.protocolVersion];
  if (typeof version !== 'string') throw new RpcError(ErrorCode.InvalidParams, `Invalid params: _meta["${META.protocolVersion}"] is required`);
  if (!isModernVersion(version)) throw unsupportedVersion(version);
  const capabilities = meta![META.clientCapabilities];
  if (typeof capabilities !== 'object' || capabilities === null || Array.isArray(capabilities)) {
    throw new RpcError(ErrorCode.InvalidParams, `Invalid params: _meta["${META.clientCapabilities}"] is required (an object)`);
  }
  const info = meta![META.clientInfo];
  return { version, capabilities: capabilities as Params, clientInfo: typeof info === 'object' && info !== null ? (info as Params) : undefined };
}

export function unsupportedVersion(requested: string): RpcError {
  return new RpcError(ModernError.UnsupportedProtocolVersion, `Unsupported protocol version: ${requested}`, { supported: [...MODERN_VERSIONS], requested });
}

/**
 * The envelope's keys are between the host and mcpmux: what goes upstream is mcpmux's own
 * request to that upstream, in that upstream's era. Removes them (and an emptied `_meta`).
 */
export function stripEnvelope(params: Params | undefined): void {
  const meta = params?._meta as Params | undefined;
  // Most _meta (a progress token, a trace) carries no envelope: leave it as it is, cheaply.
  if (!meta || !(META.protocolVersion in meta || META.clientCapabilities in meta || META.clientInfo in meta || META.logLevel in meta)) return;
  delete meta[META.protocolVersion];
  delete meta[META.clientCapabilities];
  delete meta[META.clientInfo];
  delete meta[META.logLevel];
  if (Object.keys(meta).length === 0) delete params!._meta;
}

/**
 * The 2026-07-28 caching hints of a merged list page: until when every upstream page in it stays
 * fresh (the shortest of theirs; a page without a hint is fresh for no time) and whether it may
 * be shared between clients (every upstream said public, and no client sees it differently).
 */
export interface ListHints {
  freshUntil: number;
  public: boolean;
}

/** Freshness hints of a result, when its maker knows them (a merged list page: router/catalogue.ts). */
export type HintsOf = (result: Params) => ListHints | undefined;

/**
 * A result as a modern host must see it: `resultType`, mcpmux named in `_meta`, and for
 * cacheable ones the freshness hints. A new object: results may be shared (cached pages).
 * A merged list says what its upstreams said, merged (`hintsOf`): the shortest ttlMs left of
 * the pages in it, and "public" only when every one said public and every client is shown the
 * same list. Anything else gets ttlMs 0 and "private": upstreams come and go and policy filters
 * per client; change notices come over subscriptions/listen.
 */
export function modernResult(method: string, result: Params, serverInfo: Params, hintsOf?: HintsOf): Params {
  const meta = { ...(result._meta as Params | undefined), [META.serverInfo]: serverInfo };
  const out: Params = { ...result, resultType: result.resultType ?? 'complete', _meta: meta };
  // An interim input_required answer is never cacheable, and carries no hints.
  if (CACHEABLE.has(method) && out.resultType === 'complete') {
    const hints = hintsOf?.(result);
    if (hints) {
      out.ttlMs = Math.max(0, Math.floor(hints.freshUntil - Date.now()));
      out.cacheScope = hints.public ? 'public' : 'private';
    }
    out.ttlMs ??= 0;
    out.cacheScope ??= 'private';
  }
  return out;
}
