// The requests in flight on one connection, keyed by id: a Map whose first entry lives in a
// field. A host calling one tool at a time has one request in flight, added and removed once
// per call; in V8 a Map that delete() leaves (nearly) empty reallocates its table (a runtime
// call and ~150 bytes of garbage), on each of the two tables a call passes through (issue 23).
// With the slot, sequential traffic touches no Map at all; concurrent traffic goes to the Map.

export class SlotMap<K, V> {
  private slotKey: K | undefined;
  private slotValue: V | undefined;
  private slotFull = false;
  private readonly rest = new Map<K, V>();

  get size(): number {
    return (this.slotFull ? 1 : 0) + this.rest.size;
  }

  get(key: K): V | undefined {
    if (this.slotFull && this.slotKey === key) return this.slotValue;
    return this.rest.size === 0 ? undefined : this.rest.get(key);
  }

  has(key: K): boolean {
    return (this.slotFull && this.slotKey === key) || (this.rest.size !== 0 && this.rest.has(key));
  }

  set(key: K, value: V): void {
    if (this.slotFull && this.slotKey === key) {
      this.slotValue = value;
    } else if (!this.slotFull && this.rest.size === 0) {
      // Only into an empty table: the slot's entry is then always the oldest (insertion order kept).
      this.slotKey = key;
      this.slotValue = value;
      this.slotFull = true;
    } else {
      this.rest.set(key, value);
    }
  }

  delete(key: K): boolean {
    if (this.slotFull && this.slotKey === key) {
      this.slotFull = false;
      this.slotKey = undefined;
      this.slotValue = undefined;
      return true;
    }
    return this.rest.size !== 0 && this.rest.delete(key);
  }

  /** The entries in insertion order, as a copy: the caller may delete while it walks them. */
  entries(): [K, V][] {
    const out: [K, V][] = this.slotFull ? [[this.slotKey as K, this.slotValue as V]] : [];
    for (const e of this.rest) out.push(e);
    return out;
  }

  clear(): void {
    this.slotFull = false;
    this.slotKey = undefined;
    this.slotValue = undefined;
    this.rest.clear();
  }
}
