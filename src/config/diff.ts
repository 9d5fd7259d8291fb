// What a reload changes: the old config against the new one, as a plan the runtime carries out.
// Servers are compared key by key: what a connection is made of (command, URL, environment,
// headers, sharing, roots) needs the server restarted; what only governs or names its items
// (allow/deny, prefix, resource namespacing, pinning, timeouts, restart policy) is applied to
// the running connection in place.

import type { Config, ServerConfig } from './types.js';

/** The kinds of list a host can be told changed. */
export type ListKind = 'tools' | 'prompts' | 'resources';

export interface ReloadPlan {
  /** Servers to start (new, or no longer disabled), in the new config's order. */
  added: ServerConfig[];
  /** Servers to stop (gone, or now disabled). */
  removed: string[];
  /** Servers whose connection changed: stopped, then started anew. */
  restarted: ServerConfig[];
  /** Servers whose running connection takes new settings, and which of its lists that can change. */
  updated: { server: ServerConfig; lists: ListKind[] }[];
  /** Lists that global or per-client policy changes (pinning too: it may hide tools). */
  policyLists: ListKind[];
  /** Settings that only a restart of mcpmux applies (listener address, message size, namespace...). */
  needsRestart: string[];
}

/** Server keys that make up the connection: a change restarts the upstream. */
const CONNECTION_KEYS = ['transport', 'command', 'args', 'env', 'inheritEnv', 'cwd', 'url', 'headers', 'sharing', 'roots', 'era', 'oauth'] as const;

/** Settings of mcpmux itself that cannot change under running listeners and sessions. */
const RESTART_ONLY: [string, (c: Config) => unknown][] = [
  ['listen.host', (c) => c.listen.host],
  ['listen.port', (c) => c.listen.port],
  ['listen.adminPort', (c) => c.listen.adminPort ?? 0],
  ['listen.adminHost', (c) => c.listen.adminHost],
  ['limits.maxMessageBytes', (c) => c.limits.maxMessageBytes],
  ['namespace', (c) => c.namespace],
  ['metrics', (c) => c.metrics],
  // The tracer (and its exporter) is set up once, at start, like the metrics.
  ['telemetry', (c) => c.telemetry],
  // The store's connection and the cluster's identity are set up once, at start.
  ['store', (c) => c.store],
  ['cluster', (c) => c.cluster],
];

export function planReload(old: Config, next: Config): ReloadPlan {
  const enabled = (c: Config): Map<string, ServerConfig> => new Map(c.servers.filter((s) => !s.disabled).map((s) => [s.name, s]));
  const before = enabled(old);
  const after = enabled(next);
  const plan: ReloadPlan = { added: [], removed: [], restarted: [], updated: [], policyLists: [], needsRestart: [] };

  for (const name of before.keys()) if (!after.has(name)) plan.removed.push(name);
  for (const [name, s] of after) {
    const was = before.get(name);
    if (!was) plan.added.push(s);
    else if (CONNECTION_KEYS.some((k) => !same(was[k as keyof ServerConfig], s[k as keyof ServerConfig]))) plan.restarted.push(s);
    else if (!same(was, s)) plan.updated.push({ server: s, lists: serverLists(was, s) });
  }

  // Pinning of a server that stays (one that comes or goes announces itself).
  const pinsChanged = [...after].some(([name, s]) => before.has(name) && before.get(name)!.pinTools !== s.pinTools);
  for (const kind of ['tools', 'prompts', 'resources'] as const) {
    const policy = (c: Config) => [c.policy[kind], Object.entries(c.policy.clients).map(([id, l]) => [id, l[kind]])];
    if (!same(policy(old), policy(next)) || (kind === 'tools' && pinsChanged)) plan.policyLists.push(kind);
  }
  // What a session's tools/list is: its surface (all or search, what search mode lists) and its toolset's globs.
  if (!plan.policyLists.includes('tools') && (!same(old.surface, next.surface) || !same(old.toolsets, next.toolsets))) plan.policyLists.push('tools');
  // A server's rank decides contested names: a new order can move names between servers.
  const order = (c: Config) => c.servers.map((s) => s.name).filter((n) => before.has(n) && after.has(n));
  if (!same(order(old), order(next))) for (const kind of ['tools', 'prompts'] as const) if (!plan.policyLists.includes(kind)) plan.policyLists.push(kind);

  for (const [key, get] of RESTART_ONLY) if (!same(get(old), get(next))) plan.needsRestart.push(key);
  return plan;
}

/** Which lists an in-place change of one server can change. */
function serverLists(was: ServerConfig, now: ServerConfig): ListKind[] {
  const out: ListKind[] = [];
  const prefixChanged = was.prefix !== now.prefix;
  if (prefixChanged || !same(was.tools, now.tools) || was.pinTools !== now.pinTools) out.push('tools');
  if (prefixChanged || !same(was.prompts, now.prompts)) out.push('prompts');
  if (!same(was.resources, now.resources)) out.push('resources');
  return out;
}

/** Both configs are built by the same loader, so equal settings serialise alike. */
function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The config a reload puts in force: `next`, but with the settings that need a restart kept as
 * they run now, so every part of mcpmux keeps seeing one consistent value (the listener's port,
 * the separator names were built with). The next reload reports them again.
 */
export function inForce(old: Config, next: Config): Config {
  return {
    ...next,
    listen: { ...next.listen, host: old.listen.host, port: old.listen.port, adminPort: old.listen.adminPort, adminHost: old.listen.adminHost },
    limits: { ...next.limits, maxMessageBytes: old.limits.maxMessageBytes },
    namespace: old.namespace,
    metrics: old.metrics,
    telemetry: old.telemetry,
    store: old.store,
    cluster: old.cluster,
  };
}

/** True when the plan changes nothing about servers or lists (the file was saved unchanged, say). */
export function planIsEmpty(p: ReloadPlan): boolean {
  return p.added.length + p.removed.length + p.restarted.length + p.updated.length + p.policyLists.length === 0;
}
