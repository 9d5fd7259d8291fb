// The login that opens itself (`mcpmux stdio`, a person at the screen): when an upstream needs a
// login or more scope, the browser opens as `mcpmux login` would open it, in this process. Owned
// by the stdio runtime and handed to the upstreams (UpstreamDeps.logins); `serve` has none, so it
// never opens a browser. Here is only the when: at most once a minute per server for a plain
// login, at once for a step-up asking for scope no login here asked for, never in a loop (a login
// that fails or is refused waits out the minute too). The flow itself (login.ts) and what it
// imports load only when a login opens.

import type { RemoteServerConfig } from '../../config/types.js';
import type { Logger } from '../../observe/logger.js';

/** A plain login opens the browser at most this often per server. */
export const REOPEN_MS = 60_000;

interface Attempt {
  /** When the browser last opened for this server (performance.now()). */
  openedAt: number;
  /** Every scope a login here asked for or got: a step-up for one of them opens nothing new. */
  asked: Set<string>;
  /** The login under way: resolves true once stored, false when it failed or another replaced it. */
  running: Promise<boolean> | undefined;
  abort: AbortController | undefined;
}

export class InteractiveLogins {
  private readonly attempts = new Map<string, Attempt>();
  /** Logins opened so far (for the log and tests of the once-a-minute rule). */
  opened = 0;

  constructor(
    private readonly log: Logger,
    private readonly reopenMs: number = REOPEN_MS,
  ) {}

  /**
   * The login for `server`: the one under way, else a new one (the browser opens) unless one
   * opened less than a minute ago. `scope` (a 403 insufficient_scope): a new one opens at once
   * when it asks for scope no login here asked for. Undefined: none under way and none may open now.
   */
  login(server: RemoteServerConfig, scope?: string): Promise<boolean> | undefined {
    let a = this.attempts.get(server.name);
    if (!a) this.attempts.set(server.name, (a = { openedAt: -Infinity, asked: new Set(), running: undefined, abort: undefined }));
    const wanted = scope?.split(/\s+/).filter(Boolean) ?? [];
    const wider = wanted.some((s) => !a.asked.has(s));
    if (!wider && performance.now() - a.openedAt < this.reopenMs) return a.running;
    // A login left unfinished for a minute (a window closed, say), or one asking too little: replaced.
    a.abort?.abort();
    return this.open(server, a, wanted);
  }

  /** Ends every login under way (the process is stopping): their loopback listeners close. */
  close(): void {
    for (const a of this.attempts.values()) a.abort?.abort();
  }

  private open(server: RemoteServerConfig, a: Attempt, wanted: string[]): Promise<boolean> {
    const abort = new AbortController();
    const log = this.log.child({ server: server.name });
    a.abort = abort;
    a.openedAt = performance.now();
    for (const s of wanted) a.asked.add(s);
    this.opened++;
    log.warn(wanted.length > 0 ? { scope: wanted.join(' ') } : {}, `server ${server.name} needs ${wanted.length > 0 ? 'more access' : 'a login'}: opening the browser to log in`);
    const running: Promise<boolean> = import('./login.js')
      // stdout carries MCP only: what `mcpmux login` prints goes to the log (stderr).
      .then(({ login }) => login(server, { say: (line) => log.warn(line), signal: abort.signal }))
      .then(
        (r) => {
          for (const s of r.scope?.split(/\s+/) ?? []) if (s) a.asked.add(s);
          log.info({ scope: r.scope }, `logged in to ${server.name}`);
          return true;
        },
        (err: Error) => {
          if (!abort.signal.aborted) log.warn({ err: err.message }, `the login did not complete; it opens again on a call after a minute, or run: mcpmux login ${server.name}`);
          return false;
        },
      )
      .finally(() => {
        if (a.running !== running) return;
        a.running = undefined;
        a.abort = undefined;
      });
    a.running = running;
    return running;
  }
}
