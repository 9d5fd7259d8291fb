// "Did you mean": the known word nearest a mistyped one, so that `comand` in a config says
// `command` (as the command line already does for its commands and flags).

/**
 * The candidate nearest `word` by edit distance (letter case ignored: `ratelimits` finds
 * `rateLimits`), or undefined when none is near enough to be what was meant: at most
 * max(2, a third of the word) edits, and fewer edits than the word has letters (so `x` is not
 * taken for `url`). The first candidate wins a tie.
 */
export function nearest(word: string, candidates: Iterable<string>): string | undefined {
  const w = word.toLowerCase();
  const limit = Math.min(Math.max(2, Math.floor(w.length / 3)), w.length - 1);
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const c of candidates) {
    const d = distance(w, c.toLowerCase());
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

/** Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`. */
function distance(a: string, b: string): number {
  // Rows i-2, i-1 and i of the usual table (optimal string alignment).
  let before = new Array<number>(b.length + 1).fill(0);
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1);
      row.push(d);
    }
    before = prev;
    prev = row;
  }
  return prev[b.length]!;
}

/** Why `name` is no toolset of `toolsets` (for --toolset, ?toolset= and a token's toolset). */
export function unknownToolset(name: string, toolsets: Readonly<Record<string, unknown>>): string {
  const known = Object.keys(toolsets);
  const meant = nearest(name, known);
  if (known.length === 0) return `no toolset named ${JSON.stringify(name)}: the config defines no "toolsets"`;
  return `no toolset named ${JSON.stringify(name)}${meant === undefined ? '' : ` (did you mean ${JSON.stringify(meant)}?)`}; toolsets: ${known.join(', ')}`;
}
