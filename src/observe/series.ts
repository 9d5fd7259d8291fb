// Counters and histograms for the per-request series, kept in plain tables and handed to
// prom-client's registry only when it is scraped.
//
// Why not prom-client's own Counter and Histogram: each inc/observe takes a labels object and
// hashes it into a string (sorting its keys), which cost ~1 µs and several short-lived objects
// per call; with five series updated per request that was a third of mcpmux's CPU per call
// (measured in the bench's governance run). Here a sample is found by walking nested Maps with
// the label values, which allocates nothing once the series exists. The registry reads these
// through the same `get()` interface its own metrics implement, so the exposition text,
// default metrics and content type stay prom-client's.

import type { Registry } from 'prom-client';

type Labels = Record<string, string | number>;

/** What prom-client's registry reads from a metric when it is scraped. */
interface Snapshot {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  values: { labels: Labels; value: number; metricName?: string }[];
}

/** Nested maps from label values to one entry per label set. */
class Table<E> {
  private readonly root = new Map<string, unknown>();
  readonly entries: { labels: Labels; entry: E }[] = [];

  constructor(
    readonly labelNames: readonly string[],
    private readonly make: () => E,
  ) {}

  /** The entry for these label values (as many as labelNames, in order). Allocates only for a new series. */
  get(v0: string, v1 = '', v2 = '', v3 = '', v4 = ''): E {
    const n = this.labelNames.length;
    let level = this.root;
    let last = v0;
    if (n >= 2) (level = sub(level, v0)), (last = v1);
    if (n >= 3) (level = sub(level, v1)), (last = v2);
    if (n >= 4) (level = sub(level, v2)), (last = v3);
    if (n >= 5) (level = sub(level, v3)), (last = v4);
    let entry = level.get(last) as E | undefined;
    if (entry === undefined) {
      entry = this.make();
      level.set(last, entry);
      const values = [v0, v1, v2, v3, v4];
      const labels: Labels = {};
      this.labelNames.forEach((name, i) => (labels[name] = values[i]!));
      this.entries.push({ labels, entry });
    }
    return entry;
  }
}

function sub(level: Map<string, unknown>, key: string): Map<string, unknown> {
  let next = level.get(key) as Map<string, unknown> | undefined;
  if (!next) level.set(key, (next = new Map()));
  return next;
}

interface Metric {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  get(): Promise<Snapshot>;
  reset(): void;
  aggregator: 'sum';
}

export class FastCounter implements Metric {
  readonly type = 'counter' as const;
  readonly aggregator = 'sum' as const;
  private readonly table: Table<{ value: number }>;

  constructor(
    readonly name: string,
    readonly help: string,
    labelNames: readonly string[],
    registry: Registry,
  ) {
    this.table = new Table(labelNames, () => ({ value: 0 }));
    registry.registerMetric(this as never);
  }

  /** The sample for these label values, to add to: `c.at('a', 'b').value += n`. */
  at(v0: string, v1?: string, v2?: string, v3?: string, v4?: string): { value: number } {
    return this.table.get(v0, v1, v2, v3, v4);
  }

  async get(): Promise<Snapshot> {
    return { name: this.name, help: this.help, type: this.type, aggregator: 'sum', values: this.table.entries.map(({ labels, entry }) => ({ labels, value: entry.value })) };
  }

  reset(): void {}
}

export interface Buckets {
  counts: Float64Array;
  sum: number;
  count: number;
}

export class FastHistogram implements Metric {
  readonly type = 'histogram' as const;
  readonly aggregator = 'sum' as const;
  private readonly table: Table<Buckets>;

  constructor(
    readonly name: string,
    readonly help: string,
    labelNames: readonly string[],
    private readonly bounds: readonly number[],
    registry: Registry,
  ) {
    this.table = new Table(labelNames, () => ({ counts: new Float64Array(bounds.length), sum: 0, count: 0 }));
    registry.registerMetric(this as never);
  }

  /** Records `value` in the series with these label values. */
  observe(value: number, v0: string, v1?: string, v2?: string, v3?: string, v4?: string): void {
    this.record(this.table.get(v0, v1, v2, v3, v4), value);
  }

  /** The series with these label values, to record in (a caller that keeps it skips the lookup). */
  series(v0: string, v1?: string, v2?: string, v3?: string, v4?: string): Buckets {
    return this.table.get(v0, v1, v2, v3, v4);
  }

  /** Records `value` in a series from `series()`. */
  record(b: Buckets, value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    if (i < bounds.length) b.counts[i]!++;
    b.sum += value;
    b.count++;
  }

  async get(): Promise<Snapshot> {
    const values: Snapshot['values'] = [];
    for (const { labels, entry } of this.table.entries) {
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += entry.counts[i]!;
        values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le }, value: cumulative });
      });
      values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: '+Inf' }, value: entry.count });
      values.push({ metricName: `${this.name}_sum`, labels, value: entry.sum });
      values.push({ metricName: `${this.name}_count`, labels, value: entry.count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: 'sum', values };
  }

  reset(): void {}
}
