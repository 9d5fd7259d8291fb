// The host requests the router answers, one method each: from what a host sent to the call the
// forward step makes upstream, and from the upstream's answer back to what this host can read
// (names and URIs namespaced, ids wrapped, content its protocol version knows).

import { isText } from '../jsonrpc/big-numbers.js';
import type { CancelSignal } from '../jsonrpc/cancel.js';
import type { Result } from '../jsonrpc/endpoint.js';
import { ErrorCode, RpcError, type JsonRpcId, type JsonRpcRequest } from '../jsonrpc/message.js';
import { RawResult } from '../jsonrpc/raw-result.js';
import type { RequestEvent } from '../observe/events.js';
import { McpError, progressTokenOf, type Params } from '../protocol/mcp.js';
import type { Upstream } from '../upstream/upstream.js';
import { adaptForHost, knowsEveryBlock } from './downgrade.js';
import { PASS_THROUGH, type Call, type Forward, type Target } from './forward.js';
import { unwrapId, unwrapRelatedTask, wrapId, wrapRelatedTask, wrapTaskResult } from './ids.js';
import type { Lists } from './lists.js';
import type { LogLevels } from './log-levels.js';
import type { NamedKind } from './naming.js';
import { TASK_DONE_GRACE_MS, type Owners } from './owners.js';
import type { UpstreamPool } from './pool.js';
import type { Resolved, Resolver } from './resolve.js';
import { fulfilInput, needsInput } from './input-bridge.js';
import { rewritePromptResult, rewriteReadResult, rewriteToolResult } from './rewrite.js';
import type { SessionPort } from './session-port.js';
import type { Subscriptions } from './subscriptions.js';
import type { Surfaces } from './surface.js';

export interface DispatchDeps {
  pool: UpstreamPool;
  lists: Lists;
  resolve: Resolver;
  subscriptions: Subscriptions;
  owners: Owners;
  logLevels: LogLevels;
  forward: Forward;
  surface: Surfaces;
}

export class Dispatch {
  private readonly pool: UpstreamPool;
  private readonly lists: Lists;
  private readonly resolve: Resolver;
  private readonly subscriptions: Subscriptions;
  private readonly owners: Owners;
  private readonly logLevels: LogLevels;
  private readonly forward: Forward;
  private readonly surface: Surfaces;

  constructor(d: DispatchDeps) {
    ({ pool: this.pool, lists: this.lists, resolve: this.resolve, subscriptions: this.subscriptions, owners: this.owners, logLevels: this.logLevels, forward: this.forward, surface: this.surface } = d);
  }

  /**
   * Answers one host request that is not session business (initialize, ping). `event`, when
   * someone observes, learns which server and item the request went to.
   */
  handle(session: SessionPort, req: JsonRpcRequest, signal: CancelSignal, event?: RequestEvent): Promise<Result> {
    // A host that signed in again brings back what acted for it (pool.revive); rarely anything to wait for.
    const revived = this.pool.revive(session);
    if (revived) return revived.then(() => this.route(session, req, signal, event));
    // Not an async function: each async layer a call passes through costs promise turns both
    // ways, on every call (issue 23). A plain tools/call goes straight to callNamed.
    const params = req.params ?? {};
    if (req.method === 'tools/call' && !this.surface.isMeta(params.name)) return this.callNamed(session, req.id, 'tools', params, signal, event);
    return this.route(session, req, signal, event);
  }

