// Calls waiting for a 2026-07-28 host's retry (bridged-call.ts), daemon-wide: over HTTP the
// retry is a new request, perhaps on another connection. The host holds a `requestState`
// token: `mcpmux1.<payload>.<mac>`, the payload naming the parked call, the client it belongs
// to, what the call was (method and target) and when it expires, under an HMAC-SHA256 with a
// key this daemon draws at start and never shows. A retry is refused (-32602, "Invalid
// requestState: ...") when the token is forged or altered, expired, presented by another
// client or for another call, or used twice (a token names a parked call once: redeeming
// removes it).

import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { ErrorCode, RpcError } from '../jsonrpc/message.js';
import { endWaiting, type RequestEvent } from '../observe/events.js';
import type { BridgedCall } from './bridged-call.js';

const PREFIX = 'mcpmux1.';

/** How long a parked call waits for the host's retry before its questions fail upstream. */
export const PARKED_TTL_MS = 5 * 60_000;

/** Parked calls at once; beyond, the oldest is given up (each holds an upstream call open). */
const MAX_PARKED = 1024;
/** Parked calls of one client at once: one client cannot push everyone else's out. */
const MAX_PARKED_PER_CLIENT = 64;

/**
 * What a token stands for: a call of mcpmux's own waiting for answers (a legacy server asked),
 * or a 2026-07-28 server's own requestState, kept here so that the host holds only mcpmux's
 * token: bound to the client and the call like any of ours, and used once. `record`: the
 * call's record for observers, kept open across its rounds (a BridgedCall holds its own).
 */
export type Parked = { call: BridgedCall } | { upstreamState: string | undefined; record?: RequestEvent };

interface Entry {
  parked: Parked;
  client: string;
  timer: NodeJS.Timeout;
}

interface Payload {
  /** The parked call. */
  id: string;
  /** The client it belongs to. */
  c: string;
  /** Digest of method and target. */
  t: string;
  /** Expiry, ms since the epoch. */
  exp: number;
}

export class ParkedCalls {
  private readonly key = randomBytes(32);
  private readonly entries = new Map<string, Entry>();
  /** Each client's parked ids, oldest first (its quota, without scanning every entry). */
  private readonly byClient = new Map<string, Set<string>>();

  constructor(private readonly ttlMs = PARKED_TTL_MS) {}

  /** Parks `call` (or an upstream's state) until the host comes back; returns the token it must bring. */
  park(parked: Parked, client: string, method: string, target: string): string {
    const held = this.byClient.get(client);
    if (held && held.size >= MAX_PARKED_PER_CLIENT) this.drop(held.values().next().value!, `client ${client} has too many calls waiting for input; its oldest was given up`);
    else if (this.entries.size >= MAX_PARKED) {
      const [oldest] = this.entries.keys();
      this.drop(oldest!, 'too many calls waiting for their hosts; the oldest was given up');
    }
    const id = randomBytes(16).toString('base64url');
    const digest = targetDigest(method, target);
    const timer = setTimeout(() => this.drop(id, 'the host did not come back with the input in time', 'timeout'), this.ttlMs);
    timer.unref();
    this.entries.set(id, { parked, client, timer });
    // Looked up after the drops above: one may have emptied (and removed) this client's set.
    let mine = this.byClient.get(client);
    if (!mine) this.byClient.set(client, (mine = new Set()));
    mine.add(id);
    const payload = Buffer.from(JSON.stringify({ id, c: client, t: digest, exp: Date.now() + this.ttlMs } satisfies Payload)).toString('base64url');
    return `${PREFIX}${payload}.${this.mac(payload)}`;
  }

  /** What a retry's token names, taken out (once); throws -32602 saying why not. */
  redeem(token: string, client: string, method: string, target: string): Parked {
    const refuse = (why: string): never => {
      throw new RpcError(ErrorCode.InvalidParams, `Invalid requestState: ${why}`);
    };
    const [payload, mac, extra] = token.slice(PREFIX.length).split('.');
    if (!payload || !mac || extra !== undefined) refuse('malformed');
    const want = Buffer.from(this.mac(payload!));
    const got = Buffer.from(mac!);
    if (got.length !== want.length || !timingSafeEqual(got, want)) refuse('not issued by this mcpmux, or altered');
    let p: Payload;
    try {
      p = JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8')) as Payload;
    } catch {
      return refuse('malformed');
    }
    if (p.exp <= Date.now()) refuse('expired');
    if (p.c !== client) refuse('issued to another client');
    if (p.t !== targetDigest(method, target)) refuse(`issued for another request than this ${method}`);
    const entry = this.take(p.id);
    if (!entry) return refuse('already used, or its call has ended');
    return entry.parked;
  }

  /** `call`'s tokens, refused from now on (its caller gives the call up). */
  forget(call: BridgedCall): void {
    for (const [id, entry] of this.entries) if ('call' in entry.parked && entry.parked.call === call) this.take(id);
  }

  private drop(id: string, why: string, outcome: 'cancelled' | 'timeout' = 'cancelled'): void {
    const parked = this.take(id)?.parked;
    if (!parked) return;
    if ('call' in parked) parked.call.abandon(why, outcome);
    else if (parked.record) endWaiting(parked.record, outcome);
  }

  /** The entry out of every index, its timer stopped. */
  private take(id: string): Entry | undefined {
    const entry = this.entries.get(id);
    if (!entry) return undefined;
    clearTimeout(entry.timer);
    this.entries.delete(id);
    const mine = this.byClient.get(entry.client);
    mine?.delete(id);
    if (mine?.size === 0) this.byClient.delete(entry.client);
    return entry;
  }

  private mac(payload: string): string {
    return createHmac('sha256', this.key).update(payload).digest('base64url');
  }
}

function targetDigest(method: string, target: string): string {
  return createHash('sha256').update(`${method}\0${target}`).digest('base64url').slice(0, 22);
}
