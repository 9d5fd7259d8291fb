// mcpmux running mcpmux: how to recognise a server entry that starts mcpmux itself, and the
// configs that would make mcpmux start itself without end.
//
// After `mcpmux install`, a host's file holds one entry, `mcpmux stdio --config F`. Imported
// back into F, that entry makes mcpmux spawn mcpmux spawn mcpmux... Three guards, each for
// what the one before cannot see:
//   1. `import` leaves mcpmux's own entries out (`muxInvocation`);
//   2. loading a config refuses an upstream that runs mcpmux on the same config, directly or
//      through a chain of configs it can read (`selfReferenceIssues`, a ConfigError at the
//      offending server's JSON path);
//   3. a running mcpmux tells its children which configs are above them (MCPMUX_PARENT_CONFIGS,
//      passed through even the minimal child environment), and `stdio`/`serve` refuse to start
//      on a config already in that list (a wrapper script or `sh -c` hides the chain from 2).

import { readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { parseJsonc } from '../jsonc.js';
import { isObject } from '../objects.js';
import { expandEnv, pointerSegment } from './expand.js';
import type { Config, ConfigIssue } from './types.js';

/** The environment marker: the config files of the mcpmux processes above this one, `path.delimiter`-separated. */
export const PARENT_CONFIGS_VAR = 'MCPMUX_PARENT_CONFIGS';

/** What an entry that runs mcpmux asks of it. */
export interface MuxInvocation {
  /** `stdio` or `connect`. */
  mode: 'stdio' | 'connect';
  /** The `--config` / `-c` value as written (or the entry's MCPMUX_CONFIG), if any. */
  config: string | undefined;
}

const MODES = new Set(['stdio', 'connect']);

/** Whether a command (a path or a bare name) names the program `name`, on any platform. */
function isProgram(command: string, name: string): boolean {
  const base = command.split(/[\\/]/).at(-1)!.toLowerCase().replace(/\.(exe|cmd|bat|ps1)$/, '');
  return base === name;
}

/** The mcpmux script itself: `.../bin/mcpmux.js`, or an installed `mcpmux` shim. */
function isMuxScript(arg: string): boolean {
  return /(^|[\\/])bin[\\/]mcpmux(\.js)?$/.test(arg) || isProgram(arg, 'mcpmux') || isProgram(arg, 'mcpmux.js');
}

/** An npm package spec that is mcpmux: `mcpmux`, `mcpmux@1.2.3`, `@scope/mcpmux@latest`. */
function isMuxPackage(arg: string): boolean {
  return /^(@[^/]+\/)?mcpmux(@.*)?$/.test(arg);
}

/** npx's flags that take the next argument as their value (`-p mcpmux mcpmux stdio`: the first `mcpmux` is the package). */
const PACKAGE_FLAGS = new Set(['-p', '--package']);

/**
 * Whether a server entry (command + args, and its env for MCPMUX_CONFIG) runs `mcpmux stdio`
 * or `mcpmux connect`: `mcpmux ...`, `.../bin/mcpmux.js ...`, `node|nodejs .../bin/mcpmux.js ...`,
 * `npx [-y] [-p mcpmux] mcpmux ...` (also bunx, pnpm dlx), and any of these behind Windows'
 * `cmd /c` (how hosts there start `npx`).
 */
function muxInvocation(command: string, args: readonly string[], env: Readonly<Record<string, string>> = {}): MuxInvocation | undefined {
  if (isProgram(command, 'cmd')) {
    const c = args.findIndex((a) => /^\/[ck]$/i.test(a));
    if (c < 0) return undefined;
    // `cmd /c "npx -y mcpmux stdio"` passes the whole command line as one argument.
    const line = args.length === c + 2 ? args[c + 1]!.trim().split(/\s+/) : args.slice(c + 1);
    return line.length > 0 ? muxInvocation(line[0]!, line.slice(1), env) : undefined;
  }
  let rest: readonly string[] | undefined;
  if (isMuxScript(command)) rest = args;
  else if (isProgram(command, 'node') || isProgram(command, 'nodejs') || isProgram(command, 'bun') || isProgram(command, 'deno')) {
    const script = args.findIndex((a) => !a.startsWith('-'));
    if (script >= 0 && isMuxScript(args[script]!)) rest = args.slice(script + 1);
  } else if (isProgram(command, 'npx') || isProgram(command, 'bunx') || isProgram(command, 'pnpm') || isProgram(command, 'yarn')) {
    const pkg = args.findIndex((a, i) => isMuxPackage(a) && !PACKAGE_FLAGS.has(args[i - 1] ?? ''));
    if (pkg >= 0) rest = args.slice(pkg + 1);
  }
  if (!rest) return undefined;
  const mode = rest.find((a) => !a.startsWith('-'));
  if (!mode || !MODES.has(mode)) return undefined;
  let config: string | undefined;
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    if ((a === '--config' || a === '-c') && i + 1 < rest.length) config = rest[i + 1];
    else if (a.startsWith('--config=')) config = a.slice('--config='.length);
  }
  return { mode: mode as MuxInvocation['mode'], config: config ?? env.MCPMUX_CONFIG };
}

/** `muxInvocation` of a host's or a config's server entry as written (not yet checked): undefined when it does not run mcpmux. */
export function muxEntry(entry: unknown): MuxInvocation | undefined {
  if (!isObject(entry) || typeof entry.command !== 'string') return undefined;
  const args = Array.isArray(entry.args) ? entry.args.map(String) : [];
  const env = isObject(entry.env) ? Object.fromEntries(Object.entries(entry.env).map(([k, v]) => [k, String(v)])) : {};
  return muxInvocation(entry.command, args, env);
}

