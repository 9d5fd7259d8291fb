// A 2026-07-28 upstream seen as the rest of mcpmux expects an upstream. What comes back from it, made into what the rest of mcpmux expects of an
// upstream's answer: the revision's own fields that say nothing about the content are taken
// off (`resultType: "complete"`, the server naming itself in `_meta`); a modern host gets them
// back from mcpmux itself (protocol/modern.ts). `input_required` results stay as they are:
// whoever asked must see that input is needed.

import { Canceller } from '../jsonrpc/cancel.js';
import type { Endpoint, Result } from '../jsonrpc/endpoint.js';
import { ErrorCode, RpcError, type JsonRpcId } from '../jsonrpc/message.js';
import type { Params } from '../protocol/mcp.js';
import { META } from '../protocol/modern.js';

export function fromModern(result: Result): Result {
  if (result.resultType === 'complete') delete result.resultType;
  const meta = result._meta as Params | undefined;
  if (meta && META.serverInfo in meta) {
    delete meta[META.serverInfo];
    if (Object.keys(meta).length === 0) delete result._meta;
  }
  return result;
}

/**
 * Resource subscriptions on a 2026-07-28 upstream, which has no resources/subscribe: a
 * host's subscription to a URI becomes a subscriptions/listen stream for that URI, open until
 * the last host unsubscribes (the router counts hosts; this sees one subscribe per URI).
 * Updates come on the stream as `notifications/resources/updated`, as from a legacy server.
 */
export class ResourceListens {
  private readonly byUri = new Map<string, Canceller>();
  private readonly acks = new Map<JsonRpcId, (notifications: Params) => void>();

  constructor(
    private readonly server: string,
    private readonly ep: Endpoint,
    private readonly envelope: () => Params,
    private readonly ackWithinMs: number,
  ) {}

  private readonly opening = new Map<string, Promise<Result>>();

  /** One listen per URI, even when two subscribes race (the router checks before it awaits). */
  subscribe(uri: string): Promise<Result> {
    if (this.byUri.has(uri)) return Promise.resolve({});
    let p = this.opening.get(uri);
    if (!p) {
      p = this.open(uri).finally(() => this.opening.delete(uri));
      this.opening.set(uri, p);
    }
    return p;
  }

  private async open(uri: string): Promise<Result> {
    const id = this.ep.allocateId();
    const ctl = new Canceller();
    const acked = new Promise<Params>((resolve) => this.acks.set(id, resolve));
    // No timeout: the stream stays open while someone is subscribed.
    const stream = this.ep.request(id, 'subscriptions/listen', { notifications: { resourceSubscriptions: [uri] }, _meta: this.envelope() }, { timeoutMs: 0, signal: ctl });
    const ended = stream.then(
      () => undefined,
      () => undefined,
    );
    void ended.then(() => {
      this.acks.delete(id);
      if (this.byUri.get(uri) === ctl) this.byUri.delete(uri);
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), this.ackWithinMs)));
    const honored = await Promise.race([acked, ended, late]);
    clearTimeout(timer);
    this.acks.delete(id);
    const uris = (honored?.resourceSubscriptions as unknown[] | undefined) ?? [];
    if (!uris.includes(uri)) {
      ctl.cancel('not acknowledged');
      throw new RpcError(ErrorCode.MethodNotFound, `Server "${this.server}" does not offer updates for ${uri}`);
    }
    this.byUri.set(uri, ctl);
    return {};
  }

  unsubscribe(uri: string): Result {
    const ctl = this.byUri.get(uri);
    this.byUri.delete(uri);
    ctl?.cancel('unsubscribed');
    return {};
  }

  /** `notifications/subscriptions/acknowledged`: true when it was for one of these streams. */
  acknowledged(params: Params | undefined): boolean {
    const id = (params?._meta as Params | undefined)?.[META.subscriptionId] as JsonRpcId | undefined;
    const resolve = id === undefined ? undefined : this.acks.get(id);
    if (!resolve) return false;
    resolve((params?.notifications as Params | undefined) ?? {});
    return true;
  }
}

/**
 * Where a tool's `x-mcp-header` annotations (2026-07-28, Streamable HTTP) put its arguments:
 * for each annotated property, the chain of `properties` keys to it and the header name
 * (`Mcp-Param-<name>`). A tool whose annotations break the rules is invalid: undefined.
 */
export function paramHeaders(tool: Params): { path: string[]; name: string }[] | undefined {
  const out: { path: string[]; name: string }[] = [];
  const seen = new Set<string>();
  let valid = true;
  const walk = (schema: unknown, path: string[], reachable: boolean): void => {
    if (!schema || typeof schema !== 'object') return;
    const s = schema as Params;
    if ('x-mcp-header' in s && path.length > 0) {
      const name = s['x-mcp-header'];
      const primitive = s.type === 'string' || s.type === 'integer' || s.type === 'boolean';
      if (!reachable || typeof name !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) || seen.has(name.toLowerCase()) || !primitive) valid = false;
      else {
        seen.add(name.toLowerCase());
        out.push({ path, name });
      }
    }
    for (const [k, v] of Object.entries(s)) {
      if (k === 'properties' && v && typeof v === 'object') for (const [p, sub] of Object.entries(v as Params)) walk(sub, [...path, p], reachable);
      else if (v && typeof v === 'object' && k !== 'x-mcp-header') {
        // Anything reached other than through `properties` may not carry the annotation.
        for (const sub of Array.isArray(v) ? v : [v]) walk(sub, path, false);
      }
    }
  };
  walk(tool.inputSchema, [], true);
  return valid ? out : undefined;
}

/** The `Mcp-Param-*` values of one call: each annotated argument present, as the header carries it. */
export function paramHeaderValues(specs: readonly { path: string[]; name: string }[], args: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { path, name } of specs) {
    let v: unknown = args;
    for (const k of path) v = v && typeof v === 'object' ? (v as Params)[k] : undefined;
    if (typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isSafeInteger(v))) out[name] = String(v);
  }
  return out;
}

/** Set on a request's params (never serialised): the Mcp-Param-* headers its POST carries. */
export const PARAM_HEADERS = Symbol('mcpmux.paramHeaders');
