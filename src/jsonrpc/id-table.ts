// The requests in flight on one connection, keyed by id: an open-addressing hash table in plain
// arrays (linear probing, deletion by shifting back, no tombstones), not a Map.
//
// Why not a Map (issue 23, target 2): V8 replaces a Map's table when it fills up with deleted
// entries, and the table it leaves behind keeps pointing at every entry it held. Under load the
// table lives long enough to reach the old generation; the abandoned one then sits there,
// dead but uncollected until the next mark-compact, and holds young request entries alive
// through every scavenge (the remembered set counts it as a root). Those entries are promoted,
// and hold younger objects (promises, async frames) in turn: with 16 calls in flight and an
// observer subscribed, ~120 KB of every scavenge's ~160 KB of survivors went to the old
// generation this way, and a mark-compact followed every few thousand calls. Here a removed
// entry's slots are cleared at once, and a table outgrown is emptied before it is dropped, so
// nothing dead points at anything young.
//
// Sequential traffic (one request in flight) allocates nothing; ids compare with ===, as JSON
// ids are strings or finite numbers (0 and -0 are one key, as in a Map).

import { randomBytes } from 'node:crypto';
import type { JsonRpcId } from './message.js';

const INITIAL = 16;
/** Slots (two per entry at most) past which an emptied table goes back to INITIAL. */
const SHRINK_ABOVE = 256;
/** Marks a free slot in `keys` (no id is a symbol). */
const FREE: unique symbol = Symbol('free');

export class IdTable<V> {
  private keys: (JsonRpcId | typeof FREE)[] = [];
  private vals: (V | undefined)[] = [];
  /** Each slot's hash, so that moving and growing never hash a string again. */
  private hashes = new Int32Array(0);
  /** Each slot's insertion number: entries() gives insertion order, as a Map does. */
  private order = new Float64Array(0);
  private mask = 0;
  private count = 0;
  private inserted = 0;

  constructor() {
    this.allocate(INITIAL);
  }

  get size(): number {
    return this.count;
  }

  get(key: JsonRpcId): V | undefined {
    const i = this.find(key, hashOf(key));
    return i < 0 ? undefined : this.vals[i];
  }

  has(key: JsonRpcId): boolean {
    return this.find(key, hashOf(key)) >= 0;
  }

  set(key: JsonRpcId, value: V): void {
    const h = hashOf(key);
    const found = this.find(key, h);
    if (found >= 0) {
      this.vals[found] = value;
      return;
    }
    // At most half full: probes stay short.
    if ((this.count + 1) * 2 > this.keys.length) this.resize(this.keys.length * 2);
    const i = this.freeSlot(h);
    // -0 is kept as 0, as a Map keeps it.
    this.keys[i] = key === 0 ? 0 : key;
    this.vals[i] = value;
    this.hashes[i] = h;
    this.order[i] = this.inserted++;
    this.count++;
  }

  delete(key: JsonRpcId): boolean {
    let i = this.find(key, hashOf(key));
    if (i < 0) return false;
    // Shift back the entries after it in its run that would no longer be found past the gap.
    const mask = this.mask;
    for (let j = (i + 1) & mask; this.keys[j] !== FREE; j = (j + 1) & mask) {
      const home = this.hashes[j]! & mask;
      // The entry at j stays where it is when its home lies cyclically in (i, j].
      if (i <= j ? i < home && home <= j : i < home || home <= j) continue;
      this.keys[i] = this.keys[j]!;
      this.vals[i] = this.vals[j];
      this.hashes[i] = this.hashes[j]!;
      this.order[i] = this.order[j]!;
      i = j;
    }
    this.keys[i] = FREE;
    this.vals[i] = undefined;
    this.count--;
    // A burst grew it far: back to the first size once it is empty (the only allocation after
    // one). Not below SHRINK_ABOVE: traffic with a few dozen in flight empties the table often,
    // and shrinking then growing again each time was measurable (callgrind, 16 in flight).
    if (this.count === 0 && this.keys.length > SHRINK_ABOVE) this.resize(INITIAL);
    return true;
  }

  /** The entries in insertion order, as a copy: the caller may delete while it walks them. */
  entries(): [JsonRpcId, V][] {
    const slots: number[] = [];
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i] !== FREE) slots.push(i);
    slots.sort((a, b) => this.order[a]! - this.order[b]!);
    return slots.map((i) => [this.keys[i] as JsonRpcId, this.vals[i] as V]);
  }

  /** The values in insertion order, as a copy. */
  values(): V[] {
    return this.entries().map(([, v]) => v);
  }

  clear(): void {
    this.resize(INITIAL, false);
  }

  private find(key: JsonRpcId, h: number): number {
    // The probe starts one before the home slot so that its step runs on every lookup:
    // sequential ids rarely collide, and code V8 optimised before the first collision (with
    // the step never run) was thrown away at it, callers and all, and compiled again.
    let i = (h - 1) & this.mask;
    for (;;) {
      i = (i + 1) & this.mask;
      const k = this.keys[i];
      if (k === FREE) return -1;
      if (k === key) return i;
    }
  }

  /** The first free slot from the home of hash `h` on (the table is never full). */
  private freeSlot(h: number): number {
    let i = (h - 1) & this.mask;
    do i = (i + 1) & this.mask;
    while (this.keys[i] !== FREE);
    return i;
  }

  /** New arrays of `size` slots, with the entries moved over (unless `keep` is false). */
  private resize(size: number, keep = true): void {
    const { keys, vals, hashes, order } = this;
    this.allocate(size);
    this.count = 0;
    if (keep) {
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]!;
        if (key === FREE) continue;
        const j = this.freeSlot(hashes[i]!);
        this.keys[j] = key;
        this.vals[j] = vals[i];
        this.hashes[j] = hashes[i]!;
        this.order[j] = order[i]!;
        this.count++;
      }
    }
    // The old arrays are garbage now; emptied, they hold nothing alive (see the top).
    keys.fill(FREE);
    vals.fill(undefined);
  }

  private allocate(size: number): void {
    this.keys = new Array<JsonRpcId | typeof FREE>(size).fill(FREE);
    this.vals = new Array<V | undefined>(size).fill(undefined);
    this.hashes = new Int32Array(size);
    this.order = new Float64Array(size);
    this.mask = size - 1;
  }
}

/**
 * Per process and unknown to peers: a host picks its request ids, and ids chosen to share a
 * slot (multiples of 65 536, say, which a plain multiplicative hash sends to slot 0 at every
 * table size) would make each lookup walk every request in flight, up to
 * `limits.maxInFlightPerSession`: quadratic work for the price of ordinary requests.
 */
const SEED = randomBytes(4).readInt32LE(0);

/** A well-spread 32-bit hash of an id, seeded: integers by value, anything else by its text. */
function hashOf(key: JsonRpcId): number {
  let h: number;
  if (typeof key === 'number' && Number.isInteger(key) && Math.abs(key) <= 0x7fffffff) {
    h = (key | 0) ^ SEED;
  } else {
    const s = typeof key === 'number' ? String(key) : key;
    h = 0x811c9dc5 ^ SEED;
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  }
  // murmur3's finaliser: every input bit reaches the low bits the table uses.
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return h ^ (h >>> 16);
}