/** A file's identity for comparison: its real path when it exists, else its absolute path. */
export function sameFileKey(file: string): string {
  const abs = path.resolve(file);
  try {
    return realpathSync(abs);
  } catch {
    return abs;
  }
}

/** One stdio server as the chain walk sees it: what it runs, and where. */
interface Spawn {
  name: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd: string | undefined;
}

/** The configs mcpmux's stdio upstreams would run mcpmux on, each resolved to an absolute path. */
function nestedConfigs(spawns: readonly Spawn[], configDir: string): { name: string; config: string }[] {
  const out: { name: string; config: string }[] = [];
  for (const s of spawns) {
    const inv = muxInvocation(s.command, s.args, s.env);
    // `connect` goes to a daemon by URL: which config that daemon runs cannot be known here.
    if (!inv || inv.mode !== 'stdio' || !inv.config) continue;
    out.push({ name: s.name, config: sameFileKey(path.resolve(s.cwd ?? configDir, inv.config)) });
  }
  return out;
}

/** `${VAR}` / `${VAR:-default}` as loading expands them (missing ones empty, no issue kept): enough to follow a chain. */
function expandLoosely(s: string, env: NodeJS.ProcessEnv): string {
  return expandEnv(s, env).value as string;
}

/** The stdio servers of a config file mcpmux could read, or none (a file it cannot read starts no chain). */
function spawnsOfFile(file: string, env: NodeJS.ProcessEnv): Spawn[] {
  let doc: unknown;
  try {
    doc = parseJsonc(readFileSync(file, 'utf8'));
  } catch {
    return [];
  }
  if (!isObject(doc) || !isObject(doc.mcpServers)) return [];
  const out: Spawn[] = [];
  for (const [name, raw] of Object.entries(doc.mcpServers)) {
    if (!isObject(raw) || typeof raw.command !== 'string' || raw.disabled === true) continue;
    const args = Array.isArray(raw.args) ? raw.args.filter((a): a is string => typeof a === 'string').map((a) => expandLoosely(a, env)) : [];
    const ownEnv: Record<string, string> = {};
    if (isObject(raw.env)) for (const [k, v] of Object.entries(raw.env)) if (typeof v === 'string') ownEnv[k] = expandLoosely(v, env);
    const cwd = typeof raw.cwd === 'string' ? path.resolve(path.dirname(file), expandLoosely(raw.cwd, env)) : undefined;
    out.push({ name, command: expandLoosely(raw.command, env), args, env: ownEnv, cwd });
  }
  return out;
}

/**
 * One issue per enabled server of `config` that would run mcpmux on `config` itself, directly or
 * through configs it can read, or that leads into any other loop of configs (A -> B -> C -> B):
 * either way mcpmux would start itself without end.
 */
export function selfReferenceIssues(config: Pick<Config, 'path' | 'servers'>, env: NodeJS.ProcessEnv = process.env): ConfigIssue[] {
  if (!config.path) return [];
  const self = sameFileKey(config.path);
  const spawns: Spawn[] = [];
  for (const s of config.servers) {
    if (s.disabled || s.transport !== 'stdio') continue;
    spawns.push({ name: s.name, command: s.command, args: s.args, env: s.env, cwd: s.cwd });
  }
  const issues: ConfigIssue[] = [];
  for (const { name, config: first } of nestedConfigs(spawns, path.dirname(self))) {
    const loop = findLoop([self, first], env);
    if (!loop) continue;
    const chain = loop.map((f) => JSON.stringify(f)).join(' -> ');
    issues.push({
      path: `/mcpServers/${pointerSegment(name)}`,
      message:
        loop.length === 2
          ? `runs mcpmux on this same config (${chain}): mcpmux would start itself without end; remove this server (it is probably the entry \`mcpmux install\` wrote into a host)`
          : `runs mcpmux on a chain of configs that comes back to ${JSON.stringify(loop.at(-1))} (${chain}): mcpmux would start itself without end`,
    });
  }
  return issues;
}

/** Depth-first along the configs mcpmux would run: the chain up to the first file seen twice, or undefined. */
function findLoop(chain: string[], env: NodeJS.ProcessEnv, seen = new Set<string>()): string[] | undefined {
  const last = chain.at(-1)!;
  if (chain.indexOf(last) < chain.length - 1) return chain;
  // A file already explored without a loop has none through it (the walk stays linear).
  if (seen.has(last)) return undefined;
  seen.add(last);
  for (const next of nestedConfigs(spawnsOfFile(last, env), path.dirname(last))) {
    const loop = findLoop([...chain, next.config], env, seen);
    if (loop) return loop;
  }
  return undefined;
}

/** The configs of the mcpmux processes above this one (from the marker its parent set). */
function parentConfigs(env: NodeJS.ProcessEnv = process.env): string[] {
  return (env[PARENT_CONFIGS_VAR] ?? '').split(path.delimiter).filter((p) => p.length > 0);
}

/**
 * For `stdio` and `serve`: the message to refuse with when an mcpmux above this one already runs
 * this config; otherwise adds the config to the marker this process's children inherit, and
 * returns undefined.
 */
export function claimConfig(configPath: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (!configPath) return undefined;
  const self = sameFileKey(configPath);
  const parents = parentConfigs(env);
  if (parents.includes(self)) {
    return (
      `refusing to start: this mcpmux was started by another mcpmux running the same config ${JSON.stringify(self)} ` +
      `(${PARENT_CONFIGS_VAR}), so it would start itself without end. ` +
      'Remove the server that runs mcpmux from that config.'
    );
  }
  env[PARENT_CONFIGS_VAR] = [...parents, self].join(path.delimiter);
  return undefined;
}
