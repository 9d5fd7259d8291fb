// Glob lists compiled once into one RegExp, so matching a name costs a single test.
// `*` matches any run of characters (including none), `?` exactly one; nothing else is special.

export type Matcher = (name: string) => boolean;

export function compileGlobs(globs: readonly string[]): Matcher {
  if (globs.length === 0) return () => false;
  if (globs.includes('*')) return () => true;
  const body = globs
    .map((g) => g.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.'))
    .join('|');
  const re = new RegExp(`^(?:${body})$`, 's');
  return (name) => re.test(name);
}

const compiled = new WeakMap<readonly string[], Matcher>();

/**
 * compileGlobs of a list that lives as long as its config (a toolset's tools, surface lists),
 * compiled once per list: a reload's new config brings new lists, and the old ones go with it.
 */
export function globsOf(globs: readonly string[]): Matcher {
  let m = compiled.get(globs);
  if (!m) compiled.set(globs, (m = compileGlobs(globs)));
  return m;
}

/** allow/deny with deny winning. */
export function compileAllowDeny(list: { allow: readonly string[]; deny: readonly string[] }): Matcher {
  const allow = compileGlobs(list.allow);
  const deny = compileGlobs(list.deny);
  return (name) => allow(name) && !deny(name);
}
