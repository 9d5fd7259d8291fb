#!/usr/bin/env node
// The id-rewriting relay: a floor for the one rewrite a process carrying several hosts'
// requests on one upstream connection cannot skip, and nothing more. It spawns the given
// command and copies lines both ways; a host's request gets an id of the relay's own on the way
// up (the host's is kept in a Map) and the upstream's answer gets the host's id back on the way
// down. No JSON is parsed: the first `"id":` of a line is found with a regular expression and
// spliced. With --parse it parses each line instead: JSON.parse, the id swapped on the object,
// JSON.stringify: the least a proxy that parses messages (to route or rename anything) does.
//
// A floor, not a proxy: it carries the bench's echo traffic right and promises nothing else.
// It does not map what a real multiplexer also must (the requestId of notifications/cancelled,
// progress tokens: the bench sends neither), and the splicing mode takes the first `"id":` of a
// line for its id and any line holding `"method"` for a request, whatever their depth (the
// SDK writes a response's id after its result, a request's after its params: a nested "id" or
// "method" key there would be misread). --parse keeps no number a double cannot hold, and
// neither mode waits for a slow reader.
//
// bench/throughput-floor.mjs runs both beside the no-op relay (bench/relay.mjs) and `mcpmux
// stdio` to show how much of the throughput lost to a middle process is the rewriting every
// multiplexer needs, how much is parsing each message, and how much is mcpmux's routing and
// bookkeeping (issue 23).
//
//   node bench/rewrite-relay.mjs [--parse] node bench/echo-server.mjs

import { spawnRelayed } from './lib/relay-child.mjs';

const parse = process.argv[2] === '--parse';
const child = spawnRelayed(process.argv.slice(parse ? 3 : 2), 'usage: node bench/rewrite-relay.mjs [--parse] COMMAND [ARGS...]');

/** The relay's id -> the host's id (as its JSON text). */
const hostIds = new Map();
let nextId = 1;
const ID = /"id":(-?\d+|"(?:[^"\\]|\\.)*")/;
const isRequest = (line) => line.includes('"method"');

/** `line` with the id literal `match` replaced by `id`. */
const withId = (line, match, id) => line.slice(0, match.index) + '"id":' + id + line.slice(match.index + match[0].length);

/** A host's line: its request gets our id; notifications and answers to the upstream pass as they are. */
function up(line) {
  const m = ID.exec(line);
  if (!m || !isRequest(line)) return line;
  const id = nextId++;
  hostIds.set(id, m[1]);
  return withId(line, m, id);
}

/** An upstream's line: an answer to one of our ids gets the host's id back; the rest pass. */
function down(line) {
  const m = ID.exec(line);
  if (!m || isRequest(line)) return line;
  const id = Number(m[1]);
  const host = hostIds.get(id);
  if (host === undefined) return line;
  hostIds.delete(id);
  return withId(line, m, host);
}

/** Splits `from` into lines, maps each, and writes what one chunk gave in one write, as mcpmux does. */
function lines(from, to, map) {
  let rest = '';
  from.setEncoding('utf8');
  from.on('data', (chunk) => {
    const text = rest + chunk;
    let out = '';
    let start = 0;
    for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', start)) {
      out += map(text.slice(start, nl)) + '\n';
      start = nl + 1;
    }
    rest = text.slice(start);
    if (out) to.write(out);
  });
}

/** A line as JSON, or undefined (a blank or broken line passes as it is, as the splicing relay passes it). */
function read(line) {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/** --parse: a host's line read; its request gets our id (the host's kept as its value). */
function upParsed(line) {
  const m = read(line);
  if (m === undefined || m === null) return line;
  if (m.method === undefined || m.id === undefined) return line;
  const id = nextId++;
  hostIds.set(id, m.id);
  m.id = id;
  return JSON.stringify(m);
}

/** --parse: an upstream's line read; an answer to one of our ids gets the host's id back. */
function downParsed(line) {
  const m = read(line);
  if (m === undefined || m === null || m.method !== undefined) return line;
  const host = hostIds.get(m.id);
  if (host === undefined) return line;
  hostIds.delete(m.id);
  m.id = host;
  return JSON.stringify(m);
}

lines(process.stdin, child.stdin, parse ? upParsed : up);
lines(child.stdout, process.stdout, parse ? downParsed : down);
process.stdin.on('end', () => child.stdin.end());
