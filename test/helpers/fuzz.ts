// Generators (fast-check) for what a hostile or broken peer sends: JSON-RPC envelopes with
// every MCP method and wrong types in every field, ids of every shape (and too big for a
// double), batches, responses and notifications out of place, deep and huge values, and raw
// text that is not JSON at all. Each message is one line of text.

import fc from 'fast-check';

export const METHODS = [
  'initialize', 'ping', 'tools/list', 'tools/call', 'prompts/list', 'prompts/get', 'resources/list', 'resources/templates/list',
  'resources/read', 'resources/subscribe', 'resources/unsubscribe', 'completion/complete', 'logging/setLevel', 'tasks/get',
  'tasks/result', 'tasks/cancel', 'tasks/list', 'sampling/createMessage', 'elicitation/create', 'roots/list',
  'notifications/initialized', 'notifications/cancelled', 'notifications/progress', 'notifications/roots/list_changed',
  'notifications/message', 'notifications/resources/updated', 'notifications/tools/list_changed', 'notifications/elicitation/complete',
];

/** Any value, sometimes deep or large. */
const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 20, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 3000 }).map((d) => JSON.parse('['.repeat(d) + ']'.repeat(d))) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 40_000 }).map((n) => 'x'.repeat(n)) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
);

/** A raw JSON literal for an id: every shape, including numbers a double cannot hold. */
const idText: fc.Arbitrary<string> = fc.oneof(
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
  fc.bigInt({ min: 2n ** 53n, max: 2n ** 70n }).map(String),
  fc.string({ maxLength: 20 }).map((s) => JSON.stringify(s)),
  fc.constantFrom('null', 'true', 'false', '{}', '[]', '{"a":1}', '-0', '1e400'),
);

/** Params for a method, with the fields MCP names given values of any type. */
const params: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 2, arbitrary: fc.constant(undefined) },
  { weight: 2, arbitrary: anyValue },
  {
    weight: 6,
    arbitrary: fc.record(
      {
        name: fc.oneof(fc.constantFrom('fx__tool_0', 'fx__tool_1', 'fx__prompt_0', 'nope__x', ''), anyValue),
        arguments: anyValue,
        uri: fc.oneof(fc.constantFrom('fx+fixture://fx/res/0', 'fixture://fx/res/1', 'fx+'), anyValue),
        cursor: anyValue,
        level: fc.oneof(fc.constantFrom('debug', 'info', 'error', 'emergency', 'loud'), anyValue),
        requestId: fc.oneof(fc.integer({ min: 0, max: 50 }), anyValue),
        progressToken: anyValue,
        ref: anyValue,
        argument: anyValue,
        taskId: anyValue,
        protocolVersion: fc.oneof(fc.constantFrom('2025-11-25', '2024-11-05', '1999-01-01'), anyValue),
        capabilities: anyValue,
        _meta: fc.oneof(fc.record({ progressToken: anyValue }, { requiredKeys: [] }), anyValue),
      },
      { requiredKeys: [] },
    ),
  },
);

const method: fc.Arbitrary<unknown> = fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...METHODS) }, { weight: 1, arbitrary: anyValue });

/** One JSON-RPC-ish message as text (the id spliced in raw, so it can be any literal). */
const envelope: fc.Arbitrary<string> = fc
  .record({
    kind: fc.constantFrom('request', 'request', 'request', 'notification', 'response', 'error', 'broken'),
    id: idText,
    method,
    params,
    result: anyValue,
    jsonrpc: fc.oneof({ weight: 9, arbitrary: fc.constant('2.0') }, { weight: 1, arbitrary: anyValue }),
  })
  .map(({ kind, id, method, params, result, jsonrpc }) => {
    const body: Record<string, unknown> = { jsonrpc };
    if (kind === 'request' || kind === 'notification') {
      body.method = method;
      if (params !== undefined) body.params = params;
    } else if (kind === 'response') {
      body.result = result;
    } else if (kind === 'error') {
      body.error = { code: -32000, message: (JSON.stringify(result) ?? '').slice(0, 40) };
    } else {
      body.method = method;
      body.result = result;
    }
    const text = JSON.stringify(body);
    return kind === 'notification' ? text : `{"id":${id},${text.slice(1)}`;
  });

/** Text that is not one JSON-RPC message: garbage, cut-off JSON, batches. */
const raw: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 80 }).map((s) => s.replace(/\n/g, ' ')),
  envelope.chain((e) => fc.integer({ min: 0, max: Math.max(0, e.length - 1) }).map((n) => e.slice(0, n))),
  fc.array(envelope, { maxLength: 6 }).map((es) => `[${es.join(',')}]`),
  fc.constantFrom('[]', '[[]]', '{}', 'null', '""', '0', '{"jsonrpc":"2.0"}', '[{"jsonrpc":"2.0","id":1,"method":"ping"},[]]'),
);

export const hostLine: fc.Arbitrary<string> = fc.oneof({ weight: 5, arbitrary: envelope }, { weight: 2, arbitrary: raw });

/** `n` lines, the same for the same seed. */
export function lines(n: number, seed: number): string[] {
  return fc.sample(hostLine, { numRuns: n, seed });
}

/** Checks one line a peer received from mcpmux: JSON, JSON-RPC 2.0, a response has exactly one of result/error. */
export function validOutput(line: string): string | undefined {
  let m: any;
  try {
    m = JSON.parse(line);
  } catch {
    return `not JSON: ${line.slice(0, 200)}`;
  }
  const one = (x: any): string | undefined => {
    if (typeof x !== 'object' || x === null || Array.isArray(x)) return `not an object: ${line.slice(0, 200)}`;
    if (x.jsonrpc !== '2.0') return `jsonrpc is not "2.0": ${line.slice(0, 200)}`;
    if ('method' in x) return typeof x.method === 'string' ? undefined : `method not a string: ${line.slice(0, 200)}`;
    if (('result' in x) === ('error' in x)) return `a response needs exactly one of result and error: ${line.slice(0, 200)}`;
    if ('error' in x && (!Number.isInteger(x.error?.code) || typeof x.error?.message !== 'string')) return `bad error object: ${line.slice(0, 200)}`;
    return undefined;
  };
  if (Array.isArray(m)) {
    if (m.length === 0) return 'an empty batch';
    for (const x of m) {
      const bad = one(x);
      if (bad) return bad;
    }
    return undefined;
  }
  return one(m);
}
