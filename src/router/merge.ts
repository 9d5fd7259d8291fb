// What a host is told at initialize: the union of the capabilities its live upstreams offer,
// and their instructions under a heading each, with a line for each server the config could
// not start for want of an environment variable.

import { isObject } from '../objects.js';
import type { Params } from '../protocol/mcp.js';
import type { ServerConfig } from '../config/types.js';
import type { ProtocolVersion } from '../protocol/versions.js';
import type { Upstream } from '../upstream/upstream.js';

/**
 * The union of what `ups` offer, as a host on `version` may be told it. With `late` (upstreams
 * still starting), tools, prompts and resources are offered whatever the live ones say: a
 * host only lists what the handshake said exists, and the late ones' items arrive with
 * list_changed. What else they offer (logging, completions, subscribe) cannot be added after
 * the handshake: a known limit.
 */
export function mergeCapabilities(ups: readonly Upstream[], version: ProtocolVersion, late = false): Params {
  let caps: Params = late ? { tools: { listChanged: true }, prompts: { listChanged: true }, resources: { listChanged: true } } : {};
  let subscribe = false;
  for (const up of ups) {
    const c = up.capabilities;
    // Keys mcpmux does not know (experimental, newer ones) pass through, merged.
    const { tools: _t, prompts: _p, resources: _r, logging: _l, completions: _c, tasks: _k, ...other } = c;
    caps = mergeDeep(caps, other);
    if (c.tools) caps.tools = { listChanged: true };
    if (c.prompts) caps.prompts = { listChanged: true };
    if (c.resources) {
      caps.resources = { listChanged: true };
      if ((c.resources as Params).subscribe) subscribe = true;
    }
    if (c.logging) caps.logging = {};
    if (c.completions) caps.completions = {};
    // Tasks arrived in 2025-11-25; older hosts are not offered them.
    if (c.tasks && version >= '2025-11-25') caps.tasks = mergeDeep((caps.tasks as Params) ?? {}, c.tasks as Params);
  }
  if (caps.resources && subscribe) (caps.resources as Params).subscribe = true;
  return caps;
}

/**
 * Every upstream's instructions under a heading with its name; then, under `## mcpmux`, a line
 * for each of `servers` that is unavailable (a missing variable), so the host and its model
 * know why its tools are absent. Variable names only, never values.
 */
export function mergeInstructions(ups: readonly Upstream[], servers: readonly ServerConfig[] = []): string | undefined {
  const parts: string[] = [];
  for (const up of ups) {
    const text = up.info?.instructions;
    if (text) parts.push(`## ${up.name}\n\n${text.trim()}`);
  }
  const unavailable = servers.filter((s) => s.unavailable).map((s) => unavailableLine(s.name, s.unavailable!.reason));
  if (unavailable.length) parts.push(`## mcpmux\n\n${unavailable.join('\n')}`);
  return parts.length ? parts.join('\n\n') : undefined;
}

/** One instructions line (and log message) about a server not started for want of a variable. */
export function unavailableLine(server: string, reason: string): string {
  return `Server "${server}" is unavailable (not started): ${reason} in the environment mcpmux runs in.`;
}

/** Union of two capability objects (objects merged key by key). */
function mergeDeep(a: Params, b: Params): Params {
  const out: Params = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] = isObject(prev) && isObject(v) ? mergeDeep(prev, v) : v;
  }
  return out;
}
