#!/usr/bin/env node
// The id-rewriting relay: the least a process in the middle must do to carry several hosts'
// requests on one upstream connection, and nothing more. It spawns the given command and copies
// lines both ways; a host's request gets an id of the relay's own on the way up (the host's is
// kept in a Map) and the upstream's answer gets the host's id back on the way down. No JSON is
// parsed: the first `"id":` of a line is found with a regular expression and spliced. It reads
// the bench's echo traffic right (no nested "id" keys), and nothing else is promised.
//
// With --parse it reads each line instead: JSON.parse, the id swapped on the object, and
// JSON.stringify: the least a proxy that parses messages (to route or rename anything) does.
//
// bench/throughput-floor.mjs runs both beside the no-op relay (bench/relay.mjs) and `mcpmux
// stdio` to show how much of the throughput lost to a middle process is the rewriting every
// multiplexer needs, how much is reading each message, and how much is mcpmux's routing and
// bookkeeping (issue 23).
//
//   node bench/rewrite-relay.mjs [--parse] node bench/echo-server.mjs

import { spawn } from 'node:child_process';

const parse = process.argv[2] === '--parse';
const [cmd, ...args] = process.argv.slice(parse ? 3 : 2);
if (!cmd) {
  process.stderr.write('usage: node bench/rewrite-relay.mjs [--parse] COMMAND [ARGS...]\n');
  process.exit(2);
}
const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });

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
child.stdin.on('error', () => {});
process.stdout.on('error', () => {});
child.on('exit', (code, signal) => process.exit(signal ? 1 : (code ?? 0)));
const stop = () => child.kill('SIGTERM');
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
