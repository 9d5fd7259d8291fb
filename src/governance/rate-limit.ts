// Rate limits (`rateLimits: [{client, server, tool, perMinute, burst, per}]`): token buckets in
// front of the upstream. Every rule whose globs match a call applies, and the most restrictive
// answer wins: a call passes only if every matching bucket has a token, and then takes one from
// each. A refused call never reaches the upstream, and mcpmux never retries it by itself.
//
// What is counted: the host requests that name one item of one server (tools/call, prompts/get,
// resources/read, resources/subscribe, completion/complete). `tool` matches the upstream's own
// tool name, so a rule with a tool glob other than "*" counts tools/call only. Lists, task
// follow-ups and mcpmux's own requests are never limited.
//
// Buckets are created on first use, keyed by the rule and by the values of its `per` fields
// (default client, server and tool: each its own bucket), refilled lazily, and kept in an LRU
// with a cap (`limits.maxRateLimitKeys`): the idle ones go first. A bucket that is evicted
// comes back full, which only errs on the lenient side, and only past the cap.
//
// A reload builds a new limiter that adopts the old one's buckets of every rule it did not
// change (same globs, figures and `per`): a reload that leaves a rule alone leaves its drained
// buckets drained. A new or changed rule starts with full buckets.
//
// With `store` in the config the buckets live in Redis instead, shared by every daemon
// (shared-rate-limit.ts: the same rules, keys and answers); this file's limiter is then unused.

import { performance } from 'node:perf_hooks';
import { LRUCache } from 'lru-cache';
import { settingsClient, type RateLimitRule } from '../config/types.js';
import { RpcError } from '../jsonrpc/message.js';
import { publishLimited } from '../observe/events.js';
import { MuxError } from '../protocol/mcp.js';
import type { Result } from '../jsonrpc/endpoint.js';
import type { Call, Interceptor } from '../router/forward.js';
import type { SessionPort } from '../router/session-port.js';
import { compileGlobs, type Matcher } from './glob.js';

/** The methods a rate limit counts. */
export const LIMITED_METHODS: ReadonlySet<string> = new Set(['tools/call', 'prompts/get', 'resources/read', 'resources/subscribe', 'completion/complete']);

/** The tool a limited call counts against: the upstream's name of a tools/call's tool, else none. */
export function limitedTool(call: Call): string | undefined {
  return call.method === 'tools/call' ? call.target?.upstreamName : undefined;
}

export interface Rule {
  index: number;
  /** What the rule is (its settings, and which of identical rules): a reload that keeps it keeps its buckets (adopt). */
  id: string;
  client: Matcher;
  server: Matcher;
  /** Undefined for "*": the rule also counts methods other than tools/call. */
  tool: Matcher | undefined;
  perClient: boolean;
  perServer: boolean;
  perTool: boolean;
  burst: number;
  /** Tokens per millisecond. */
  rate: number;
  perMinute: number;
}

interface Bucket {
  tokens: number;
  /** performance.now() of the last refill. */
  at: number;
}

/** A bucket near its limit, as the console shows it (`*`: the rule does not count per that field). */
export interface NearLimit {
  rule: number;
  client: string;
  server: string;
  tool: string;
  tokens: number;
  burst: number;
  perMinute: number;
}

export interface Refusal {
  retryAfterMs: number;
  rule: number;
  burst: number;
  perMinute: number;
}

/**
 * A rule's client glob. An unmapped OIDC host (`oidc:<value>`) is matched by its own name
 * (`oidc:*` globs) and by `oidc`, whose settings it has; with `per` client each such host still
 * gets a bucket of its own.
 */
function clientMatcher(glob: string): (client: string) => boolean {
  const own = compileGlobs([glob]);
  return (client) => own(client) || (settingsClient(client) !== client && own(settingsClient(client)));
}

/** The config's rules as the limiters match them (the in-memory one here, the shared one in shared-rate-limit.ts). */
export function compileRules(rules: readonly RateLimitRule[]): Rule[] {
  const seen = new Map<string, number>();
  return rules.map((r, index) => {
    const same = JSON.stringify([r.client, r.server, r.tool, r.perMinute, r.burst, r.per]);
    const nth = seen.get(same) ?? 0;
    seen.set(same, nth + 1);
    return {
      index,
      id: `${same}#${nth}`,
      client: clientMatcher(r.client),
      server: compileGlobs([r.server]),
      tool: r.tool === '*' ? undefined : compileGlobs([r.tool]),
      perClient: r.per.includes('client'),
      perServer: r.per.includes('server'),
      perTool: r.per.includes('tool'),
      burst: r.burst,
      rate: r.perMinute / 60_000,
      perMinute: r.perMinute,
    };
  });
}

