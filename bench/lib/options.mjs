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
