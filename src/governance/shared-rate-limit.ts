// Rate limits shared by every daemon of a cluster (`store` in the config): the same token buckets
// as rate-limit.ts, with the same rules, keys and answers, but held in Redis, so that N daemons
// behind a balancer enforce one bucket per (rule, per-key) instead of N.
//
// One Lua script does a call's whole decision in one round trip: it refills every bucket the
// call's rules name (lazily, from Redis's own clock, so the daemons' clocks do not matter),
// and takes a token from each only if each has one. Redis runs a script alone, so two daemons
// can never both take the last token.
//
// Keys: `rl:<rule>:<length of client>:<client>:<server>:<tool>` under the store's prefix (a part
// the rule's `per` leaves out is empty). <rule> is a digest of what the rule is (its globs,
// figures and `per`, and which of identical rules), not of where it sits in the list: a reload
// that leaves a rule alone leaves its buckets as drained as they are (the in-memory limiter's
// adopt, for free), and a changed rule starts with full buckets.
// A bucket expires once it would be full again (a missing bucket is a full one), so Redis holds
// only the buckets that are draining: no key cap is needed.
//
// Redis down: `store.onError` "closed" refuses a limited call with -31007 (store.unavailable),
// "open" lets it through unlimited. The store logs the outage once; calls log nothing above debug.

import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { RateLimitRule } from '../config/types.js';
import type { Logger } from '../observe/logger.js';
import type { Interceptor } from '../router/forward.js';
import type { SharedStore } from '../store/store.js';
import { compileRules, LIMITED_METHODS, refuse, type Refusal, type Rule } from './rate-limit.js';

/**
 * KEYS: the call's buckets, each a string "<tokens> <when, in ms of Redis's clock>".
 * ARGV[2i-1], ARGV[2i]: the burst and perMinute of bucket i's rule.
 * Returns {0, 0} when the call may pass (a token taken from every bucket), else {i, wait}: the
 * bucket with the longest wait (the first of equals), and the ms until it has a token.
 * Five commands inside Redis for three buckets (TIME, one MGET, a SET with its expiry each).
 * A bucket that is not such a string (someone wrote there) counts as full, and is replaced:
 * MGET reads any other type as nil, and SET overwrites it.
 */
const TAKE_LUA = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local n = #KEYS
local held = redis.call('MGET', unpack(KEYS))
local tokens = {}
local refused, wait = 0, 0
for i = 1, n do
  local burst, rate = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i]) / 60000
  local t, at
  if held[i] then
    local a, b = string.match(held[i], '^(%S+) (%S+)$')
    t, at = tonumber(a), tonumber(b)
  end
  if t == nil or at == nil then t, at = burst, now end
  t = math.min(burst, t + math.max(0, now - at) * rate)
  tokens[i] = t
  if t < 1 then
    local w = math.ceil((1 - t) / rate)
    if refused == 0 or w > wait then refused, wait = i, w end
  end
end
if refused > 0 then return {refused, wait} end
for i = 1, n do
  local burst, rate = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i]) / 60000
  local full = math.min(math.ceil((burst - tokens[i] + 1) / rate) + 1000, 1e12)
  redis.call('SET', KEYS[i], string.format('%.17g %.17g', tokens[i] - 1, now), 'PX', string.format('%d', full))
