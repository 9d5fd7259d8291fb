// The forward step: every request mcpmux sends to an upstream passes here — host calls, list
// pages, subscriptions, log levels, re-subscribes after a restart — so there is one place to
// observe them and one place for governance to wrap. Governance (policy, rate limits) comes in
// as interceptors, the way undici composes dispatchers, and can be replaced at run time.

import { NEVER, type CancelSignal } from '../jsonrpc/cancel.js';
import type { Result } from '../jsonrpc/endpoint.js';
import type { JsonRpcId } from '../jsonrpc/message.js';
import { publishUpstreamRequest, upstreamRequestClock, type RequestEvent } from '../observe/events.js';
import type { Params } from '../protocol/mcp.js';
import type { Upstream } from '../upstream/upstream.js';
import type { Usage } from './owners.js';
import type { SessionPort } from './session-port.js';

/**
 * What the router forwards without reading any long string value in it (tool arguments,
 * content, sampling messages): such values may stay raw bytes from one side to the other
 * (jsonrpc/opaque.ts). Everything else is fully decoded before the router sees it.
 */
export const PASS_THROUGH = {
  /** Host requests whose params go on to an upstream. */
  hostRequests: new Set(['tools/call', 'prompts/get']),
  /** Upstream requests whose params go on to a host. */
  upstreamRequests: new Set(['sampling/createMessage', 'elicitation/create']),
  /** Our requests to upstreams whose results go back to the host. */
  results: new Set(['tools/call', 'prompts/get', 'resources/read']),
} as const;

/** The three kinds of things a host can be allowed or denied (as policy names them). */
export type ItemKind = 'tools' | 'prompts' | 'resources';

/** What a call is about: the item, as the host named it and as its upstream knows it. */
export interface Target {
  kind: ItemKind;
  /** Public tool or prompt name, or the URI (or URI template) as the host sees it. */
  name: string;
  /** The upstream's own name or URI. */
  upstreamName: string;
}

/** One request to one upstream, as governance and observers see it. */
export interface Call {
  /** The host session it serves; undefined for mcpmux's own requests (list pages, re-subscribes, log levels). */
  session: SessionPort | undefined;
  /** The host's id for the request this call serves. */
  hostRequestId: JsonRpcId | undefined;
  upstream: Upstream;
  method: string;
  /**
   * Long string values in the params of a passed-through request (PASS_THROUGH) may be raw
   * placeholders: an interceptor that reads argument values calls `materialise(params)` first.
   */
  params: Params;
  target: Target | undefined;
  signal: CancelSignal;
  onProgress?: (p: Params) => void;
  /** The result goes back to the host untouched: its long strings may stay raw (PASS_THROUGH). */
  opaque: boolean;
  /**
   * Nothing in the result is for mcpmux to read or change, unless it holds a key that is (see
   * jsonrpc/raw-result.ts): it may come back as its text (a RawResult) and go to the host so.
   * Set by Dispatch.callNamed only (false elsewhere: the result is always parsed). Whoever
   * forwards a call with it set may get a RawResult, typed as a Result: only its `isError` reads.
   */
  raw: boolean;
  /** The host request's observation record, when someone observes (observe/events.ts). */
  event: RequestEvent | undefined;
  /**
   * Set when mcpmux answers for the upstream (completion/complete to a server without
   * completions): the interceptors still judge the call, but nothing is sent upstream.
   */
  local?: Result;
  /** Called with the upstream's result as it is read, before anything awaits it (CallOptions.onResult). */
  onResult?: (result: Result) => void;
}

/** A request mcpmux makes on its own behalf, for no host request (it may serve several). */
export function ownCall(upstream: Upstream, method: string, params: Params, signal: CancelSignal = NEVER): Call {
  return { session: undefined, hostRequestId: undefined, upstream, method, params, target: undefined, signal, opaque: false, raw: false, event: undefined };
}

/** Forwards a call; for a call with `raw` set, the result may be a RawResult (jsonrpc/raw-result.ts). */
export type Forward = (call: Call) => Promise<Result>;
export type Interceptor = (next: Forward) => Forward;

/** How governance plugs in: wrappers around the forward step, and what each side may see. */
export interface Governance {
  /** Outermost first. */
  readonly interceptors: readonly Interceptor[];
  /** A server's own allow/deny lists, on its own names and URIs: what it is never shown to offer. */
  serverAllows(server: string, kind: ItemKind, upstreamName: string): boolean;
  /** Global and per-client lists, on public names and host-visible URIs. */
  clientAllows(client: string, kind: ItemKind, name: string): boolean;
  /** False when `clientAllows` says yes to everything, so lists need no per-client pass. */
  filtersClients(kind: ItemKind): boolean;
  /** Tool pinning: whether a tool, as the upstream defines it now, may be shown (absent: yes). */
  toolVisible?(server: string, tool: Params): boolean;
  /** Tool pinning: whether a tool (the upstream's own name) is held, so calls are refused as such. */
  toolHeld?(server: string, tool: string): boolean;
}

/** Lets everything through: for commands that start a router without a config's governance. */
export const OPEN_GOVERNANCE: Governance = {
  interceptors: [],
  serverAllows: () => true,
  clientAllows: () => true,
  filtersClients: () => false,
};

export class ForwardChain {
  private chain: Forward;
  private readonly base: Forward;

  constructor(usage: Usage) {
    this.base = (call) => send(usage, call);
    this.chain = this.base;
  }

  /** Replaces the interceptors; calls already under way finish with the chain they started with. */
  use(interceptors: readonly Interceptor[]): void {
    this.chain = interceptors.reduceRight<Forward>((next, wrap) => wrap(next), this.base);
  }

  readonly forward: Forward = (call) => this.chain(call);
}

/** The base of the chain: one request to one upstream, tracked for reverse routing, timed for observers. */
async function send(usage: Usage, call: Call): Promise<Result> {
  if (call.local) return call.local;
  const { upstream: up, session } = call;
  const release = session && usage.begin(up, session);
  const t0 = upstreamRequestClock();
  try {
    const result = await up.request(call.method, call.params, {
      signal: call.signal,
      onProgress: call.onProgress,
      context: call,
      opaque: call.opaque,
      raw: call.raw,
      // A 2026-07-28 server learns, per request, what the host it serves can be asked.
      hostCapabilities: session?.clientCapabilities,
      onResult: call.onResult,
    });
    publishUpstreamRequest(t0, up.name, call.method, session?.id, undefined, call.event);
    return result;
  } catch (err) {
    publishUpstreamRequest(t0, up.name, call.method, session?.id, err, call.event);
    throw err;
  } finally {
    release?.();
  }
}