  private async route(session: SessionPort, req: JsonRpcRequest, signal: CancelSignal, event?: RequestEvent): Promise<Result> {
    const params = req.params ?? {};
    const id = req.id;
    switch (req.method) {
      case 'tools/list':
        // The search surface's own list, or the merged pages (narrowed to the session's toolset).
        return this.toolsList(session, params, signal, event);
      case 'prompts/list':
        return this.lists.page('prompts', session.client, this.resolve.live(session), params, signal, undefined, true, event);
      case 'resources/list':
        return this.lists.page('resources', session.client, this.resolve.live(session), params, signal, undefined, true, event);
      case 'resources/templates/list':
        return this.lists.page('templates', session.client, this.resolve.live(session), params, signal, undefined, true, event);
      case 'tasks/list':
        // A shared upstream sees one client (mcpmux): each host sees only its own tasks.
        // Keyed by session: a memoised page must never be served to another host.
        return this.lists.catalogue.list(this.lists.kinds.tasks, this.resolve.live(session), params, signal, (t) => this.owners.tasks.get(t.taskId as string) === session, `session:${session.id}`);
      case 'tools/call':
        // search_tools and call_tool go by the surface first (no extra turn for other calls).
        return this.surface.isMeta(params.name) ? this.metaCall(session, id, params, signal, event) : this.callNamed(session, id, 'tools', params, signal, event);
      case 'prompts/get':
        return this.callNamed(session, id, 'prompts', params, signal, event);
      case 'resources/read': {
        const asked = requireString(params, 'uri');
        const { up, name: uri, shown = asked } = this.resolve.uri(session, asked);
        params.uri = uri;
        const result = await this.answered(this.call(session, id, up, req.method, params, signal, event, { kind: 'resources', name: shown, upstreamName: uri }));
        // A view read by its own `ui://` URI (see Resolver.uri) gets its contents under that URI.
        return this.adaptResult(session, up, asked === uri ? asIs : rewriteReadResult, result);
      }
      case 'resources/subscribe':
        return this.subscribe(session, id, params, signal, event);
      case 'resources/unsubscribe':
        return this.unsubscribe(session, id, params, signal, event);
      case 'completion/complete':
        return this.complete(session, id, params, signal, event);
      case 'logging/setLevel':
        await this.logLevels.set(session, params);
        return {};
      case 'tasks/get':
      case 'tasks/result':
      case 'tasks/cancel':
        return this.taskRequest(session, req, params, signal, event);
      default:
        throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${req.method}`);
    }
  }

  private call(
    session: SessionPort,
    hostRequestId: JsonRpcId,
    upstream: Upstream,
    method: string,
    params: Params,
    signal: CancelSignal,
    event: RequestEvent | undefined,
    target?: Target,
  ): Call {
    const token = progressTokenOf(params);
    const onProgress = token === undefined ? undefined : (p: Params) => session.notify('notifications/progress', { ...p, progressToken: token }, hostRequestId);
    // A 2026-07-28 host's session learns which server its call went to (modern.ts: whose log
    // messages, with no request named, can be its call's).
    session.routed?.(hostRequestId, upstream.name);
    if (event) {
      event.server = upstream.name;
      event.name = target?.name;
      event.upstreamName = target?.upstreamName;
    }
    // A related-task id the host saw as `<server>:<id>` goes upstream as `<id>`.
    unwrapRelatedTask(params);
    return { session, hostRequestId, upstream, method, params, target, signal, onProgress, opaque: PASS_THROUGH.results.has(method), raw: false, event };
  }

  /** tools/call and prompts/get: resolve the public name, forward, rewrite the result. */
  private async callNamed(
    session: SessionPort,
    hostRequestId: JsonRpcId,
    kind: NamedKind,
    params: Params,
    signal: CancelSignal,
    event: RequestEvent | undefined,
    /** Asked through call_tool (the search surface): a view's own tools are not callable so. */
    throughSearch = false,
  ): Promise<Result> {
    const asked = requireString(params, 'name');
    // A listed name of a ready server is known at once: no promise turn for the usual call.
    const { up, name, shown: publicName = asked } = this.resolve.listed(session, kind, asked) ?? (await this.resolve.named(session, kind, asked, signal));
    if (kind === 'tools') this.surface.checkToolset(session, publicName);
    if (throughSearch && publicName !== asked) this.surface.refuseAppOnly(session, publicName);
    params.name = name;
    const method = kind === 'tools' ? 'tools/call' : 'prompts/get';
    const call = this.call(session, hostRequestId, up, method, params, signal, event, { kind, name: publicName, upstreamName: name });
    // A task's status notices may come in the same read as the task: its owner is known by then.
    if (params.task !== undefined) call.onResult = (res) => this.ownTask(session, up, res);
    else if (kind === 'tools') call.raw = takesUnread(session);
    let result: Result;
    try {
      // answered(), inlined: one async layer less per call.
      result = await this.forward(call);
      // Its text goes to the host as it is: everything below would leave it unchanged (takesUnread).
      if (result instanceof RawResult) return result;
      if (needsInput(result) && session.era !== 'modern') result = await fulfilInput(call, result, this.forward, this.pool);
    } catch (err) {
      throw this.adaptError(session, up, err);
    }
    if (kind === 'prompts') return this.adaptResult(session, up, rewritePromptResult, result);
    // A task-augmented call answers with a task; the host will come back for it by id.
    if (params.task !== undefined && typeof (result.task as Params | undefined)?.taskId === 'string') {
      wrapTaskResult(result, up.name);
      return result;
    }
    return this.adaptResult(session, up, rewriteToolResult, result);
  }

  private toolsList(session: SessionPort, params: Params, signal: CancelSignal, event: RequestEvent | undefined): Promise<Result> {
    const page = (): Promise<Result> => this.lists.page('tools', session.client, this.resolve.live(session), params, signal, this.surface.toolset(session), this.surface.sameForAll(), event);
    // Mode "all" settles without a turn of its own: the list is the merged page, as before surfaces.
    const own = this.surface.list(session, params, signal);
    return own ? own.then((answer) => answer ?? page()) : page();
  }

  /** The host that started a task owns it, until the upstream may forget it (its ttl; null: no limit but the caps). */
  private ownTask(session: SessionPort, up: Upstream, result: Result): void {
    const task = result.task as Params | undefined;
    if (typeof task?.taskId !== 'string') return;
    const ttl = task.ttl;
    this.owners.tasks.set(wrapId(up.name, task.taskId), session, typeof ttl === 'number' && ttl >= 0 ? ttl : undefined);
  }

  /** search_tools is answered by the surface; call_tool becomes the call it asks for. */
  private async metaCall(session: SessionPort, hostRequestId: JsonRpcId, params: Params, signal: CancelSignal, event: RequestEvent | undefined): Promise<Result> {
    const routed = await this.surface.route(session, params, signal);
    if ('params' in routed) return this.callNamed(session, hostRequestId, 'tools', routed.params, signal, event, routed.via !== undefined);
    if (event) event.name = params.name as string;
    return routed.answer;
  }

  /**
   * Forwards a call that may need input on the way (tools/call, prompts/get, resources/read).
   * A 2026-07-28 upstream asks for it in an `input_required` answer: a modern host gets that
   * answer and retries itself; a legacy host is asked the legacy way (input-bridge.ts).
   */
  private async answered(call: Call): Promise<Result> {
    const result = await this.forward(call);
    return needsInput(result) && call.session?.era !== 'modern' ? fulfilInput(call, result, this.forward, this.pool) : result;
  }

  /** Upstream result -> what this host can read: URIs namespaced, ids wrapped, blocks it knows. */
  private adaptResult(session: SessionPort, up: Upstream, rewrite: (r: Params, server: string) => Params, result: Result): Result {
    if (up.config.resources.namespace === 'prefix') rewrite(result, up.name);
    wrapRelatedTask(result, up.name);
    return adaptForHost(session.protocolVersion, result);
  }

  /** -32042 carries elicitations whose ids the host must see namespaced (and that are its own). */
  private adaptError(session: SessionPort, up: Upstream, err: unknown): unknown {
    if (!(err instanceof RpcError) || err.code !== McpError.UrlElicitationRequired) return err;
    const elicitations = (err.data as Params | undefined)?.elicitations;
    if (Array.isArray(elicitations)) {
      for (const e of elicitations as Params[]) {
        if (typeof e?.elicitationId === 'string') {
          e.elicitationId = wrapId(up.name, e.elicitationId);
          this.owners.elicitations.set(e.elicitationId as string, session);
        }
      }
    }
    return err;
  }

  private async taskRequest(session: SessionPort, req: JsonRpcRequest, params: Params, signal: CancelSignal, event: RequestEvent | undefined): Promise<Result> {
    const wrapped = requireString(params, 'taskId');
    const parts = unwrapId(wrapped);
    const up = parts && this.owners.tasks.get(wrapped) === session ? this.pool.get(session, parts.server) : undefined;
    if (!parts || !up) throw new RpcError(ErrorCode.InvalidParams, `Unknown task: ${wrapped}`);
    this.resolve.available(up, `Task ${wrapped}`);
    params.taskId = parts.rest;
    const result = await this.forward(this.call(session, req.id, up, req.method, params, signal, event));
    if (req.method === 'tasks/result') {
      // The host has what the task was for: owned a little longer (a last tasks/get), then
      // forgotten, so ownership is bounded by tasks running or unfetched (see Owners).
      this.owners.tasks.expireIn(wrapped, TASK_DONE_GRACE_MS);
      return this.adaptResult(session, up, rewriteToolResult, result);
    }
    wrapTaskResult(result, up.name);
    return result;
  }

  private async subscribe(session: SessionPort, hostRequestId: JsonRpcId, params: Params, signal: CancelSignal, event: RequestEvent | undefined): Promise<Result> {
    const { up, uri, target } = this.resource(session, params);
    if (!this.subscriptions.has(up, uri)) {
      // The first subscriber subscribes upstream; later ones only join the set.
      params.uri = uri;
      await this.forward(this.call(session, hostRequestId, up, 'resources/subscribe', params, signal, event, target));
    }
    this.subscriptions.add(up, uri, session);
    return {};
  }

  private async unsubscribe(session: SessionPort, hostRequestId: JsonRpcId, params: Params, signal: CancelSignal, event: RequestEvent | undefined): Promise<Result> {
    const { up, uri, target } = this.resource(session, params);
    if (this.subscriptions.remove(up, uri, session)) {
      params.uri = uri;
      await this.forward(this.call(session, hostRequestId, up, 'resources/unsubscribe', params, signal, event, target));
    }
    return {};
  }

  /** The upstream and URI behind `params.uri`, and the call target policy judges. */
  private resource(session: SessionPort, params: Params): { up: Upstream; uri: string; target: Target } {
    const asked = requireString(params, 'uri');
    const { up, name: uri, shown = asked } = this.resolve.uri(session, asked);
    return { up, uri, target: { kind: 'resources', name: shown, upstreamName: uri } };
  }

  private async complete(session: SessionPort, hostRequestId: JsonRpcId, params: Params, signal: CancelSignal, event: RequestEvent | undefined): Promise<Result> {
    const ref = params.ref as Params | undefined;
    let owner: Resolved;
    let target: Target;
    if (ref?.type === 'ref/prompt' && isText(ref.name)) {
      owner = await this.resolve.named(session, 'prompts', ref.name, signal);
      target = { kind: 'prompts', name: ref.name, upstreamName: owner.name };
      params.ref = { ...ref, name: owner.name };
    } else if (ref?.type === 'ref/resource' && isText(ref.uri)) {
      owner = this.resolve.uri(session, ref.uri);
      target = { kind: 'resources', name: owner.shown ?? ref.uri, upstreamName: owner.name };
      params.ref = { ...ref, uri: owner.name };
    } else {
      throw new RpcError(ErrorCode.InvalidParams, 'completion/complete needs ref {type: "ref/prompt", name} or {type: "ref/resource", uri}');
    }
    const call = this.call(session, hostRequestId, owner.up, 'completion/complete', params, signal, event, target);
    // A server without completions simply has none to offer; hosts handle an empty list better
    // than an error. Policy still judges the item first.
    if (!owner.up.capabilities.completions) call.local = { completion: { values: [], hasMore: false } };
    return this.forward(call);
  }
}

/**
 * Whether a tool result for this host may pass unread (Call.raw): one that holds no key mcpmux
 * reads in results (no URI to namespace, no task id to wrap, no input_required: raw-result.ts)
 * is one adaptResult and fulfilInput leave as it is, for a host that knows every content block
 * (2025-06-18 on: adaptForHost) and is not a 2026-07-28 host (whose results are reshaped:
 * session/modern.ts). A new change to tool results on the way back must be added here or to
 * the keys in raw-result.ts.
 */
function takesUnread(session: SessionPort): boolean {
  return session.era === 'legacy' && knowsEveryBlock(session.protocolVersion);
}

function requireString(params: Params, key: string): string {
  const v = params[key];
  // A number too big for a double arrives as a marked string (big-numbers.ts): still a number.
  if (!isText(v)) throw new RpcError(ErrorCode.InvalidParams, `Invalid params: params.${key} must be a string`);
  return v;
}

/** A result passed on as the upstream wrote it. */
function asIs(result: Params): Params {
  return result;
}
