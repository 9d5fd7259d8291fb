// The plain `mcpmux stdio` command line, read without commander (cli/plain-stdio.ts): what it
// reads must be what commander would give; everything else is left to commander.

import { describe, expect, it } from 'vitest';
import { plainStdio } from '../src/cli/plain-stdio.js';

describe('plainStdio', () => {
  it("reads how hosts run mcpmux into commander's option names", () => {
    expect(plainStdio(['stdio', '--config', '/c.json'])).toEqual({ config: '/c.json' });
    expect(plainStdio(['stdio', '-c', '/c.json', '--log-level', 'debug', '--log-format=json', '--admin-port', '0', '--toolset', 'web'])).toEqual({
      config: '/c.json',
      logLevel: 'debug',
      logFormat: 'json',
      adminPort: '0',
      toolset: 'web',
    });
    expect(plainStdio(['stdio'])).toEqual({});
  });

  it('leaves to commander help, other commands, unknown, repeated and malformed options, and values it would refuse', () => {
    for (const args of [
      [],
      ['serve', '--config', 'c'],
      ['stdio', '--help'],
      ['stdio', '-h'],
      ['stdio', '--config'],
      ['stdio', '--config', '--log-level', 'info'],
      ['stdio', '--config', 'a', '--config', 'b'],
      ['stdio', '-c', 'a', '--config=b'],
      ['stdio', '--log-level', 'loud'],
      ['stdio', '--log-format', 'xml'],
      ['stdio', '--probe'],
      ['stdio', 'extra'],
      ['stdio', '-cfile'],
      ['stdio', '--config='],
      ['stdio', '--', '--config', 'c'],
      ['stdio', '--constructor', 'x'],
    ]) {
      expect(plainStdio(args), args.join(' ')).toBeUndefined();
    }
  });
});
