// The pretty log line (observe/log-format.ts) on its own: what the e2e tests in
// first-hour-logs.e2e.test.ts cannot easily provoke from the real binary.

import { describe, expect, it } from 'vitest';
import { chooseLogFormat, logOutput, prettyLine } from '../src/observe/log-format.js';

const at = '2026-11-25T18:59:01.000Z';
const line = (o: object) => JSON.stringify({ level: 30, time: at, pid: 1, ...o }) + '\n';
const clock = (() => {
  const d = new Date(at);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
})();

describe('pretty log lines', () => {
  it('time, level, message, then the other fields; what the message already says is not repeated', () => {
    expect(prettyLine(line({ url: 'http://127.0.0.1:7330/mcp', servers: 2, tools: 14, msg: 'ready: http://127.0.0.1:7330/mcp (2 servers, 14 tools)' }), false)).toBe(
      `${clock} INFO  ready: http://127.0.0.1:7330/mcp (2 servers, 14 tools)\n`,
    );
    expect(prettyLine(line({ level: 40, server: 'fs', err: 'exited with code 3', restarts: 2, msg: 'upstream failed' }), false)).toBe(
      `${clock} WARN  [fs] upstream failed err="exited with code 3" restarts=2\n`,
    );
  });

  it("an upstream's stderr: its name and its words, no level", () => {
    expect(prettyLine(line({ server: 'fs', stderr: 'Failed to request initial roots from client', msg: "the server's own stderr, relayed (its words, not an mcpmux error)" }), false)).toBe(
      `${clock} [fs] Failed to request initial roots from client\n`,
    );
  });

  it("control characters an upstream prints cannot drive the person's terminal", () => {
    const out = prettyLine(line({ server: 'x', stderr: 'a\x1b[2Jb\rc\x07', msg: 'm' }), true);
    expect(out).toContain('a\\u001b[2Jb\\u000dc\\u0007');
    expect(out.replace(/\x1b\[[0-9;]*m/g, '')).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f]/);
  });

  it('colors only when asked; a line that is not a JSON object passes as it is', () => {
    expect(prettyLine(line({ level: 50, msg: 'boom' }), true)).toContain('\x1b[31mERROR\x1b[0m');
    expect(prettyLine(line({ level: 50, msg: 'boom' }), false)).not.toContain('\x1b[');
    expect(prettyLine('not json\n', false)).toBe('not json\n');
    expect(prettyLine('[1,2]\n', false)).toBe('[1,2]\n');
  });

  it('the format: the flag wins; else pretty on a terminal only; colors on a terminal without NO_COLOR', () => {
    expect(chooseLogFormat(undefined, { isTTY: true })).toBe('pretty');
    expect(chooseLogFormat(undefined, {})).toBe('json');
    expect(chooseLogFormat('json', { isTTY: true })).toBe('json');
    expect(chooseLogFormat('pretty', {})).toBe('pretty');
    expect(logOutput(undefined, { isTTY: true }, {})).toEqual({ format: 'pretty', color: true });
    expect(logOutput(undefined, { isTTY: true }, { NO_COLOR: '1' })).toEqual({ format: 'pretty', color: false });
    expect(logOutput('pretty', {}, {})).toEqual({ format: 'pretty', color: false });
    expect(logOutput(undefined, { isTTY: true }, { NO_COLOR: '' })).toEqual({ format: 'pretty', color: true });
  });
});
