// The config's governance as the router takes it: policy first (a denied call costs no rate
// limit token), then rate limits, around the forward step; policy also decides what lists show.

import type { Config } from '../config/types.js';
import type { Governance } from '../router/forward.js';
import { Policy } from './policy.js';
import { RateLimiter } from './rate-limit.js';

export function createGovernance(config: Pick<Config, 'policy' | 'servers' | 'rateLimits' | 'limits'>): Governance {
  const policy = new Policy(config);
  const limiter = new RateLimiter(config.rateLimits, config.limits.maxRateLimitKeys);
  return {
    interceptors: limiter.active ? [policy.interceptor(), limiter.interceptor()] : [policy.interceptor()],
    serverAllows: (server, kind, name) => policy.serverAllows(server, kind, name),
    clientAllows: (client, kind, name) => policy.clientAllows(client, kind, name),
    filtersClients: (kind) => policy.filtersClients(kind),
  };
}