end
return {0, 0}
`;

const COMMAND = 'mcpmuxRateLimit';
type Take = (numKeys: number, ...keysAndArgs: (string | number)[]) => Promise<[number, number]>;

/** A call's buckets: their keys, the script's ARGV (burst and perMinute of each), and their rules. */
interface Buckets {
  keys: string[];
  args: number[];
  rules: Rule[];
}

/** The script as a command of this connection (once per connection: a reload makes a new limiter). */
function takeCommand(redis: Redis): Take {
  const r = redis as unknown as Record<string, Take | undefined>;
  if (!r[COMMAND]) redis.defineCommand(COMMAND, { lua: TAKE_LUA });
  return (r[COMMAND] as Take).bind(redis);
}

export class SharedRateLimiter {
  private readonly rules: Rule[];
  /** Per rule: the start of its buckets' keys (`rl:<digest of the rule's id>:`). */
  private readonly prefixes: string[];
  private readonly take: Take;
  /** A failure already logged (a Redis that answers with errors): once until a call succeeds again. */
  private failing = false;

  constructor(
    rules: readonly RateLimitRule[],
    private readonly store: SharedStore,
    private readonly log: Logger,
  ) {
    this.rules = compileRules(rules);
    this.prefixes = this.rules.map((r) => `rl:${createHash('sha256').update(r.id).digest('base64url').slice(0, 16)}:`);
    this.take = takeCommand(store.redis);
  }

  get active(): boolean {
    return this.rules.length > 0;
  }

  /** The buckets of the rules that apply to a call (none: undefined, and Redis is not asked). */
  private bucketsOf(client: string, server: string, method: string, tool: string | undefined): Buckets | undefined {
    let b: Buckets | undefined;
    for (const r of this.rules) {
      if (!r.client(client) || !r.server(server)) continue;
      if (r.tool ? tool === undefined || !r.tool(tool) : false) continue;
      b ??= { keys: [], args: [], rules: [] };
      // The in-memory limiter's per-key, readable in redis-cli: a client name may hold any
      // character, so its length comes first; server names hold no ':'; the tool comes last.
      const who = r.perClient ? client : '';
      b.keys.push(`${this.prefixes[r.index]}${who.length}:${who}:${r.perServer ? server : ''}:${r.perTool ? (tool ?? method) : ''}`);
      b.args.push(r.burst, r.perMinute);
      b.rules.push(r);
    }
    return b;
  }

  /**
   * One decision in Redis for the buckets: undefined when the call may pass (a token taken from
   * each), else the refusal with the longest wait. Rejects when the store cannot answer.
   */
  private async decide({ keys, args, rules }: Buckets): Promise<Refusal | undefined> {
    // Just started: wait for the first connection rather than refuse the first calls.
    if (this.store.health === 'connecting') await this.store.ready();
    // Known down: no command (it would fail anyway, or wait out a timeout).
    if (this.store.health === 'down') throw new Error('store down');
    const [index, wait] = await this.take(keys.length, ...keys, ...args);
    if (this.failing) this.failing = false;
    if (index === 0) return undefined;
    const r = rules[index - 1]!;
    return { retryAfterMs: wait, rule: r.index, burst: r.burst, perMinute: r.perMinute };
  }

  /** Stands where the in-memory limiter would (after policy and pins: a refused call costs no token). */
  interceptor(): Interceptor {
    return (next) => (call) => {
      const { session, target } = call;
      if (!session || !LIMITED_METHODS.has(call.method)) return next(call);
      const server = call.upstream.name;
      const tool = call.method === 'tools/call' ? target?.upstreamName : undefined;
      const buckets = this.bucketsOf(session.client, server, call.method, tool);
      if (!buckets) return next(call);
      return this.decide(buckets).then(
        (refused) => (refused ? refuse(call, session, refused) : next(call)),
        (err: Error) => {
          this.failed(err);
          // "open": the limits are skipped while the store is away; "closed": the call fails, clearly.
          if (this.store.onError === 'open') return next(call);
          throw this.store.unavailable(`The rate limit on ${target ? target.name : `${call.method} on server "${server}"`}`);
        },
      );
    };
  }

  /**
   * A store that is down says so itself, once. A store that is up but answers with errors
   * (out of memory, a read-only replica, a hung server timing out) is said once here, until a
   * call goes through again; every failure is at debug.
   */
  private failed(err: Error): void {
    this.log.debug({ err: err.message }, 'rate limit: the shared store did not answer');
    if (this.store.health !== 'up' || this.failing) return;
    if (err.name !== 'ReplyError' && !/timed out/i.test(err.message)) return;
    this.failing = true;
    this.log.warn({ err: err.message, onError: this.store.onError }, 'rate limits: the shared store (Redis) answers with errors; limited calls are handled as store.onError says until it works again');
  }
}
