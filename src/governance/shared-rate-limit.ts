// Rate limits shared by every daemon of a cluster (`store` in the config): the same token buckets
// as rate-limit.ts, with the same rules, keys and answers, but held in Redis, so that N daemons
// behind a balancer enforce one bucket per (rule, per-key) instead of N.
//
// One Lua script does a call's whole decision in one round trip: it refills every bucket the
// call's rules name (lazily, from Redis's own clock, so the daemons' clocks do not matter),
// and takes a token from each only if each has one. Redis runs a script alone, so two daemons
// can never both take the last token. Under load, calls that arrive while a script call is under
// way go together in the next one (group commit): at most one round trip per call, often fewer.
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
import { compileRules, limitedCall, refuse, type Refusal, type Rule } from './rate-limit.js';

/**
 * One batch of calls' decisions, each all or nothing, in the order given.
 * KEYS: the buckets of every call, call after call (a bucket may appear for several calls), each
 * a string "<tokens> <when, in ms of Redis's clock>".
 * ARGV: per call, its number of buckets n, then the burst and perMinute of each bucket's rule.
 * Returns per call two numbers: 0, 0 when it may pass (a token taken from each of its buckets),
 * else i, wait: its bucket with the longest wait (the first of equals), and the ms until it has
 * a token. Inside Redis: TIME, one MGET, and one SET with its expiry per bucket taken from.
 * A bucket that is not such a string (someone wrote there) counts as full, and is replaced:
 * MGET reads any other type as nil, and SET overwrites it.
 */
const TAKE_LUA = `
-- Redis 3.2/4 must be told that a script that read TIME may write (effects replication);
-- from Redis 5 on this is the default and the call does nothing.
if redis.replicate_commands then redis.replicate_commands() end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local held = redis.call('MGET', unpack(KEYS))
local state, rule, order, out = {}, {}, {}, {}
local k, a = 0, 1
while a <= #ARGV do
  local n = tonumber(ARGV[a])
  local tokens = {}
  local refused, wait = 0, 0
  for i = 1, n do
    local key = KEYS[k + i]
    local burst, rate = tonumber(ARGV[a + 2 * i - 1]), tonumber(ARGV[a + 2 * i]) / 60000
    local s = state[key]
    if not s then
      local t, at
      if held[k + i] then
        local x, y = string.match(held[k + i], '^(%S+) (%S+)$')
        t, at = tonumber(x), tonumber(y)
      end
      -- Not numbers, or not finite (inf, nan: someone wrote there): a full bucket.
      if t == nil or at == nil or t ~= t or at ~= at or math.abs(t) == math.huge or math.abs(at) == math.huge then t, at = burst, now end
      s = {t, at}
      state[key] = s
    end
    local t = math.min(burst, s[1] + math.max(0, now - s[2]) * rate)
    tokens[i] = t
    if t < 1 then
      local w = math.ceil((1 - t) / rate)
      if refused == 0 or w > wait then refused, wait = i, w end
    end
  end
  if refused == 0 then
    for i = 1, n do
      local key = KEYS[k + i]
      state[key] = {tokens[i] - 1, now}
      if not rule[key] then order[#order + 1] = key end
      rule[key] = {tonumber(ARGV[a + 2 * i - 1]), tonumber(ARGV[a + 2 * i]) / 60000}
    end
  end
  out[#out + 1] = refused
  out[#out + 1] = wait
  k = k + n
  a = a + 1 + 2 * n
end
for _, key in ipairs(order) do
  local s, r = state[key], rule[key]
  local full = math.min(math.ceil((r[1] - s[1]) / r[2]) + 1000, 1e12)
  redis.call('SET', key, string.format('%.17g %.17g', s[1], s[2]), 'PX', string.format('%d', full))
end
return out
`;

const COMMAND = 'mcpmuxRateLimits';
type Take = (numKeys: number, ...keysAndArgs: (string | number)[]) => Promise<number[]>;
/** At most this many keys in one script call (Lua's unpack has a bound of about 8 000). */
const MAX_BATCH_KEYS = 2_000;
/**
 * Calls waiting for their decision at most. A Redis that hangs (the connection open, no answer)
 * holds each script call for the command timeout; past this many waiting, a call is handled as
 * if the store were down (store.onError) rather than queue without bound.
 */