/**
 * A rule's answer for the last call it saw: whether it applies and its bucket's key. Under load
 * call after call has the same client, server and tool, and then take() neither runs the
 * rule's globs nor builds a key string (the same string's hash is kept, so the LRU lookup is cheap).
 */
interface Memo {
  client: string;
  server: string;
  method: string;
  tool: string | undefined;
  applies: boolean;
  /** '' when the rule does not apply. */
  key: string;
}

/** How long nearLimit's answer to one question is reused (the console polls every 2 s). */
const NEAR_CACHE_MS = 1000;
/** Questions nearLimit keeps answers to (one per client that asks, and the admins'). */
const NEAR_CACHE_KEYS = 64;

export class RateLimiter {
  private readonly rules: Rule[];
  private readonly buckets: LRUCache<string, Bucket>;
  private readonly memos: (Memo | undefined)[];
  /** The buckets one take() found with a token (reused: no array per call). */
  private readonly taken: Bucket[] = [];
  /** nearLimit's recent answers, by question (share, max, client). */
  private readonly nearCache = new Map<string, { at: number; rows: NearLimit[] }>();

  constructor(
    rules: readonly RateLimitRule[],
    maxKeys: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.rules = compileRules(rules);
    // The cap as a size of one per key, not `max`: with `max`, lru-cache allocates its index
    // arrays for every possible key up front (100 000 keys by default: ~2.7 MB held by every
    // daemon, even one with no rate limits). Sized this way they grow with the keys in use;
    // the cap and the least-recently-used eviction are the same.
    this.buckets = new LRUCache({ maxSize: maxKeys, sizeCalculation: () => 1 });
    this.memos = this.rules.map(() => undefined);
  }

  /**
   * Takes over `previous`'s buckets of the rules both have (a reload): least recently used
   * first, so the LRU order and the key cap hold as before. Returns this limiter.
   */
  adopt(previous: RateLimiter | undefined): this {
    if (!previous) return this;
    // Bucket keys start with the rule's index (short; the id is not): old index -> new index.
    const indexOf = new Map(this.rules.map((r) => [r.id, r.index]));
    const moved = new Map<string, number>();
    for (const r of previous.rules) if (indexOf.has(r.id)) moved.set(String(r.index), indexOf.get(r.id)!);
    for (const key of previous.buckets.rkeys()) {
      const cut = key.indexOf('\0');
      const index = moved.get(key.slice(0, cut));
      const bucket = previous.buckets.peek(key);
      if (index !== undefined && bucket) this.buckets.set(`${index}${key.slice(cut)}`, bucket);
    }
    return this;
  }

  /** How many buckets are held now. */
  get size(): number {
    return this.buckets.size;
  }

  get active(): boolean {
    return this.rules.length > 0;
  }

  /**
   * The buckets near their limit now (the web console): at most `share` of their burst left,
   * or less than one call's token; emptiest first, at most `max`; only `client`'s when named
   * (a client that is no admin sees no one else's). Read without refilling or touching them
   * (their LRU order stays). A walk of every bucket (up to limits.maxRateLimitKeys), so an
   * answer is kept NEAR_CACHE_MS per question: a client polling /status in a loop costs one
   * walk a second, not one a request. Only the index prefix is parsed before the fill is
   * known, and the emptiest `max` are kept by insertion, never a sort of them all.
   */
  nearLimit(share = 0.2, max = 50, client?: string): NearLimit[] {
    const now = this.now();
    const asked = `${share}\0${max}\0${client ?? ''}`;
    const hit = this.nearCache.get(asked);
    if (hit && now - hit.at < NEAR_CACHE_MS) return hit.rows;
    if (this.nearCache.size >= NEAR_CACHE_KEYS) this.nearCache.clear();
    const kept: { fill: number; key: string; tokens: number; r: Rule }[] = [];
    for (const [key, b] of this.buckets.entries()) {
      const cut = key.indexOf('\0');
      const r = this.rules[Number(key.slice(0, cut))];
      if (!r) continue;
      const tokens = Math.min(r.burst, b.tokens + (now - b.at) * r.rate);
      if (tokens >= 1 && tokens > r.burst * share) continue;
      const fill = tokens / r.burst;
      if (kept.length >= max && fill >= kept[kept.length - 1]!.fill) continue;
      if (client !== undefined && key.slice(cut + 1, key.indexOf('\0', cut + 1)) !== client) continue;
      let at = kept.length;
      while (at > 0 && kept[at - 1]!.fill > fill) at--;
      kept.splice(at, 0, { fill, key, tokens, r });
      if (kept.length > max) kept.pop();
    }
    const rows = kept.map(({ key, tokens, r }) => {
      const [, who, server, tool] = key.split('\0');
      return { rule: r.index, client: who || '*', server: server || '*', tool: tool || '*', tokens: Math.floor(tokens * 100) / 100, burst: r.burst, perMinute: r.perMinute };
    });
    this.nearCache.set(asked, { at: now, rows });
    return rows;
  }

