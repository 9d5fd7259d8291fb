// logging/setLevel across sessions: each session keeps its own level; a shared upstream is told
// the most verbose level any session wants, a session's own upstream that session's.

import { jsonText } from '../jsonrpc/big-numbers.js';
import { ErrorCode, RpcError } from '../jsonrpc/message.js';
import { logLevelRank, type LogLevel, type Params } from '../protocol/mcp.js';
import type { Upstream } from '../upstream/upstream.js';
import { ownCall, type Forward } from './forward.js';
import type { UpstreamPool } from './pool.js';
import type { SessionPort } from './session-port.js';

export class LogLevels {
  /** Level last sent to each upstream connection, to avoid repeating it. */
  private readonly sent = new WeakMap<Upstream, LogLevel>();

  constructor(
    private readonly pool: UpstreamPool,
    private readonly sessions: ReadonlySet<SessionPort>,
    private readonly forward: Forward,
  ) {}

  async set(session: SessionPort, params: Params): Promise<void> {
    const level = params.level;
    if (logLevelRank(level) < 0) throw new RpcError(ErrorCode.InvalidParams, `Invalid log level: ${jsonText(level)}`);
    session.logLevel = level as LogLevel;
    await this.sync();
  }

  /** Whether a message at `level` from an upstream reaches `session`. */
  wants(session: SessionPort, level: unknown): boolean {
    return session.logLevel === undefined || logLevelRank(level) >= logLevelRank(session.logLevel);
  }

  /** The upstream restarted or went away: it has been told nothing yet. */
  forget(up: Upstream): void {
    this.sent.delete(up);
  }

  /** Tells every ready upstream that needs it the level its sessions want now. */
  async sync(): Promise<void> {
    let widest: LogLevel | undefined;
    for (const s of this.sessions) {
      if (s.logLevel && (widest === undefined || logLevelRank(s.logLevel) < logLevelRank(widest))) widest = s.logLevel;
    }
    const sends: Promise<void>[] = [];
    for (const up of this.pool.all()) {
      const owner = this.pool.ownerOf(up);
      const wanted = owner ? owner.logLevel : widest;
      if (!wanted || up.state !== 'ready' || !up.capabilities.logging || this.sent.get(up) === wanted) continue;
      this.sent.set(up, wanted);
      sends.push(
        this.forward(ownCall(up, 'logging/setLevel', { level: wanted })).then(
          () => {},
          (err: Error) => up.log.warn({ err: err.message }, 'logging/setLevel failed'),
        ),
      );
    }
    await Promise.all(sends);
  }
}
