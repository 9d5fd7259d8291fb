// Upstream -> host: what an upstream says unprompted (notifications, server-initiated requests,
// its state changing) and which host sessions it goes to. This is the router's UpstreamListener.

import { scopeOf } from '../config/types.js';
import type { CancelSignal } from '../jsonrpc/cancel.js';
import type { IncomingInfo, Result } from '../jsonrpc/endpoint.js';
import { ErrorCode, RpcError, type JsonRpcNotification, type JsonRpcRequest } from '../jsonrpc/message.js';
import { logLevelRank } from '../protocol/mcp.js';
import { endRequest, publishUpstreamProtocolError, startServerRequest } from '../observe/events.js';
import type { UpstreamListener, Upstream } from '../upstream/upstream.js';
import type { Audience, ChangeKind } from './audience.js';
import { hostCanTake } from './downgrade.js';
import { ownCall, PASS_THROUGH, type Call, type Forward } from './forward.js';
import { unwrapRelatedTask, wrapId, wrapRelatedTask } from './ids.js';
import type { Lists } from './lists.js';
import type { LogLevels } from './log-levels.js';
import { wrapUri } from './naming.js';
import type { Owners, Usage } from './owners.js';
import type { UpstreamPool } from './pool.js';
import type { SessionPort } from './session-port.js';
import type { Subscriptions } from './subscriptions.js';

export interface ReverseDeps {
  pool: UpstreamPool;
  audience: Audience;
  lists: Lists;
  subscriptions: Subscriptions;
  owners: Owners;
  usage: Usage;
  logLevels: LogLevels;
  forward: Forward;
}

/** Where a server-initiated request goes; `sharedBy`: how many sessions made it ambiguous. */
interface Recipient {
  session: SessionPort | undefined;
  sharedBy?: number;
}

export class Reverse implements UpstreamListener {
  readonly opaqueRequests = PASS_THROUGH.upstreamRequests;

  /** What was already said about each upstream's bad messages: once per kind, not per message. */
  private readonly said = new Set<string>();

  constructor(private readonly d: ReverseDeps) {}

  /** Logs a kind of bad message from an upstream the first time it is seen. */
  private dropOnce(up: Upstream, kind: string, msg: string, detail: Record<string, unknown>): void {
    // Counted every time (mcpmux_upstream_protocol_errors_total), said once.
    publishUpstreamProtocolError({ server: up.name, kind: msg });
    const key = `${up.name}\0${kind}`;
    if (this.said.has(key)) return;
    this.said.add(key);
    up.log.warn({ ...detail, once: true }, msg);
  }

  stateChanged(up: Upstream): void {
    const { lists, logLevels, subscriptions, audience } = this.d;
    lists.catalogue.invalidate(up);
    logLevels.forget(up);
    if (up.state === 'ready') {
      // Its lists are read now, ahead of hosts (after the invalidation above, so under the new
      // generation, and before hosts hear list_changed, so their lists join it in flight). Only
      // a shared connection: a session's or a client's own one lists as that host asks, with
      // that host's login, never on its own.
      if (scopeOf(up.config) === 'shared') void lists.prefetch(up);
      // A restarted or re-initialized upstream gets back what hosts had asked of it.
      void logLevels.sync();
      for (const uri of subscriptions.urisOf(up)) {
        this.d.forward(ownCall(up, 'resources/subscribe', { uri })).catch((err: Error) => up.log.warn({ err: err.message, uri }, 're-subscribe failed'));
      }
    }
    // Hosts learn about servers that came or went through list_changed.
    const c = up.capabilities;
    for (const kind of ['tools', 'prompts', 'resources'] as const) if (c[kind]) audience.listChanged(kind, up);
  }

  notification(up: Upstream, n: JsonRpcNotification, context: unknown): void {
    const call = context as Call | undefined;
    const params = n.params ?? {};
    wrapRelatedTask(params, up.name);
    switch (n.method) {
      case 'notifications/tools/list_changed':
      case 'notifications/prompts/list_changed':
      case 'notifications/resources/list_changed': {
        const kind = n.method.split('/')[1] as ChangeKind;
        this.d.lists.catalogue.invalidate(up, kind);
        return this.d.audience.listChanged(kind, up);
      }
      case 'notifications/resources/updated': {
        const uri = params.uri;
        const subs = typeof uri === 'string' ? this.d.subscriptions.subscribers(up, uri) : undefined;
        if (!subs) return;
        const shown = up.config.resources.namespace === 'prefix' ? wrapUri(up.name, uri as string) : uri;
        const shownParams = { ...params, uri: shown };
        for (const s of subs) s.notify(n.method, shownParams);
        return;
      }
      case 'notifications/message': {
        if (logLevelRank(params.level) < 0) return this.dropOnce(up, 'log-level', 'log notification with an invalid level dropped', { level: String(params.level).slice(0, 40) });
        const logger = typeof params.logger === 'string' ? `${up.name}/${params.logger}` : up.name;
        const shown = { ...params, logger };
        // Only to sessions whose client policy lets see something of this server.
        for (const s of this.logRecipients(up, call)) {
          // Tied to the host request it came with, where known (HTTP upstreams say which).
          if (this.d.logLevels.wants(s, params.level) && this.d.lists.clientSees(s.client, up)) s.notify(n.method, shown, call?.session === s ? call.hostRequestId : undefined, up.name);
        }
        return;
      }
      case 'notifications/elicitation/complete':
      case 'notifications/tasks/status': {
        // Only the host that started the elicitation or task hears about it.
        const key = n.method === 'notifications/tasks/status' ? 'taskId' : 'elicitationId';
        const owners = key === 'taskId' ? this.d.owners.tasks : this.d.owners.elicitations;
        if (typeof params[key] !== 'string') return;
        const shownId = wrapId(up.name, params[key] as string);
        const owner = owners.get(shownId) ?? call?.session ?? this.d.pool.ownerOf(up);
        if (!owner) return up.log.debug({ method: n.method, id: shownId }, 'no session owns this id; dropped');
        owner.notify(n.method, { ...params, [key]: shownId });
        // A completed elicitation is over. A task stays owned until its result is fetched.
        if (key === 'elicitationId') owners.delete(shownId);
        return;
      }
      default:
        up.log.debug({ method: n.method }, 'notification from upstream not routed');
    }
  }

