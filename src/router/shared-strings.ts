// Equal strings inside the items of one upstream page made one string.
//
// JSON.parse gives every string value its own copy. Tool definitions repeat themselves: the
// same parameter described in every tool of a server ("The issue id, as returned by search or
// list."), the same `$schema` URL, `pattern` and `format` in each input schema. Those copies
// are most of a large catalogue's strings, and they stay for as long as the page is cached
// (issue 23: with 20 servers x 100 tools, 2.7 of the catalogue's 6 MB of strings were copies).
// Keys are not a concern: V8 already shares them.

/** Strings longer than this are left as they are: repeats are short, and hashing a long one costs. */
const MAX_SHARED_LENGTH = 4096;

/**
 * Replaces, in place, each string value inside `root` by the first equal one seen through
 * `seen` (a Map for one page: nothing outlives it). Iterative: how deep an item nests is the
 * upstream's choice. Only for objects freshly parsed from an upstream's answer, which nothing
 * else holds yet.
 */
export function shareStrings(root: object, seen: Map<string, string>): void {
  const stack: object[] = [root];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const v: unknown = node[i];
        if (typeof v === 'string') node[i] = share(v, seen);
        else if (typeof v === 'object' && v !== null) stack.push(v);
      }
      continue;
    }
    const o = node as Record<string, unknown>;
    for (const k of Object.keys(o)) {
      const v = o[k];
      // Always stored: equal strings compare equal, whichever copy each is.
      if (typeof v === 'string') o[k] = share(v, seen);
      else if (typeof v === 'object' && v !== null) stack.push(v);
    }
  }
}

function share(s: string, seen: Map<string, string>): string {
  if (s.length > MAX_SHARED_LENGTH) return s;
  const known = seen.get(s);
  if (known !== undefined) return known;
  seen.set(s, s);
  return s;
}
