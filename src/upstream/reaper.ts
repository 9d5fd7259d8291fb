// Upstream processes never outlive mcpmux, however it ends.
//
// Each stdio upstream runs in its own process group (spawned detached), so that stopping it
// reaches what it started: `npx` and `sh -c` run the real server as a grandchild, which a
// signal to the direct child alone would leave running. mcpmux stops its children itself on
// every orderly exit; for the disorderly ones (SIGKILL, a crash) there is the reaper: one tiny
// /bin/sh per daemon, in a group of its own, reading "+PGID" and "-PGID" lines on a pipe from
// mcpmux. When that pipe reaches EOF, mcpmux is gone: the reaper sends SIGTERM to every group
// still registered, then SIGKILL two seconds later. An orderly exit has released every group
// first, so the reaper just ends. (POSIX only; on Windows children end with their stdin.)

import { spawn, type ChildProcess } from 'node:child_process';

const SCRIPT = `
trap '' INT TERM HUP
groups=""
while IFS= read -r line; do
  case "$line" in
    +*) groups="$groups \${line#+}" ;;
    -*) g="\${line#-}"; left=""; for x in $groups; do [ "$x" = "$g" ] || left="$left $x"; done; groups="$left" ;;
  esac
done
[ -z "\${groups# }" ] && exit 0
for g in $groups; do kill -TERM -"$g" 2>/dev/null; done
sleep 2
for g in $groups; do kill -KILL -"$g" 2>/dev/null; done
`;

let reaper: ChildProcess | undefined;

function start(): ChildProcess | undefined {
  if (process.platform === 'win32') return undefined;
  try {
    const p = spawn('/bin/sh', ['-c', SCRIPT], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
    p.on('error', () => {
      if (reaper === p) reaper = undefined;
    });
    p.stdin!.on('error', () => {});
    // Neither the process nor its pipe may keep mcpmux alive.
    p.unref();
    (p.stdin as unknown as { unref?: () => void }).unref?.();
    return p;
  } catch {
    return undefined;
  }
}

/** A child's process group to end if mcpmux dies without stopping it. */
export function guardGroup(pgid: number): void {
  reaper ??= start();
  reaper?.stdin?.write(`+${pgid}\n`);
}

/** The group is gone (or stopped by mcpmux): nothing to do for it any more. */
export function releaseGroup(pgid: number): void {
  reaper?.stdin?.write(`-${pgid}\n`);
}

/** Signals a whole process group; false when it no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}
