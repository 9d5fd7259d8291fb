// Command-line reading shared by bench/run.mjs and bench/peers.mjs: the loop over argv and the
// run-size options both take (--quick, --rounds, --calls, --warmup, --duration, --inflight),
// with the same values for a quick and a full run.

/**
 * Reads `argv` in order into `o`. The run-size options are handled here; every other argument
 * goes to `other(a, next, num)`: next() takes the following argument as a's value, num(v)
 * reads a value as a positive number. `usage(msg)` reports a mistake and must not return.
 */
export function readOptions(argv, o, usage, other) {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
    const num = (v) => {
      const n = Number(v);
      if (!Number.isFinite(n) || n <= 0) usage(`${a} needs a positive number, got ${v}`);
      return n;
    };
    switch (a) {
      case '--quick': o.quick = true; break;
      case '--rounds': o.rounds = Math.round(num(next())); break;
      case '--calls': o.calls = Math.round(num(next())); break;
      case '--warmup': o.warmup = Math.round(num(next())); break;
      case '--duration': o.duration = num(next()); break;
      case '--inflight': o.inflight = Math.round(num(next())); break;
      default: other(a, next, num);
    }
  }
}

/** What the run-size options not given default to: small with --quick, the full run without. */
export function sizeDefaults(o) {
  const q = o.quick;
  o.rounds ??= q ? 1 : 3;
  o.calls ??= q ? 200 : 2000;
  o.warmup ??= q ? 50 : 200;
  o.duration ??= q ? 2 : 10;
}

/**
 * The loop of the single-purpose scripts (bench/interleaved.mjs, bench/throughput-floor.mjs):
 * `--help` prints `usage`; every other argument goes to `on(a, value, count)`, where value()
 * takes the following argument and count() reads it as a whole number >= 1, and `on` returns
 * false for an option it does not know. A mistake throws, its message ending with the usage.
 */
export function readArgs(argv, usage, on) {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value\n${usage}`);
      return v;
    };
    const count = () => {
      const n = Number(value());
      if (!Number.isInteger(n) || n < 1) throw new Error(`${a} takes a whole number >= 1\n${usage}`);
      return n;
    };
    if (a === '--help' || a === '-h') {
      console.log(usage);
      process.exit(0);
    }
    if (!on(a, value, count)) throw new Error(`unknown option ${a}\n${usage}`);
  }
}
