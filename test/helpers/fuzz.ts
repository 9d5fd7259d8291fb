// Generators (fast-check) for what a hostile or broken peer sends: JSON-RPC envelopes with
// every MCP method and wrong types in every field, ids of every shape (and too big for a
// double), batches, responses and notifications out of place, deep and huge values, and raw
// text that is not JSON at all. Each message is one line of text.
//
// `outOfRangeLines` is the same traffic with every id replaced by a number a double cannot
// hold, each one distinct, alone and in batches: what every request must get is known (an
// answer carrying exactly that id, docs/decisions.md), so a fuzz run can check each one.

import fc from 'fast-check';
import { parseJson } from '../../src/jsonrpc/big-numbers.js';
import { classify } from '../../src/jsonrpc/message.js';

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
  fc.constantFrom('null', 'true', 'false', '{}', '[]', '{"a":1}', '-0', '1e400', '-1e400', '1e309', '-1e309', '1E+400', '123456789012345678901234567890'),
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
export const envelope: fc.Arbitrary<string> = fc
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

// ---- out-of-range ids ------------------------------------------------------------------------------

/**
 * An id a double cannot hold, distinct for each `k` and never one `idText` generates: past the
 * largest double (e309), far past it (e400), both signs, and integers of 37 digits.
 */
export function outOfRangeId(k: number): string {
  switch (k % 5) {
    case 0:
      return `${k}.5e400`;
    case 1:
      return `-${k}.5e400`;
    case 2:
      return `${k}.5e309`;
    case 3:
      return `-${k}.25e309`;
    default:
      return `9${String(k).padStart(6, '0')}${'0'.repeat(30)}`;
  }
}

/** A request every surface answers at once, with an id given as a literal. */
function probe(id: string, n: number): string {
  const asks = [
    '"method":"ping"',
    '"method":"tools/list"',
    '"method":"tools/call","params":{"name":"fx__tool_0","arguments":{"value":"probe"}}',
    '"method":"prompts/get","params":{"name":"fx__prompt_0","arguments":{"topic":"probe"}}',
    '"method":"resources/read","params":{"uri":123456789012345678901234567890}',
    '"method":"no/such/method"',
  ];
  return `{"jsonrpc":"2.0","id":${id},${asks[n % asks.length]}}`;
}

export interface OutOfRangeLine {
  /** One message or a batch, as one line of text. */
  text: string;
  /** The id literals in it that must each be answered exactly once, with that literal. */
  answered: string[];
  /** Streamable HTTP refuses this body as a whole (400, id null): an entry it cannot answer. */
  httpRefused: boolean;
}

/**
 * `n` lines for a session that takes batches (2024-11-05 or 2025-03-26): generated messages with
 * their ids replaced by distinct out-of-range ones, each with a probe request, sent alone or as
 * a batch. For `http`, batch entries Streamable HTTP refuses at the HTTP level are left out (an
 * invalid message, an initialize), so each batch is answered entry by entry there too.
 */
export function outOfRangeLines(n: number, seed: number, opts: { http?: boolean } = {}): OutOfRangeLine[] {
  const shapes = fc.sample(fc.record({ batch: fc.boolean(), entries: fc.array(envelope, { maxLength: 4 }), ask: fc.nat() }), { numRuns: n, seed });
  let k = 0;
  const out: OutOfRangeLine[] = [];
  for (const { batch, entries, ask } of shapes) {
    const items = entries.map((e) => (e.startsWith('{"id":') ? e.replace(/^\{"id":(?:[^,{}[\]"]+|"(?:[^"\\]|\\.)*"|\{\}|\[\]|\{"a":1\}),/, `{"id":${outOfRangeId(k++)},`) : e));
    items.splice(ask % (items.length + 1), 0, probe(outOfRangeId(k++), ask));
    const judged = items.map(judge);
    if (!batch) {
      // Alone, a message Streamable HTTP refuses gets 400 with id null: no answer carries its id.
      for (const j of judged) out.push({ text: j.text, answered: j.answered && !(opts.http && j.httpRefused) ? [j.id!] : [], httpRefused: j.httpRefused });
      continue;
    }
    const kept = opts.http ? judged.filter((j) => !j.httpRefused && !j.initialize) : judged;
    out.push({ text: `[${kept.map((j) => j.text).join(',')}]`, answered: kept.filter((j) => j.answered).map((j) => j.id!), httpRefused: false });
  }
  return out;
}

/** What mcpmux owes one message: an answer (a request, or an invalid message with a usable id). */
function judge(text: string): { text: string; id: string | undefined; answered: boolean; httpRefused: boolean; initialize: boolean } {
  const idLiteral = /^\{(?:"jsonrpc":"2\.0",)?"id":(-?[0-9][0-9.eE+-]*),/.exec(text)?.[1];
  if (idLiteral === undefined && text.startsWith('{"id":')) throw new Error(`an id was not replaced: ${text.slice(0, 100)}`);
  const c = classify(parseJson(text));
  const answered = idLiteral !== undefined && (c.kind === 'request' || (c.kind === 'invalid' && c.id !== null));
  return {
    text,
    id: idLiteral,
    answered,
    httpRefused: c.kind === 'invalid' || c.kind === 'bad-response',
    initialize: c.kind === 'request' && c.msg.method === 'initialize',
  };
}

/** Counts, per id literal, the responses in `text` (any mix of lines, SSE events, batches). */
export function countAnswers(text: string, counts: Map<string, number>): void {
  for (const m of text.matchAll(/"id":(-?[0-9][0-9.eE+-]*),"(?:result|error)"/g)) counts.set(m[1]!, (counts.get(m[1]!) ?? 0) + 1);
}

/** The ids that were not answered exactly once (at most `max` of them, for a readable failure). */
export function unanswered(lines: OutOfRangeLine[], counts: Map<string, number>, max = 5): string[] {
  const bad: string[] = [];
  for (const l of lines) {
    for (const id of l.answered) {
      const c = counts.get(id) ?? 0;
      if (c !== 1 && bad.length < max) bad.push(`${id} answered ${c} times in ${l.text.slice(0, 300)}`);
    }
  }
  return bad;
}
