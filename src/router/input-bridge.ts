// The bridge for a 2026-07-28 upstream and a legacy host: the upstream needs input (it answers
// a call with `resultType: "input_required"` and `inputRequests`), the host can only give it the
// legacy way, as server-initiated requests. Each input request goes to the host like any
// server-initiated request (the Reverse side: capability checks, static roots, observation);
// the answers go back to the upstream on a retry of the same call, with its `requestState`,
// until the upstream answers for good. The host sees one call and the questions it asked.

import { ErrorCode, errorResponse, RpcError } from '../jsonrpc/message.js';
import { materialise } from '../jsonrpc/opaque.js';
import type { IncomingInfo, Result } from '../jsonrpc/endpoint.js';
import type { Params } from '../protocol/mcp.js';
import type { Call, Forward } from './forward.js';
import type { UpstreamPool } from './pool.js';

/** Rounds of questions one call may take before mcpmux stops asking (a server that never settles). */
const MAX_ROUNDS = 8;

const INPUT_METHODS = new Set(['elicitation/create', 'sampling/createMessage', 'roots/list']);

export function needsInput(result: Result): boolean {
  return result.resultType === 'input_required';
}

export async function fulfilInput(call: Call, first: Result, forward: Forward, pool: UpstreamPool): Promise<Result> {
  const listener = pool.listener!;
  let result = first;
  for (let round = 1; needsInput(result); round++) {
    // Its input requests go to the host in messages of their own: long values kept raw in this
    // answer (opaque.ts) must be real strings first, or the host would get placeholders.
    materialise(result);
    if (round > MAX_ROUNDS) throw new RpcError(ErrorCode.InternalError, `Server "${call.upstream.name}" still needed input after ${MAX_ROUNDS} rounds; mcpmux stopped asking`);
    const requests = (result.inputRequests ?? {}) as Record<string, Params>;
    const inputResponses: Params = {};
    for (const [key, r] of Object.entries(requests)) {
      if (!r || typeof r.method !== 'string' || !INPUT_METHODS.has(r.method)) {
        throw new RpcError(ErrorCode.InternalError, `Server "${call.upstream.name}" asked for input mcpmux cannot ask a host for: ${JSON.stringify(r?.method ?? null)}`);
      }
      const req = { jsonrpc: '2.0' as const, id: `input-${round}-${key}`, method: r.method, params: (r.params as Params | undefined) ?? {} };
      // Observed like any server-initiated request: the listener may ask to hear of the answer.
      const info: IncomingInfo = { bytes: 0 };
      try {
        inputResponses[key] = await listener.request(call.upstream, req, call.signal, call, info);
        info.onAnswered?.({ jsonrpc: '2.0', id: req.id, result: inputResponses[key] as Result }, 0);
      } catch (err) {
        const e = err instanceof RpcError ? err : new RpcError(ErrorCode.InternalError, (err as Error).message);
        info.onAnswered?.(errorResponse(req.id, e.toJSON()), 0);
        throw e;
      }
    }
    const params: Params = { ...call.params, inputResponses };
    if (typeof result.requestState === 'string') params.requestState = result.requestState;
    else delete params.requestState;
    result = await forward({ ...call, params });
  }
  return result;
}
