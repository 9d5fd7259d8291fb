// Calls waiting for a 2026-07-28 host's retry (bridged-call.ts), daemon-wide: over HTTP the
// retry is a new request, perhaps on another connection. The host holds a `requestState`
// token: `mcpmux1.<payload>.<mac>`, the payload naming the parked call, the client it belongs
// to, what the call was (method and target) and when it expires, under an HMAC-SHA256 with a
// key this daemon draws at start and never shows. A retry is refused (-32602, "Invalid
// requestState: ...") when the token is forged or altered, expired, presented by another
// client or for another call, or used twice (a token names a parked call once: redeeming
// removes it).
//
// In a cluster (`cluster` in the config) the key is derived from the shared secret instead
// (cluster/identity.ts), and the payload names the daemon that holds the call (its id and
// address): any daemon can tell a real token from a forged one, and a retry that lands on
// another daemon is forwarded to the owner (transport/http/cluster-forward.ts). The calls
// themselves stay in the owner's memory: they hold its upstream calls open.

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

export interface Payload {
  /** The parked call. */
  id: string;
  /** The client it belongs to. */
  c: string;
  /** Digest of method and target. */
  t: string;
  /** Expiry, ms since the epoch. */
  exp: number;
  /** In a cluster: the id of the daemon that holds the call. */
  o?: string;
  /** In a cluster: that daemon's cluster.advertiseUrl (where a retry is forwarded). */
  u?: string;
}

/** How tokens are signed in a cluster: the shared key, and this daemon named as their owner. */
export interface ClusterSigning {
  key: Buffer;
  owner: string;
  ownerUrl: string;
}

export class ParkedCalls {
  private readonly key: Buffer;
  private readonly entries = new Map<string, Entry>();
  /** Each client's parked ids, oldest first (its quota, without scanning every entry). */
  private readonly byClient = new Map<string, Set<string>>();

  constructor(
    private readonly ttlMs = PARKED_TTL_MS,
    private readonly cluster?: ClusterSigning,
  ) {
    this.key = cluster?.key ?? randomBytes(32);
  }

  /** How many calls wait for their host's retry now. */
  get size(): number {
    return this.entries.size;
  }

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
    const owner = this.cluster && { o: this.cluster.owner, u: this.cluster.ownerUrl };
    const payload = Buffer.from(JSON.stringify({ id, c: client, t: digest, exp: Date.now() + this.ttlMs, ...owner } satisfies Payload)).toString('base64url');
    return `${PREFIX}${payload}.${mac(this.key, payload)}`;
  }

  /** What a retry's token names, taken out (once); throws -32602 saying why not. */
  redeem(token: string, client: string, method: string, target: string): Parked {
    const refuse = (why: string): never => {
      throw new RpcError(ErrorCode.InvalidParams, `Invalid requestState: ${why}`);
    };
    const opened = openToken(token, this.key);
    if (!opened.ok) return refuse(opened.why);
    const p = opened.payload;
    if (p.exp <= Date.now()) refuse('expired');
    // Another daemon's call (only a retry over HTTP /mcp is forwarded to its owner).
    if (p.o !== this.cluster?.owner) refuse('its call is held by another mcpmux daemon of this cluster; send the retry over HTTP (/mcp), which forwards it there');
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

}

/**
 * A token's payload once its MAC under `key` is checked, or why not (forged, altered,
 * malformed). What it says (expiry, client, call) is for the caller to judge.
 */
export function openToken(token: string, key: Buffer): { ok: true; payload: Payload } | { ok: false; why: string } {
  if (!token.startsWith(PREFIX)) return { ok: false, why: 'malformed' };
  const [payload, given, extra] = token.slice(PREFIX.length).split('.');
  if (!payload || !given || extra !== undefined) return { ok: false, why: 'malformed' };
  const want = Buffer.from(mac(key, payload));
  const got = Buffer.from(given);
  if (got.length !== want.length || !timingSafeEqual(got, want)) return { ok: false, why: 'not issued by this mcpmux, or altered' };
  try {
    const p = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Payload;
    if (typeof p !== 'object' || p === null) return { ok: false, why: 'malformed' };
    return { ok: true, payload: p };
  } catch {
    return { ok: false, why: 'malformed' };
  }
}

function mac(key: Buffer, payload: string): string {
  return createHmac('sha256', key).update(payload).digest('base64url');
}

function targetDigest(method: string, target: string): string {
  return createHash('sha256').update(`${method}\0${target}`).digest('base64url').slice(0, 22);
}
