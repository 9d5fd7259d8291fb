// What a stdio upstream sees of mcpmux's environment: only what a login shell needs and its
// own `env`, unless `inheritEnv` says more. The real binary, a real child reporting its env.

import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { childEnv, withOwnNode } from '../src/upstream/child-env.js';
import { closeAll, ROOT, startRawMux, writeConfig } from './helpers/harness.js';

afterEach(closeAll);

const BAD = path.join(ROOT, 'test/fixtures/bad-upstream.mjs');
const reporter = (extra: object = {}) => ({ command: process.execPath, args: [BAD, '{}'], ...extra });

describe('a stdio upstream\'s environment', () => {
  it('holds only the base set and its own env by default; inheritEnv true or a list passes more', async () => {
    const config = await writeConfig({
      mcpServers: {
        plain: reporter({ env: { OWN_SETTING: 'mine' } }),
        all: reporter({ inheritEnv: true }),
        some: reporter({ inheritEnv: ['MCPMUX_TEST_*'] }),
      },
      listen: { auth: { tokens: [{ client: 'ci', tokenEnv: 'MCPMUX_TEST_HOST_TOKEN' }] } },
    });
    const peer = startRawMux(config, { env: { MCPMUX_TEST_SECRET: 'other-servers-secret', MCPMUX_TEST_HOST_TOKEN: 'a-host-token', NOTIFY_SOCKET: '/run/systemd/notify', LC_ALL: 'C.UTF-8' } });
    await peer.initialize();
    const envOf = async (server: string): Promise<Record<string, string>> =>
      JSON.parse((await peer.request('tools/call', { name: `${server}__misbehave`, arguments: { mode: 'env' } })).result.content[0].text);

    const plain = await envOf('plain');
    expect(plain.MCPMUX_TEST_SECRET).toBeUndefined();
    expect(plain.MCPMUX_TEST_HOST_TOKEN).toBeUndefined();
    expect(plain.NOTIFY_SOCKET).toBeUndefined();
    expect(plain.OWN_SETTING).toBe('mine');
    expect(plain.PATH).toBe(process.env.PATH);
    expect(plain.HOME).toBe(process.env.HOME);
    expect(plain.LC_ALL).toBe('C.UTF-8');
    // Nothing but the base set, its own env, mcpmux's marker of the configs above it
    // (self-reference.ts), and what node itself adds.
    const allowed = /^(PATH|HOME|USER|LOGNAME|SHELL|TERM|LANG|LANGUAGE|TZ|TMPDIR|LC_.*|OWN_SETTING)$/;
    expect(plain.MCPMUX_PARENT_CONFIGS).toMatch(/\.json$/);
    delete plain.MCPMUX_PARENT_CONFIGS;
    expect(Object.keys(plain).filter((k) => !allowed.test(k))).toEqual([]);

    const all = await envOf('all');
    expect(all.MCPMUX_TEST_SECRET).toBe('other-servers-secret');
    expect(all.NOTIFY_SOCKET).toBeUndefined();

    const some = await envOf('some');
    expect(some.MCPMUX_TEST_SECRET).toBe('other-servers-secret');
    expect(some.MCPMUX_TEST_HOST_TOKEN).toBe('a-host-token');
    expect(some.PATH).toBe(process.env.PATH);
  });
});

describe('childEnv', () => {
  it('on Windows matches names without regard to case, and keeps what Windows programs need', () => {
    const env = childEnv({ Path: 'C:\\Windows', SystemRoot: 'C:\\Windows', APPDATA: 'x', Secret_Token: 't', aws_region: 'eu' }, {}, ['AWS_*'], 'win32');
    expect(env).toEqual({ Path: 'C:\\Windows', SystemRoot: 'C:\\Windows', APPDATA: 'x', aws_region: 'eu' });
  });

  it('lets the server\'s own env win over what it inherits', () => {
    expect(childEnv({ PATH: '/bin', HOME: '/h' }, { PATH: '/opt/bin' }, false, 'linux')).toEqual({ PATH: '/opt/bin', HOME: '/h' });
  });
});

describe("the Node that runs mcpmux is findable by its upstreams (a desktop's bare PATH)", () => {
  it('a "command": "node" server starts though mcpmux runs with a PATH that has no node on it', async () => {
    const config = await writeConfig({ mcpServers: { bare: { command: 'node', args: [BAD, '{}'] } } });
    // What a desktop host gives mcpmux when node lives outside its PATH (nvm, Homebrew, a tarball).
    const peer = startRawMux(config, { env: { PATH: '/nonexistent-bin' } });
    await peer.initialize();
    const env = JSON.parse((await peer.request('tools/call', { name: 'bare__misbehave', arguments: { mode: 'env' } })).result.content[0].text) as Record<string, string>;
    expect(env.PATH).toBe(`/nonexistent-bin:${path.dirname(process.execPath)}`);
  });

  it('appends, never prepends, and leaves a PATH the server sets itself alone', () => {
    expect(withOwnNode({ PATH: '/usr/bin:/bin' }, {}, '/opt/node/bin', 'linux')).toEqual({ PATH: '/usr/bin:/bin:/opt/node/bin' });
    expect(withOwnNode({ PATH: '/opt/node/bin:/bin' }, {}, '/opt/node/bin', 'linux')).toEqual({ PATH: '/opt/node/bin:/bin' });
    expect(withOwnNode({ PATH: '/mine' }, { PATH: '/mine' }, '/opt/node/bin', 'linux')).toEqual({ PATH: '/mine' });
    expect(withOwnNode({}, {}, '/opt/node/bin', 'linux')).toEqual({ PATH: '/opt/node/bin' });
    expect(withOwnNode({ Path: 'C:\\Windows' }, {}, 'C:\\Node', 'win32')).toEqual({ Path: 'C:\\Windows;C:\\Node' });
    expect(withOwnNode({ Path: 'C:\\node;C:\\Windows' }, {}, 'C:\\Node', 'win32')).toEqual({ Path: 'C:\\node;C:\\Windows' });
  });
});
