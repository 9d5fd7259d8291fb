// The config's governance as the router takes it: policy first (a denied call costs no rate
// limit token), then rate limits, around the forward step; policy also decides what lists show.

import type { Config } from '../config/types.js';
import type { Governance } from '../router/forward.js';
import { Policy } from './policy.js';
import { RateLimiter } from './rate-limit.js';
import { SharedRateLimiter } from './shared-rate-limit.js';
import type { Logger } from '../observe/logger.js';
import type { SharedStore } from '../store/store.js';
import type { ToolPins } from './pins.js';
import { RpcError } from '../jsonrpc/message.js';
import { MuxError, type Params } from '../protocol/mcp.js';
import type { Interceptor } from '../router/forward.js';

/**
 * A held tool (pinning) is refused like a denied one, with what to do about it; so is any call
 * to a pinned server's tool while its approvals cannot be read (the shared store, pins-redis.ts).
 */
function pinsInterceptor(pins: ToolPins): Interceptor {
  return (next) => (call) => {
    const { target } = call;
    if (call.method !== 'tools/call' || !target) return next(call);
    const refused = pins.refusal(call.upstream.name, `Calling ${target.name} (its server's tools are pinned)`);
    if (refused) return Promise.reject(refused);
    if (pins.callable(call.upstream.name, target.upstreamName)) return next(call);
    return Promise.reject(
      new RpcError(
        MuxError.ToolChanged,
        `Tool ${target.name} changed since it was approved and is held; an admin approves it with: mcpmux tools --approve ${call.upstream.name}/${target.upstreamName}`,
      ),
    );
  };
}

/**
 * Tells pinning what each tools/list page showed, so that what a server no longer lists is
 * pruned (pins.ts). Innermost: it sees the upstream's own answer.
 */
function pinsListings(pins: ToolPins): Interceptor {
  // Only tools/list is looked at: every other call passes straight on, with no await added.
  return (next) => (call) => {
    if (call.method !== 'tools/list') return next(call);
    return next(call).then((result) => {
      if (Array.isArray(result.tools)) {
        const names = (result.tools as unknown[]).flatMap((t) => (typeof (t as Params | null)?.name === 'string' ? [(t as Params).name as string] : []));
        const last = typeof result.nextCursor !== 'string' || result.nextCursor === '';
        pins.page(call.upstream, call.params.cursor === undefined, names, last);
      }
      return result;
    });
  };
}

/**
 * `previous`: the rate limiter of the governance this one replaces (a reload), whose buckets of
 * unchanged rules carry over. The result's `limiter` is the one to pass at the next reload.
 * `shared`: the store, when the config has one: the buckets live there, shared by every daemon
 * (a reload needs no adopt: an unchanged rule names the same keys).
 */
export function createGovernance(
  config: Pick<Config, 'policy' | 'servers' | 'rateLimits' | 'limits'>,
  pins?: ToolPins,
  previous?: RateLimiter | SharedRateLimiter,
  shared?: { store: SharedStore; log: Logger },
): Governance & { readonly limiter: RateLimiter | SharedRateLimiter } {
  const policy = new Policy(config);
  const limiter = shared
    ? new SharedRateLimiter(config.rateLimits, shared.store, shared.log)
    : new RateLimiter(config.rateLimits, config.limits.maxRateLimitKeys).adopt(previous instanceof RateLimiter ? previous : undefined);
  // Only a pinned server's tools can be held: with none, calls skip the check.
  const holds = pins !== undefined && config.servers.some((s) => s.pinTools);
  const interceptors = [policy.interceptor(), ...(holds ? [pinsInterceptor(pins)] : []), ...(limiter.active ? [limiter.interceptor()] : []), ...(pins ? [pinsListings(pins)] : [])];
  return {
    limiter,
    interceptors,
    ...(pins && { toolVisible: (server: string, tool: Params) => pins.visible(server, tool), toolHeld: (server: string, tool: string) => !pins.callable(server, tool) }),
    serverAllows: (server, kind, name) => policy.serverAllows(server, kind, name),
    clientAllows: (client, kind, name) => policy.clientAllows(client, kind, name),
    filtersClients: (kind) => policy.filtersClients(kind),
  };
}