  /**
   * Where a log message goes. A shared connection serves several sessions, perhaps of several
   * clients, and what it logs during one host's call is that host's business: it goes where
   * its sampling would go (`recipient`: the call it came with, the one session with calls in
   * flight to it, or the only session), and nowhere when that is not one session (said once
   * per server). `logs: "broadcast"` sends it to every session instead; a `sharing: "session"`
   * connection's messages are its owner's.
   */
  private logRecipients(up: Upstream, call: Call | undefined): Iterable<SessionPort> {
    if (up.config.logs === 'broadcast' || this.d.pool.ownerOf(up)) return this.d.audience.of(up);
    const { session, sharedBy } = this.recipient(up, call);
    if (session) return [session];
    const key = `${up.name}\0log-unrouted`;
    if (sharedBy && !this.said.has(key)) {
      this.said.add(key);
      up.log.info(
        { sessions: sharedBy, once: true },
        'log messages of this server that belong to no single host session are dropped (said once); give it "logs": "broadcast" to send them to every session',
      );
    }
    return [];
  }

  /** A server-initiated request: observed here, whatever becomes of it. */
  request(up: Upstream, req: JsonRpcRequest, signal: CancelSignal, context: unknown, info: IncomingInfo): Promise<Result> {
    const call = context as Call | undefined;
    const { session, sharedBy } = this.recipient(up, call);
    const ev = startServerRequest(session, req.method, req.id, req.params, up.name);
    if (ev) ev.cause = call?.event;
    // The answer the upstream gets (or its absence) says how the request ended.
    if (ev) info.onAnswered = (response) => endRequest(ev, response, 0);
    return this.deliver(up, req, signal, call, session, sharedBy);
  }

  /**
   * The host session a server-initiated request belongs to, only where that is certain: the
   * owner of a `sharing: "session"` upstream; the session of the call it came with (HTTP
   * upstreams say which); the one session with requests in flight to that upstream; or the
   * only session there is. Anything else would be a guess, and a wrong guess shows one host's
   * sampling prompt or form to another (perhaps another client's): refused instead.
   */
  private recipient(up: Upstream, call: Call | undefined): Recipient {
    const { audience, pool, usage } = this.d;
    // A per-client connection carries one client's login: only that client's sessions are candidates, ever.
    const client = pool.clientOf(up);
    const candidate = (s: SessionPort | undefined): s is SessionPort => s !== undefined && audience.isGreeted(s) && (client === undefined || s.client === client);
    const owner = pool.ownerOf(up);
    if (owner) return { session: candidate(owner) ? owner : undefined };
    if (candidate(call?.session)) return { session: call.session };
    const users = usage.users(up).filter(candidate);
    if (users.length === 1) return { session: users[0] };
    if (users.length === 0) {
      if (client !== undefined) {
        const theirs = audience.askableOf(client);
        if (theirs.length === 1) return { session: theirs[0] };
        return { session: undefined, sharedBy: theirs.length > 1 ? theirs.length : undefined };
      }
      const only = audience.only();
      if (only) return { session: only };
    }
    const sharedBy = users.length > 1 ? users.length : audience.greetedCount;
    return { session: undefined, sharedBy: sharedBy > 1 ? sharedBy : undefined };
  }

  private async deliver(
    up: Upstream,
    req: JsonRpcRequest,
    signal: CancelSignal,
    call: Call | undefined,
    session: SessionPort | undefined,
    sharedBy: number | undefined,
  ): Promise<Result> {
    if (req.method === 'roots/list' && up.config.roots) return { roots: up.config.roots };
    if (!session && sharedBy) {
      up.log.warn({ method: req.method, sessions: sharedBy }, 'server-initiated request refused: cannot tell which host session it belongs to');
      throw new RpcError(
        ErrorCode.MethodNotFound,
        `Cannot tell which of ${sharedBy} host sessions sharing server "${up.name}" should take ${req.method}; give this server sharing: "session" in the mcpmux config`,
      );
    }
    if (!session) throw new RpcError(ErrorCode.MethodNotFound, `No initialized host session is connected to take ${req.method}`);
    const params = req.params ?? {};
    const refusal = hostCanTake(session, req.method, params);
    if (refusal) throw new RpcError(ErrorCode.MethodNotFound, refusal);
    wrapRelatedTask(params, up.name);
    if (req.method === 'elicitation/create' && typeof params.elicitationId === 'string') {
      params.elicitationId = wrapId(up.name, params.elicitationId);
      this.d.owners.elicitations.set(params.elicitationId as string, session);
    }
    // `related` picks the host's stream; it only means something for the call's own session.
    const related = call && session === call.session ? call.hostRequestId : undefined;
    const result = await session.request(req.method, params, signal, related);
    unwrapRelatedTask(result);
    return result;
  }
}
