// `mcpmux stdio` starts its stdio upstreams before it loads the rest of itself. A host's
// `initialize` waits for the upstreams' handshakes (up to startupWaitMs), and a Node server
// takes about as long to boot as mcpmux takes to load its router, sessions, logger and execa:
// done one after the other, the host waited for both; now the children boot while mcpmux loads.
//
// The children are handed down to the upstream layer (cli/stdio-runtime.ts -> router -> pool ->
// Upstream -> connectUpstream -> spawnChild), which adopts each one once, by server name, and
// only if the config would still start it the same way; every later start (a restart, a reload)
// spawns as always. A child never adopted is stopped: on every way out before the router
// starts (an admin port in use, an audit file that cannot be opened, a load that throws),
// once the router has started every upstream, and at the shutdown.
//
// POSIX only: there each child is in its own process group, which the reaper guards from the
// moment it is spawned (a SIGKILLed mcpmux leaves nothing behind). On Windows, children end with
// mcpmux through execa's cleanup, which only execa's own spawn has: nothing is prestarted there.

import { availableParallelism } from 'node:os';
import { scopeOf, type Config, type StdioServerConfig } from '../config/types.js';
import { endGroup, GROUPS, sameSpec, settlesWithin, signalChild, spawnRaw, spawnSpec, type ChildHandle, type SpawnSpec } from './child-spawn.js';

/** How long a child never adopted gets after SIGTERM before SIGKILL: it was never sent anything. */
const STOP_GRACE_MS = 500;

interface Early {
  spec: SpawnSpec;
  child: ChildHandle;
}

export class PrestartedChildren {
  private readonly waiting = new Map<string, Early>();
  /** Stops under way of children whose config changed before adoption (take): stopUntaken waits for them too. */
  private readonly stopping = new Set<Promise<void>>();

  /**
   * Spawns the stdio upstreams the router will start at once (enabled, shared by all sessions),
   * in config order, at most `max` of them: each child booting takes a core, and mcpmux needs
   * one to load, or its own start (and the host's startupWaitMs) would wait behind 20 booting
   * servers. The rest start as always, once mcpmux has loaded.
   */
  static start(config: Config, max = Math.max(1, availableParallelism() - 1)): PrestartedChildren {
    const out = new PrestartedChildren();
    if (!GROUPS) return out;
    for (const s of config.servers) {
      if (out.waiting.size >= max) break;
      // The servers UpstreamPool.startShared starts at once: a `session` server waits for its session.
      if (s.disabled || s.transport !== 'stdio' || scopeOf(s) !== 'shared') continue;
      try {
        const spec = spawnSpec(s);
        out.waiting.set(s.name, { spec, child: spawnRaw(spec) });
      } catch {
        // An error Node throws rather than reports (EINVAL…): the normal start meets it and says so.
      }
    }
    return out;
  }

  /** Whether `take(cfg)` would give a child now: one waits for this server, spawned the same way. */
  holds(cfg: StdioServerConfig): boolean {
    const early = this.waiting.get(cfg.name);
    return early !== undefined && sameSpec(early.spec, spawnSpec(cfg));
  }

  /** How many children are waiting to be adopted. */
  get size(): number {
    return this.waiting.size;
  }

  /**
   * The child prestarted for this server, once, if `cfg` would start it the same way (command,
   * arguments, folder, environment); else undefined, and the early one is stopped.
   */
  take(cfg: StdioServerConfig): ChildHandle | undefined {
    const early = this.waiting.get(cfg.name);
    if (!early) return undefined;
    this.waiting.delete(cfg.name);
    if (sameSpec(early.spec, spawnSpec(cfg))) return early.child;
    const stop = stopEarly(early.child);
    this.stopping.add(stop);
    void stop.then(() => this.stopping.delete(stop));
    return undefined;
  }

  /** Stops every child not adopted; resolves once they are gone. */
  async stopUntaken(): Promise<void> {
    const left = [...this.waiting.values()];
    this.waiting.clear();
    await Promise.all([...left.map((e) => stopEarly(e.child)), ...this.stopping]);
  }
}

/** Ends a child that was never adopted, and its group: SIGTERM, then SIGKILL; its pipes closed. */
async function stopEarly({ proc, pgid, ended, stderr }: ChildHandle): Promise<void> {
  proc.stdin?.end();
  // Its output is no one's: read and dropped, so its pipes close when it ends.
  proc.stdout?.resume();
  stderr?.resume();
  signalChild(proc, pgid, 'SIGTERM');
  if (!(await settlesWithin(ended, STOP_GRACE_MS))) {
    signalChild(proc, pgid, 'SIGKILL');
    // Killed: only a grandchild that left the group can still hold its pipes open.
    await settlesWithin(ended, STOP_GRACE_MS);
  }
  // What it started may outlive it in its group.
  if (pgid !== undefined) await endGroup(pgid, STOP_GRACE_MS);
  // Pipes a stray grandchild still holds must not keep mcpmux from exiting.
  for (const s of [proc.stdin, proc.stdout, proc.stderr, stderr]) s?.destroy();
}