const MAX_QUEUED = 10_000;

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
  private readonly script: Take;
  /** A failure already logged (a Redis that answers with errors): once until a call succeeds again. */
  private failing = false;
  /** Calls waiting for the script call under way to finish (group commit: see decide). */
  private readonly queue: { buckets: Buckets; resolve: (r: Refusal | undefined) => void; reject: (err: Error) => void }[] = [];
  private sending = false;

  constructor(
    rules: readonly RateLimitRule[],
    private readonly store: SharedStore,
    private readonly log: Logger,
  ) {
    this.rules = compileRules(rules);
    this.prefixes = this.rules.map((r) => `rl:${createHash('sha256').update(r.id).digest('base64url').slice(0, 16)}:`);
    this.script = takeCommand(store.redis);
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
   * Takes a token from every bucket that applies, or from none, as the in-memory limiter's take:
   * undefined when the call may pass, else the refusal with the longest wait. Rejects when the
   * store cannot answer (what then is the interceptor's to decide).
   */
  take(client: string, server: string, method: string, tool: string | undefined): Promise<Refusal | undefined> {
    const buckets = this.bucketsOf(client, server, method, tool);
    return buckets ? this.decide(buckets) : Promise.resolve(undefined);
  }

  /**
   * The decision for one call's buckets: undefined when it may pass (a token taken from each),
   * else the refusal with the longest wait. Rejects when the store cannot answer.
   * Group commit: a call goes to Redis at once when no script call is under way; calls that come
   * while one is go together in the next (each still all or nothing, in the order they came).
   * So a lone call waits for nothing, and under load a daemon sends fewer, larger script calls.
   */
  private decide(buckets: Buckets): Promise<Refusal | undefined> {
    if (this.queue.length >= MAX_QUEUED) return Promise.reject(new Error(`more than ${MAX_QUEUED} rate-limited calls waiting for the shared store`));
    return new Promise((resolve, reject) => {
      this.queue.push({ buckets, resolve, reject });
      if (!this.sending) void this.send();
    });
  }

  private async send(): Promise<void> {
    this.sending = true;
    try {
      while (this.queue.length > 0) {
        let n = 0;
        let count = 0;
        while (n < this.queue.length && (n === 0 || count + this.queue[n]!.buckets.keys.length <= MAX_BATCH_KEYS)) count += this.queue[n++]!.buckets.keys.length;
        const batch = this.queue.splice(0, n);
        try {
          const answer = await this.ask(batch.map((p) => p.buckets));
          batch.forEach((p, j) => {
            const index = answer[2 * j]!;
            const r = index === 0 ? undefined : p.buckets.rules[index - 1]!;
            p.resolve(r && { retryAfterMs: answer[2 * j + 1]!, rule: r.index, burst: r.burst, perMinute: r.perMinute });
          });
        } catch (err) {
          // The calls queued behind this one would meet the same failure (a timeout, a Redis
          // gone): they are answered now, as store.onError says, instead of one timeout each.
          for (const p of [...batch, ...this.queue.splice(0)]) p.reject(err as Error);
        }
      }
    } finally {
      this.sending = false;
    }
  }

  /** One script call for a batch (one round trip). */
  private async ask(batch: Buckets[]): Promise<number[]> {
    // Just started: wait for the first connection rather than refuse the first calls.
    if (this.store.health === 'connecting') await this.store.ready();
    // Known down: no command (it would fail anyway, or wait out a timeout).
    if (this.store.health === 'down') throw new Error('store down');
    const keys: string[] = [];
    const args: number[] = [];
    for (const b of batch) {
      keys.push(...b.keys);
      args.push(b.keys.length, ...b.args);
    }
    const answer = await this.script(keys.length, ...keys, ...args);
    if (this.failing) this.failing = false;
    return answer;
  }

  /** Stands where the in-memory limiter would (after policy and pins: a refused call costs no token). */
  interceptor(): Interceptor {
    return (next) => (call) => {
      const limited = limitedCall(call);
      if (!limited) return next(call);
      const { session, server } = limited;
      const buckets = this.bucketsOf(session.client, server, call.method, limited.tool);
      if (!buckets) return next(call);
      const { target } = call;
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
