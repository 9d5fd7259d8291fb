// What a stdio upstream gets of mcpmux's environment: only what a login shell needs, plus its
// own `env` from the config. mcpmux's environment holds the hosts' bearer tokens, every other
// server's ${VAR} secrets, and whatever a systemd EnvironmentFile put there; one third-party
// `npx -y` server must not read them all. `inheritEnv` opts in: true for everything, or names.

import { PARENT_CONFIGS_VAR } from '../config/self-reference.js';

/**
 * Always passed: the configs of the mcpmux processes above the child (self-reference.ts), so an
 * mcpmux started as an upstream knows when it would run a config already running above it.
 */
const MARKER = [PARENT_CONFIGS_VAR];
/** Enough to find programs, a home, a user, a terminal, a locale and a temp folder. */
const POSIX_BASE = ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'TERM', 'LANG', 'LANGUAGE', 'TZ', 'TMPDIR', 'LC_*', ...MARKER];
/** The same on Windows (names there are case-insensitive). */
const WINDOWS_BASE = [
  'PATH', 'PATHEXT', 'SYSTEMROOT', 'SYSTEMDRIVE', 'WINDIR', 'COMSPEC', 'USERPROFILE', 'USERNAME', 'USERDOMAIN', 'HOMEDRIVE', 'HOMEPATH',
  'APPDATA', 'LOCALAPPDATA', 'PROGRAMDATA', 'PROGRAMFILES', 'PROGRAMFILES(X86)', 'PROGRAMW6432', 'COMMONPROGRAMFILES', 'TEMP', 'TMP',
  'OS', 'PROCESSOR_ARCHITECTURE', 'NUMBER_OF_PROCESSORS', ...MARKER,
];

/**
 * The environment for a child: the platform's base set and `inherit`'s names taken from
 * `parent`, then the server's own `env` on top. Never systemd's NOTIFY_SOCKET (a child could
 * report readiness for mcpmux).
 */
export function childEnv(
  parent: NodeJS.ProcessEnv,
  own: Record<string, string>,
  inherit: boolean | readonly string[],
  platform: NodeJS.Platform = process.platform,
): Record<string, string> {
  const out: Record<string, string> = {};
  const windows = platform === 'win32';
  const wanted = [...(windows ? WINDOWS_BASE : POSIX_BASE), ...(Array.isArray(inherit) ? inherit : [])].map((n) => (windows ? n.toUpperCase() : n));
  const matches = (name: string): boolean => {
    const n = windows ? name.toUpperCase() : name;
    return wanted.some((w) => (w.endsWith('*') ? n.startsWith(w.slice(0, -1)) : n === w));
  };
  for (const [name, value] of Object.entries(parent)) {
    if (value === undefined || name === 'NOTIFY_SOCKET') continue;
    if (inherit === true || matches(name)) out[name] = value;
  }
  return { ...out, ...own };
}

/**
 * `env` with the folder of the Node that runs mcpmux at the END of its PATH, unless the server's
 * own `env` sets PATH. A desktop host starts mcpmux with a bare PATH (`/usr/bin:/bin`), so a
 * `"command": "node"` or `"npx"` entry, which worked from the user's shell, would not be found
 * when Node lives elsewhere (nvm, Homebrew, a tarball). Appended, not prepended: a node the
 * PATH already finds stays the one that runs.
 */
export function withOwnNode(
  env: Record<string, string>,
  own: Record<string, string>,
  nodeDir: string,
  platform: NodeJS.Platform = process.platform,
): Record<string, string> {
  const windows = platform === 'win32';
  const isPath = (k: string): boolean => (windows ? k.toUpperCase() === 'PATH' : k === 'PATH');
  if (Object.keys(own).some(isPath)) return env;
  const key = Object.keys(env).find(isPath) ?? 'PATH';
  const sep = windows ? ';' : ':';
  const dirs = (env[key] ?? '').split(sep).filter(Boolean);
  const same = (d: string): boolean => (windows ? d.toLowerCase() === nodeDir.toLowerCase() : d === nodeDir);
  if (dirs.some(same)) return env;
  return { ...env, [key]: [...dirs, nodeDir].join(sep) };
}
