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

/** Names kept per matcher by `remembered`; past this the cache starts over. */
const REMEMBERED_MAX = 4096;
/** Longer names are matched every time, never kept (a hostile host's names must not fill memory). */
const REMEMBERED_MAX_LENGTH = 256;

/**
 * The matcher with its answers kept per name, bounded: a policy's lists are matched against the
 * same few tool names call after call, and each list's RegExp (up to dozens of globs) runs once
 * per name instead. A reload builds new matchers, so old answers go with the old config.
 */
export function remembered(match: Matcher): Matcher {
  const answers = new Map<string, boolean>();
  return (name) => {
    let a = answers.get(name);
    if (a === undefined) {
      a = match(name);
      if (name.length <= REMEMBERED_MAX_LENGTH) {
        if (answers.size >= REMEMBERED_MAX) answers.clear();
        answers.set(name, a);
      }
    }
    return a;
  };
}