  /**
   * Takes a token from every bucket that applies, or from none: undefined when the call may
   * pass, else the refusal with the longest wait among the empty buckets.
   */
  take(client: string, server: string, method: string, tool: string | undefined): Refusal | undefined {
    const now = this.now();
    let refusal: Refusal | undefined;
    const taken = this.taken;
    let n = 0;
    for (const r of this.rules) {
      let m = this.memos[r.index];
      if (m === undefined || m.client !== client || m.server !== server || m.method !== method || m.tool !== tool) {
        // A miss (the host alternates clients, servers or tools): the key is built only for a rule
        // that applies, and the rule's one memo is updated in place (no object per rule per miss).
        const applies = r.client(client) && r.server(server) && (r.tool ? tool !== undefined && r.tool(tool) : true);
        const key = applies ? `${r.index}\0${r.perClient ? client : ''}\0${r.perServer ? server : ''}\0${r.perTool ? (tool ?? method) : ''}` : '';
        if (m === undefined) m = this.memos[r.index] = { client, server, method, tool, applies, key };
        else {
          m.client = client;
          m.server = server;
          m.method = method;
          m.tool = tool;
          m.applies = applies;
          m.key = key;
        }
      }
      if (!m.applies) continue;
      let b = this.buckets.get(m.key);
      if (!b) this.buckets.set(m.key, (b = { tokens: r.burst, at: now }));
      b.tokens = Math.min(r.burst, b.tokens + (now - b.at) * r.rate);
      b.at = now;
      if (b.tokens >= 1) {
        taken[n++] = b;
        continue;
      }
      const wait = Math.ceil((1 - b.tokens) / r.rate);
      if (!refusal || wait > refusal.retryAfterMs) refusal = { retryAfterMs: wait, rule: r.index, burst: r.burst, perMinute: r.perMinute };
    }
    if (!refusal) for (let i = 0; i < n; i++) taken[i]!.tokens -= 1;
    // No bucket stays referenced from here after the call (an evicted one could not be collected).
    taken.fill(undefined as never, 0, n);
    return refusal;
  }

  /** Stands in front of the upstream (after policy: a denied call costs no token). */
  interceptor(): Interceptor {
    // limitedCall's checks without its object (none per call): the same LIMITED_METHODS and limitedTool.
    return (next) => (call) => {
      const { session, method } = call;
      if (!session || !LIMITED_METHODS.has(method)) return next(call);
      const refused = this.take(session.client, call.upstream.name, method, limitedTool(call));
      if (!refused) return next(call);
      return refuse(call, session, refused);
    };
  }
}

/** What the shared limiter looks at in a call (LIMITED_METHODS and limitedTool, as above): undefined when its method is never limited (or no host sent it). */
export function limitedCall(call: Call): { session: SessionPort; server: string; tool: string | undefined } | undefined {
  const { session } = call;
  if (!session || !LIMITED_METHODS.has(call.method)) return undefined;
  return { session, server: call.upstream.name, tool: limitedTool(call) };
}

/**
 * The answer to a limited call (both limiters give the same): counted, recorded on the call's
 * event, and told to the host with how long to wait.
 */
export function refuse(call: Call, session: SessionPort, refused: Refusal): Promise<Result> {
  const { target } = call;
  const server = call.upstream.name;
  const tool = limitedTool(call);
  const { retryAfterMs } = refused;
  publishLimited({ sessionId: session.id, client: session.client, server, method: call.method, tool, retryAfterMs, rule: refused.rule });
  if (call.event) {
    call.event.outcome = 'limited';
    call.event.retryAfterMs = retryAfterMs;
  }
  const what = target ? `${target.name}` : `${call.method} on server "${server}"`;
  const text = `Rate limit reached for ${what}: at most ${refused.burst} at once and ${refused.perMinute} per minute. Try again in ${(retryAfterMs / 1000).toFixed(1)} s.`;
  // A tool result, so the model reads why and when, and can adapt; other methods get an error.
  if (call.method === 'tools/call') return Promise.resolve({ content: [{ type: 'text', text }], isError: true, _meta: { retryAfterMs } });
  return Promise.reject(new RpcError(MuxError.RateLimited, text, { retryAfterMs }));
}
