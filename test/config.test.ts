import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expandEnv, jsonPointer } from '../src/config/expand.js';
import { loadConfig, parseConfig } from '../src/config/load.js';
import { nearest, unknownToolset } from '../src/config/suggest.js';
import { secretVariable } from '../src/config/secrecy.js';
import { ConfigError, interactiveLogin, isPerClient, type ConfigIssue, type RemoteServerConfig, type StdioServerConfig } from '../src/config/types.js';

let dir: string;
let n = 0;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'mcpmux-config-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes `content` (JSON value or raw text) to a fresh file in the temp folder. */
async function write(content: unknown): Promise<string> {
  const file = path.join(dir, `config-${++n}.json`);
  await writeFile(file, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return file;
}

async function load(content: unknown, env: NodeJS.ProcessEnv = {}) {
  return loadConfig(await write(content), env);
}

/** Loads and expects a ConfigError; returns its issues. */
async function issuesOf(content: unknown, env: NodeJS.ProcessEnv = {}): Promise<ConfigIssue[]> {
  const file = await write(content);
  const err = await loadConfig(file, env).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  expect((err as ConfigError).file).toBe(file);
  return (err as ConfigError).issues;
}

// The DESIGN section 3 example, as strict JSON.
const designExample = {
  mcpServers: {
    fs: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '/srv'], env: {}, cwd: '/srv' },
    remote: { url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer ${REMOTE_TOKEN}' } },
    legacy: { url: 'http://127.0.0.1:9000/sse', type: 'sse' },
    sock: { url: 'ws://127.0.0.1:9001/mcp' },
  },
  namespace: { separator: '__', maxNameLength: 64 },
  listen: {
    host: '127.0.0.1',
    port: 7330,
    allowedOrigins: [],
    auth: { tokens: [{ client: 'ci', tokenEnv: 'MCPMUX_CI_TOKEN' }] },
  },
  policy: { tools: { allow: ['*'], deny: ['fs__write_*'] }, clients: { ci: { deny: ['*__delete_*'] } } },
  rateLimits: [{ client: '*', server: 'remote', tool: '*', perMinute: 60, burst: 10 }],
  audit: { path: '/var/log/mcpmux/audit.jsonl', arguments: 'redacted' },
  timeouts: { requestMs: 60000, maxMs: 600000 },
};
const exampleEnv = { REMOTE_TOKEN: 'remote-secret', MCPMUX_CI_TOKEN: 'ci-secret' };

describe('loadConfig: the DESIGN example', () => {
  it('loads with inferred transports and every default filled', async () => {
    const file = await write(designExample);
    const c = await loadConfig(file, exampleEnv);

    expect(c.path).toBe(path.resolve(file));
    expect(c.servers.map((s) => [s.name, s.transport])).toEqual([
      ['fs', 'stdio'],
      ['remote', 'http'],
      ['legacy', 'sse'],
      ['sock', 'ws'],
    ]);
    const fs = c.servers[0] as StdioServerConfig;
    expect(fs).toEqual({
      name: 'fs',
      prefix: 'fs',
      disabled: false,
      sharing: 'shared',
      logs: 'related',
      timeoutMs: 60000,
      tools: { allow: ['*'], deny: [] },
      prompts: { allow: ['*'], deny: [] },
      resources: { allow: ['*'], deny: [], namespace: 'prefix' },
      roots: undefined,
      restart: { maxRetries: 5, backoffMs: 500 },
      transport: 'stdio',
      command: 'npx',
      args: ['-y', '@modelcontextprotocol/server-filesystem', '/srv'],
      env: {},
      inheritEnv: false,
      pinTools: false,
      era: 'auto',
      cwd: '/srv',
    });
    const remote = c.servers[1] as RemoteServerConfig;
    expect(remote.url).toBe('https://mcp.example.com/mcp');
    expect(remote.headers).toEqual({ Authorization: 'Bearer remote-secret' });
    expect((c.servers[3] as RemoteServerConfig).headers).toEqual({});

    expect(c.namespace).toEqual({ separator: '__', maxNameLength: 64 });
    expect(c.listen).toEqual({
      host: '127.0.0.1',
      port: 7330,
      allowedOrigins: [],
      auth: { tokens: [{ client: 'ci', tokenEnv: 'MCPMUX_CI_TOKEN', token: 'ci-secret', admin: false }] },
      adminHost: '127.0.0.1',
    });
    const all = { allow: ['*'], deny: [] };
    expect(c.policy).toEqual({
      tools: { allow: ['*'], deny: ['fs__write_*'] },
      prompts: all,
      resources: all,
      clients: { ci: { tools: { allow: ['*'], deny: ['*__delete_*'] }, prompts: all, resources: all } },
    });
    expect(c.rateLimits).toEqual([{ client: '*', server: 'remote', tool: '*', perMinute: 60, burst: 10, per: ['client', 'server', 'tool'] }]);
    expect(c.audit).toEqual({ path: '/var/log/mcpmux/audit.jsonl', arguments: 'redacted', redact: [] });
    expect(c.metrics).toEqual({ toolLabel: false, toolLabelLimit: 200 });
    expect(c.timeouts).toEqual({ requestMs: 60000, maxMs: 600000, startupMs: 10000, startupWaitMs: 3000 });
    expect(c.limits).toEqual({ maxMessageBytes: 16 * 1024 * 1024, maxInFlightPerSession: 4096, maxSessions: 1024, maxSessionsPerClient: 256, maxSessionUpstreams: 128, maxRateLimitKeys: 100_000 });
    expect(c.logLevel).toBeUndefined();
  });

  it('fills defaults for a minimal file', async () => {
    const c = await load({ mcpServers: {} });
    expect(c.servers).toEqual([]);
    expect(c.namespace).toEqual({ separator: '__', maxNameLength: 64 });
    expect(c.listen).toEqual({ host: '127.0.0.1', port: 7330, allowedOrigins: [], auth: { tokens: [] }, adminHost: '127.0.0.1' });
    const all = { allow: ['*'], deny: [] };
    expect(c.policy).toEqual({ tools: all, prompts: all, resources: all, clients: {} });
    expect(c.rateLimits).toEqual([]);
    expect(c.audit).toEqual({ path: undefined, arguments: 'none', redact: [] });
    expect(c.secrets).toEqual([]);
  });

  it('keeps disabled servers in file order and applies per-server options', async () => {
    const c = await load({
      $schema: './schema/config.schema.json',
      mcpServers: {
        b: { command: 'b', disabled: true, sharing: 'session', logs: 'broadcast', timeoutMs: 5000 },
        a: {
          url: 'https://a.example/mcp',
          prefix: '',
          tools: { deny: ['rm'] },
          resources: { namespace: 'passthrough' },
          roots: [{ uri: 'file:///srv', name: 'srv' }],
          restart: { maxRetries: 0 },
        },
      },
      timeouts: { requestMs: 1000 },
      logLevel: 'debug',
    });
    expect(c.servers.map((s) => s.name)).toEqual(['b', 'a']);
    expect(c.servers[0]).toMatchObject({ disabled: true, sharing: 'session', logs: 'broadcast', timeoutMs: 5000 });
    expect(c.servers[1]).toMatchObject({
      prefix: '',
      timeoutMs: 1000,
      tools: { allow: ['*'], deny: ['rm'] },
      resources: { namespace: 'passthrough' },
      roots: [{ uri: 'file:///srv', name: 'srv' }],
      restart: { maxRetries: 0, backoffMs: 500 },
    });
    expect(c.logLevel).toBe('debug');
  });
});

describe('loadConfig: schema errors', () => {
  it('refuses an unknown key at top level and inside a server, naming it', async () => {
    const issues = await issuesOf({ mcpServers: { fs: { comand: 'npx' } }, listn: {} });
    expect(issues).toContainEqual({ path: '/listn', message: 'unknown key "listn" (did you mean "listen"?)' });
    expect(issues).toContainEqual({ path: '/mcpServers/fs/comand', message: 'unknown key "comand" (did you mean "command"?)' });
  });

  it('suggests the nearest allowed key at every level, and nothing for a key near none', async () => {
    const issues = await issuesOf({
      mcpServers: { fs: { command: 'x', agrs: [], Env: {}, restart: { maxRetires: 1 }, oauth: {}, colour: 'red' } },
      ratelimits: [],
      listen: { prot: 7330, auth: { tokens: [{ client: 'ci', tokenenv: 'T' }] } },
      policy: { tool: { allow: ['*'] }, clients: { anonymous: { alow: ['*'] } } },
      limits: { maxSesions: 3 },
      timeouts: { requestMS: 1000 },
      zzz: 1,
    });
    const unknown = issues.filter((i) => i.message.startsWith('unknown key'));
    expect(unknown).toEqual(
      expect.arrayContaining([
        { path: '/ratelimits', message: 'unknown key "ratelimits" (did you mean "rateLimits"?)' },
        { path: '/zzz', message: 'unknown key "zzz"' },
        { path: '/mcpServers/fs/agrs', message: 'unknown key "agrs" (did you mean "args"?)' },
        { path: '/mcpServers/fs/Env', message: 'unknown key "Env" (did you mean "env"?)' },
        { path: '/mcpServers/fs/colour', message: 'unknown key "colour"' },
        { path: '/mcpServers/fs/restart/maxRetires', message: 'unknown key "maxRetires" (did you mean "maxRetries"?)' },
        { path: '/listen/prot', message: 'unknown key "prot" (did you mean "port"?)' },
        { path: '/listen/auth/tokens/0/tokenenv', message: 'unknown key "tokenenv" (did you mean "tokenEnv"?)' },
        { path: '/policy/tool', message: 'unknown key "tool" (did you mean "tools"?)' },
        { path: '/policy/clients/anonymous/alow', message: 'unknown key "alow" (did you mean "allow"?)' },
        { path: '/limits/maxSesions', message: 'unknown key "maxSesions" (did you mean "maxSessions"?)' },
        { path: '/timeouts/requestMS', message: 'unknown key "requestMS" (did you mean "requestMs"?)' },
      ]),
    );
    expect(unknown).toHaveLength(12);
  });

  it('nearest(): case-insensitive edit distance, close enough or nothing', () => {
    const keys = ['command', 'args', 'env', 'url', 'timeoutMs', 'rateLimits', 'tools', 'transport'];
    expect(nearest('comand', keys)).toBe('command');
    expect(nearest('commnad', keys)).toBe('command'); // two letters swapped: one edit
    expect(nearest('RATELIMITS', keys)).toBe('rateLimits');
    expect(nearest('timeout', keys)).toBe('timeoutMs');
    expect(nearest('ur', keys)).toBe('url');
    // Too far, or too short to tell: no guess.
    expect(nearest('x', keys)).toBeUndefined();
    expect(nearest('cmd', keys)).toBeUndefined();
    expect(nearest('environment', keys)).toBeUndefined();
    expect(nearest('description', keys)).toBeUndefined();
    expect(nearest('anything', [])).toBeUndefined();
  });

  it('refuses wrong types with the path, expected and actual type', async () => {
    const issues = await issuesOf({ mcpServers: { fs: { command: 'x', args: 'x' } }, listen: { port: '80' } });
    expect(issues).toEqual([
      { path: '/mcpServers/fs/args', message: 'expected array, got string' },
      { path: '/listen/port', message: 'expected integer, got string' },
    ]);
  });

  it('refuses a missing mcpServers, bad enums, out-of-range numbers and a bad separator', async () => {
    const issues = await issuesOf({
      namespace: { separator: '::', maxNameLength: 8 },
      listen: { port: 70000 },
      audit: { path: 'a.jsonl', arguments: 'some' },
      logLevel: 'verbose',
    });
    expect(issues).toContainEqual({ path: '/mcpServers', message: 'missing required key "mcpServers"' });
    expect(await issuesOf({ mcpServers: { fs: { command: 'x', logs: 'everyone' } } })).toEqual([
      { path: '/mcpServers/fs/logs', message: 'must be one of "related", "broadcast", got "everyone"' },
    ]);
    expect(issues).toContainEqual({ path: '/namespace/separator', message: 'must match ^[A-Za-z0-9_.-]{1,4}$, got "::"' });
    expect(issues).toContainEqual({ path: '/namespace/maxNameLength', message: 'must be >= 16, got 8' });
    expect(issues).toContainEqual({ path: '/listen/port', message: 'must be <= 65535, got 70000' });
    expect(issues).toContainEqual({
      path: '/audit/arguments',
      message: 'must be one of "none", "redacted", "full", got "some"',
    });
    expect(issues.find((i) => i.path === '/logLevel')?.message).toMatch(/^must be one of "fatal", .*"silent", got "verbose"$/);
  });

  it('refuses an invalid server name once', async () => {
    const issues = await issuesOf({ mcpServers: { 'my server': { command: 'x' } } });
    expect(issues).toEqual([
      { path: '/mcpServers/my server', message: 'invalid server name "my server": use only letters, digits, "_", "." and "-"' },
    ]);
  });

  it('does not echo secret values that came from the environment, and quotes ordinary ones', async () => {
    for (const [config, env] of [
      [{ mcpServers: {}, logLevel: '${LEVEL}', secrets: ['LEVEL'] }, { LEVEL: 'hunter2' }],
      [{ mcpServers: {}, logLevel: '${LEVEL_TOKEN}' }, { LEVEL_TOKEN: 'hunter2' }],
    ] as const) {
      const issues = await issuesOf(config, env);
      expect(issues).toHaveLength(1);
      expect(issues[0]!.message).not.toContain('hunter2');
      expect(issues[0]!.message).toContain('got a value from the environment');
    }
    const issues = await issuesOf({ mcpServers: {}, logLevel: '${LEVEL}' }, { LEVEL: 'loud' });
    expect(issues[0]!.message).toContain('got "loud"');
  });
});

describe('loadConfig: environment expansion', () => {
  it('disables a server whose own entry needs a missing ${VAR}, naming the variables', async () => {
    const c = await load(designExample, { MCPMUX_CI_TOKEN: 'ci-secret' });
    const remote = c.servers.find((s) => s.name === 'remote')!;
    expect(remote.disabled).toBe(true);
    expect(remote.unavailable).toEqual({ missing: ['REMOTE_TOKEN'], reason: 'environment variable REMOTE_TOKEN is not set' });
    expect(c.servers.filter((s) => s.unavailable).map((s) => s.name)).toEqual(['remote']);
    expect(c.servers.find((s) => s.name === 'fs')).toMatchObject({ disabled: false });
    expect(c.servers.find((s) => s.name === 'fs')!.unavailable).toBeUndefined();
  });

  it('names every missing variable of a server once, in file order', async () => {
    const c = await load({
      mcpServers: {
        s: { command: '${CMD}', args: ['${A}', '${B}', '${A}'], env: { X: '${C}' }, cwd: '${D}', prefix: '${P}' },
        r: { url: 'https://${HOST}/mcp', headers: { 'X-Key': '${K}' }, type: '${T}' },
        off: { command: '${GONE}', disabled: true },
      },
    });
    const [s, r, off] = c.servers;
    expect(s!.unavailable).toEqual({ missing: ['CMD', 'A', 'B', 'C', 'D', 'P'], reason: 'environment variables CMD, A, B, C, D and P are not set' });
    expect(r!.unavailable?.missing).toEqual(['HOST', 'K', 'T']);
    // Disabled in the file: nothing to say about what it would need.
    expect(off).toMatchObject({ disabled: true });
    expect(off!.unavailable).toBeUndefined();
  });

  it('still refuses a missing ${VAR} outside mcpServers, and a server entry that is broken besides', async () => {
    expect(await issuesOf({ mcpServers: { ok: { command: 'x' }, s: { command: '${CMD}' } }, audit: { path: '${AUDIT_DIR}/a.jsonl' } })).toEqual([
      { path: '/audit/path', message: 'environment variable AUDIT_DIR is not set' },
    ]);
    expect(await issuesOf({ mcpServers: {}, listen: { host: '${HOST}' } })).toEqual([
      { path: '/listen/host', message: 'environment variable HOST is not set' },
    ]);
    expect(await issuesOf({ mcpServers: { s: { command: '${CMD}', comand: 'x' } } })).toEqual([
      { path: '/mcpServers/s/command', message: 'environment variable CMD is not set' },
      { path: '/mcpServers/s/comand', message: expect.stringContaining('unknown key "comand"') },
    ]);
  });

  it('uses ${VAR:-default} when unset or empty, and $${ as a literal ${', async () => {
    const c = await load(
      {
        mcpServers: {
          a: { command: '${CMD:-node}', args: ['${EMPTY:-fallback}', '$${NOT_EXPANDED}', 'x-${SET:-no}'] },
          b: { url: 'http://${HOST:-localhost}:${PORT:-8080}/mcp' },
        },
      },
      { EMPTY: '', SET: 'yes' },
    );
    const a = c.servers[0] as StdioServerConfig;
    expect(a.command).toBe('node');
    expect(a.args).toEqual(['fallback', '${NOT_EXPANDED}', 'x-yes']);
    expect((c.servers[1] as RemoteServerConfig).url).toBe('http://localhost:8080/mcp');
    expect(c.secrets).toEqual([]); // defaults are in the file; SET names no secret
  });

  it('reports a missing variable once, not again as an empty value', async () => {
    const c = await load({ mcpServers: { r: { url: '${URL}' } } });
    expect(c.servers[0]!.unavailable).toEqual({ missing: ['URL'], reason: 'environment variable URL is not set' });
    const issues = await issuesOf({ mcpServers: {}, logLevel: '${LEVEL}' });
    expect(issues).toEqual([{ path: '/logLevel', message: 'environment variable LEVEL is not set' }]);
  });

  it('expandEnv: keys are not expanded, malformed references are issues', () => {
    const r = expandEnv({ '${K}': ['${A}', 'a${', '${1X}'] }, { K: 'k', A: 'a' });
    expect(r.value).toEqual({ '${K}': ['a', 'a${', '${1X}'] });
    expect(r.issues.map((i) => i.path)).toEqual(['/${K}/1', '/${K}/2']);
    expect(r.issues[0]!.message).toMatch(/^malformed \$\{\.\.\.\} reference/);
    expect(r.used).toEqual([{ path: '/${K}/0', name: 'A', value: 'a' }]);
  });
});

describe('loadConfig: several errors at once', () => {
  it('reports schema, expansion and semantic issues together', async () => {
    const file = await write({
      mcpServers: {
        a: { command: 'x', prefix: 'p', extra: true },
        b: { command: 'y', prefix: 'p' },
        // (a missing variable in a server's entry disables it; elsewhere it is an issue)
        c: { url: 'https://c.example/mcp', headers: { 'X-Key': '${KEY}' } },
      },
      logLevel: '${LEVEL}',
      listen: { port: -1 },
      timeouts: { requestMs: 5000, maxMs: 1000 },
    });
    const err = (await loadConfig(file, {}).catch((e: unknown) => e)) as ConfigError;
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.issues.map((i) => i.path).sort()).toEqual(
      [
        '/mcpServers/a/extra',
        '/logLevel',
        '/listen/port',
        '/timeouts/maxMs',
        // a has a schema error, so its semantic checks wait; b alone owns prefix "p" so far
      ].sort(),
    );
    // The Error's message lists every issue, with file and path.
    expect(err.message).toContain(`invalid config ${file}:`);
    expect(err.message).toContain('  /mcpServers/a/extra: unknown key "extra"');
    expect(err.message).toContain('  /timeouts/maxMs: must be >= timeouts.requestMs (5000), got 1000');
    expect(err.message).toContain('  /listen/port: must be >= 0, got -1');
  });

  it('reports semantic issues of several servers together', async () => {
    const issues = await issuesOf({
      mcpServers: {
        a: { command: 'x', url: 'http://x/mcp' },
        b: {},
        c: { url: 'ftp://c.example/' },
        d: { url: 'not a url' },
      },
    });
    expect(issues).toEqual([
      { path: '/mcpServers/a', message: 'has both "command" and "url"; use one' },
      { path: '/mcpServers/b', message: 'needs "command" (local process) or "url" (remote server)' },
      { path: '/mcpServers/c/url', message: 'unsupported scheme "ftp:"; use http(s):// or ws(s)://' },
      { path: '/mcpServers/d/url', message: 'is not a valid URL' },
    ]);
  });
});

describe('loadConfig: file and JSON errors', () => {
  it('reports a missing file at path /', async () => {
    const file = path.join(dir, 'nope.json');
    const err = (await loadConfig(file, {}).catch((e: unknown) => e)) as ConfigError;
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.file).toBe(file);
    expect(err.issues).toEqual([{ path: '/', message: 'cannot read config file: file not found' }]);
  });

  it('reports line and column of a stray bracket, naming it', async () => {
    const issues = await issuesOf('{\n  "mcpServers": {\n    "a": 1]\n  }\n}\n');
    expect(issues).toEqual([{ path: '/', message: "invalid JSON at line 3, column 11: Unexpected ']' (comma expected)" }]);
  });

  it('reports line and column of a missing comma', async () => {
    const issues = await issuesOf('{\n  "mcpServers": {}\n  "listen": {}\n}');
    expect(issues).toEqual([{ path: '/', message: 'invalid JSON at line 3, column 3: Comma expected' }]);
  });

  it('reports a truncated file just after its last character', async () => {
    const issues = await issuesOf('{\n  "mcpServers": {\n');
    expect(issues).toEqual([{ path: '/', message: 'invalid JSON at line 2, column 18: Unexpected end of file (close brace expected)' }]);
  });

  it('reports text after the value, and an unclosed string where it starts', async () => {
    expect(await issuesOf('{"mcpServers": {}}\n}\n')).toEqual([{ path: '/', message: "invalid JSON at line 2, column 1: Unexpected '}' after the JSON value" }]);
    expect(await issuesOf('{"mcpServers": {"a": {"command": "x}}}\n')).toEqual([{ path: '/', message: 'invalid JSON at line 1, column 34: Unexpected end of string' }]);
  });

  it('refuses a file whose root is not an object', async () => {
    expect(await issuesOf('[]')).toEqual([{ path: '/', message: 'expected object, got array' }]);
    expect(await issuesOf('')).toEqual([{ path: '/', message: 'invalid JSON at line 1, column 1: Empty file' }]);
    expect(await issuesOf(' \n\n')).toEqual([{ path: '/', message: 'invalid JSON at line 1, column 1: Empty file' }]);
  });

  it('reads JSONC: // and /* */ comments and trailing commas, as the README examples are written', async () => {
    const c = await load(`// mcpmux config
{
  "$schema": "./schema/config.schema.json",
  /* the servers */
  "mcpServers": {
    "fs": { "command": "npx", "args": ["-y", "server", "/srv",], }, // trailing commas
    "url-ish": { "command": "x", "args": ["http://a/b", "/* not a comment */", "// nor this"] },
  },
  "timeouts": { "requestMs": 1000, },
}
`);
    expect(c.servers.map((s) => s.name)).toEqual(['fs', 'url-ish']);
    expect((c.servers[0] as StdioServerConfig).args).toEqual(['-y', 'server', '/srv']);
    expect((c.servers[1] as StdioServerConfig).args).toEqual(['http://a/b', '/* not a comment */', '// nor this']);
    expect(c.timeouts.requestMs).toBe(1000);
  });

  it('reads values as JSON.parse does: doubles, the last of duplicate keys, "__proto__" as a plain key', async () => {
    // 2^53 + 1 is a double (9007199254740992), as before: the schema then judges that value.
    const big = await issuesOf('{"mcpServers": {}, "limits": {"maxSessions": 9007199254740993, "maxMessageBytes": 1e400}}');
    expect(big).toEqual(expect.arrayContaining([{ path: '/limits/maxMessageBytes', message: expect.stringMatching(/Infinity|null|integer|number/) }]));
    const c = await load('{"mcpServers": {"a": {"command": "x"}}, "timeouts": {"requestMs": 1, "requestMs": 2000}, "limits": {"maxSessions": 12345678901234567890}}');
    expect(c.timeouts.requestMs).toBe(2000);
    expect(c.limits.maxSessions).toBe(JSON.parse('12345678901234567890'));
    // jsonc-parser's own parse() would make this the object's prototype, and its mcpServers the config's.
    expect(await issuesOf('{"__proto__": {"mcpServers": {"a": {"command": "x"}}}}')).toEqual([
      { path: '/mcpServers', message: 'missing required key "mcpServers"' },
      { path: '/__proto__', message: 'unknown key "__proto__"' },
    ]);
  });

  it('accepts a UTF-8 byte order mark', async () => {
    const c = await load('\uFEFF{"mcpServers": {"a": {"command": "x"}}}');
    expect(c.servers.map((s) => s.name)).toEqual(['a']);
  });
});

describe('loadConfig: semantic checks', () => {
  it('refuses a prefix shared by two enabled servers, at both paths', async () => {
    const issues = await issuesOf({
      mcpServers: {
        one: { command: 'x', prefix: 'tools' },
        tools: { command: 'y' },
        off: { command: 'z', prefix: 'tools', disabled: true },
        none1: { command: 'z', prefix: '' },
        none2: { command: 'z', prefix: '' },
      },
    });
    expect(issues).toEqual([
      {
        path: '/mcpServers/one/prefix',
        message: 'prefix "tools" is also used by /mcpServers/tools; give one of them another "prefix"',
      },
      {
        path: '/mcpServers/tools',
        message: 'prefix "tools" is also used by /mcpServers/one/prefix; give one of them another "prefix"',
      },
    ]);
  });

  it('refuses a prefix that contains the separator', async () => {
    const issues = await issuesOf({
      mcpServers: { 'my__fs': { command: 'x' }, b: { command: 'y', prefix: 'b.x' } },
      namespace: { separator: '.' },
    });
    expect(issues).toEqual([
      { path: '/mcpServers/b/prefix', message: 'prefix "b.x" contains the separator "."' },
    ]);
    const issues2 = await issuesOf({ mcpServers: { 'my__fs': { command: 'x' } } });
    expect(issues2).toEqual([
      { path: '/mcpServers/my__fs', message: 'prefix "my__fs" contains the separator "__"; set "prefix" to a name without it' },
    ]);
  });

  it('infers transports, accepts the desktop aliases, and refuses mismatches', async () => {
    const c = await load({
      mcpServers: {
        a: { url: 'https://x.example/sse' },
        b: { url: 'https://x.example/sse', type: 'http' },
        c: { url: 'https://x.example/mcp', type: 'streamable-http' },
        d: { url: 'https://x.example/mcp', transport: 'streamableHttp' },
        e: { url: 'wss://x.example/ws', type: 'ws' },
        f: { command: 'x', type: 'stdio' },
      },
    });
    expect(c.servers.map((s) => s.transport)).toEqual(['sse', 'http', 'http', 'http', 'ws', 'stdio']);

    const issues = await issuesOf({
      mcpServers: {
        a: { url: 'https://x.example/mcp', type: 'stdio' },
        b: { url: 'http://x.example/mcp', type: 'ws' },
        c: { url: 'ws://x.example/mcp', transport: 'sse' },
        d: { command: 'x', type: 'http' },
        e: { url: 'https://x.example/mcp', type: 'http', transport: 'sse' },
      },
    });
    expect(issues).toEqual([
      { path: '/mcpServers/a/type', message: 'is "stdio" but the url is an http(s):// URL' },
      { path: '/mcpServers/b/type', message: 'is "ws" but the url is an http(s):// URL' },
      { path: '/mcpServers/c/transport', message: 'is "sse" but the url is a WebSocket (ws:// or wss://) URL' },
      { path: '/mcpServers/d/type', message: 'is "http" but the server has a "command" (stdio)' },
      { path: '/mcpServers/e/transport', message: 'is "sse" but "type" is "http"' },
    ]);
  });

  it('refuses keys of the other kind of server', async () => {
    const issues = await issuesOf({
      mcpServers: { a: { command: 'x', headers: {} }, b: { url: 'http://b/mcp', args: [], cwd: '.' } },
    });
    expect(issues).toEqual([
      { path: '/mcpServers/a/headers', message: '"headers" applies to url servers, not to "command" servers' },
      { path: '/mcpServers/b/args', message: '"args" applies to "command" servers, not to url servers' },
      { path: '/mcpServers/b/cwd', message: '"cwd" applies to "command" servers, not to url servers' },
    ]);
  });

  it('checks inheritEnv: stdio servers only, true/false or a list of variable names', async () => {
    const issues = await issuesOf({
      mcpServers: {
        a: { url: 'http://a/mcp', inheritEnv: true },
        b: { command: 'x', inheritEnv: 'yes' },
        c: { command: 'x', inheritEnv: ['GOOD_*', 'bad name'] },
        d: { command: 'x', inheritEnv: ['AWS_*', 'HTTPS_PROXY'] },
      },
    });
    expect(issues.map((i) => i.path)).toEqual(['/mcpServers/b/inheritEnv', '/mcpServers/c/inheritEnv/1', '/mcpServers/a/inheritEnv']);
    expect(issues.find((i) => i.path === '/mcpServers/a/inheritEnv')!.message).toBe('"inheritEnv" applies to "command" servers, not to url servers');
  });

  it('checks pinTools: a boolean, globally and per server; the server\'s own wins', async () => {
    expect((await issuesOf({ pinTools: 'yes', mcpServers: { a: { command: 'x', pinTools: 1 } } })).map((i) => i.path)).toEqual(['/mcpServers/a/pinTools', '/pinTools']);
    const c = parseConfig(JSON.stringify({ pinTools: true, mcpServers: { a: { command: 'x' }, b: { command: 'y', pinTools: false } } }), '/tmp/x.json', {});
    expect(c.servers.map((s) => s.pinTools)).toEqual([true, false]);
  });

  it('resolves a relative cwd and audit path against the config file folder', async () => {
    const file = await write({
      mcpServers: { a: { command: 'x', cwd: 'work/../srv' }, b: { command: 'y', cwd: '/abs' }, c: { command: 'z' } },
      audit: { path: 'logs/audit.jsonl' },
    });
    const c = await loadConfig(file, {});
    expect((c.servers[0] as StdioServerConfig).cwd).toBe(path.join(dir, 'srv'));
    expect((c.servers[1] as StdioServerConfig).cwd).toBe('/abs');
    expect((c.servers[2] as StdioServerConfig).cwd).toBeUndefined();
    expect(c.audit.path).toBe(path.join(dir, 'logs', 'audit.jsonl'));
  });

  it('needs every tokenEnv to be set, non-empty and unique', async () => {
    const issues = await issuesOf(
      {
        mcpServers: {},
        listen: {
          auth: {
            tokens: [
              { client: 'a', tokenEnv: 'TOKEN_A' },
              { client: 'b', tokenEnv: 'TOKEN_B' },
              { client: 'c', tokenEnv: 'TOKEN_C' },
              { client: 'd', tokenEnv: 'TOKEN_D' },
            ],
          },
        },
      },
      { TOKEN_B: '', TOKEN_C: 'same', TOKEN_D: 'same' },
    );
    expect(issues).toEqual([
      { path: '/listen/auth/tokens/0/tokenEnv', message: 'environment variable TOKEN_A is not set' },
      { path: '/listen/auth/tokens/1/tokenEnv', message: 'environment variable TOKEN_B is empty' },
      { path: '/listen/auth/tokens/3/tokenEnv', message: 'same token value as /listen/auth/tokens/2/tokenEnv' },
    ]);
  });

  it('defaults timeoutMs to timeouts.requestMs and keeps it within maxMs', async () => {
    const c = await load({ mcpServers: { a: { command: 'x' } }, timeouts: { requestMs: 1234 } });
    expect(c.servers[0]!.timeoutMs).toBe(1234);
    const issues = await issuesOf({ mcpServers: { a: { command: 'x', timeoutMs: 900000 } } });
    expect(issues).toEqual([{ path: '/mcpServers/a/timeoutMs', message: 'must be <= timeouts.maxMs (600000), got 900000' }]);
  });

  it('checks rate-limit server names and defaults the rest of a rule', async () => {
    const c = await load({ mcpServers: { a: { command: 'x' } }, rateLimits: [{ perMinute: 30 }, { server: 'a*', perMinute: 0.5 }] });
    const per = ['client', 'server', 'tool'];
    expect(c.rateLimits).toEqual([
      { client: '*', server: '*', tool: '*', perMinute: 30, burst: 30, per },
      { client: '*', server: 'a*', tool: '*', perMinute: 0.5, burst: 1, per },
    ]);
    const issues = await issuesOf({ mcpServers: { a: { command: 'x' } }, rateLimits: [{ server: 'b', perMinute: 1 }] });
    expect(issues).toEqual([{ path: '/rateLimits/0/server', message: 'no server named "b" in mcpServers' }]);
  });
});

describe('loadConfig: keys that would do nothing are refused', () => {
  it('audit.redact without arguments "full", audit keys without a path, toolLabelLimit without toolLabel, unknown clients', async () => {
    const servers = { mcpServers: { a: { command: 'x' } } };
    expect(await issuesOf({ ...servers, audit: { path: '/tmp/a.jsonl', arguments: 'redacted', redact: ['password'] } })).toEqual([
      { path: '/audit/redact', message: 'applies only when audit.arguments is "full" (it is "redacted")' },
    ]);
    expect(await issuesOf({ ...servers, audit: { arguments: 'full' } })).toEqual([
      { path: '/audit/path', message: 'is required: without it there is no audit log for the other audit keys to configure' },
    ]);
    expect(await issuesOf({ ...servers, metrics: { toolLabelLimit: 10 } })).toEqual([{ path: '/metrics/toolLabelLimit', message: 'applies only when metrics.toolLabel is true' }]);
    const unknown = 'no client named "ci": clients are the names in listen.auth.tokens, and "anonymous" for sessions without a token';
    expect(await issuesOf({ ...servers, policy: { clients: { ci: { deny: ['*'] } } } })).toEqual([{ path: '/policy/clients/ci', message: unknown }]);
    expect(await issuesOf({ ...servers, rateLimits: [{ client: 'ci', perMinute: 1 }] })).toEqual([{ path: '/rateLimits/0/client', message: unknown }]);
  });
});

describe('loadConfig: surface and toolsets (issue 20)', () => {
  const servers = { mcpServers: { a: { command: 'x' } } };

  it('fills every surface default, and keeps a toolset as written', async () => {
    const c = await load({ ...servers, surface: { alwaysVisible: ['a__read'] }, toolsets: { coding: { tools: ['a__*'], surface: 'all' }, docs: { tools: ['d__*'] } } });
    expect(c.surface).toEqual({
      mode: 'auto',
      maxDirectTools: 40,
      maxDirectTokens: 15000,
      nativeSearchClients: ['claude-code', 'copilot*'],
      alwaysVisible: ['a__read'],
      searchLimit: 8,
      searchToolName: 'search_tools',
      callToolName: 'call_tool',
    });
    expect(c.toolsets).toEqual({ coding: { tools: ['a__*'], surface: 'all' }, docs: { tools: ['d__*'] } });
    // Without the keys: the same defaults, and no toolsets.
    const bare = await load(servers);
    expect(bare.surface).toEqual({ ...c.surface, alwaysVisible: [] });
    expect(bare.toolsets).toEqual({});
    // A token client may name a toolset.
    const withToken = await load({ ...servers, toolsets: { coding: { tools: ['a__*'] } }, listen: { auth: { tokens: [{ client: 'ci', tokenEnv: 'CI_TOKEN', toolset: 'coding' }] } } }, { CI_TOKEN: 'ci-secret' });
    expect(withToken.listen.auth.tokens).toEqual([{ client: 'ci', tokenEnv: 'CI_TOKEN', token: 'ci-secret', admin: false, toolset: 'coding' }]);
  });

  it('refuses bad surface values at their path', async () => {
    const cases: [object, string, string][] = [
      [{ mode: 'sometimes' }, '/surface/mode', 'must be one of "auto", "all", "search", got "sometimes"'],
      [{ maxDirectTools: -1 }, '/surface/maxDirectTools', 'must be >= 0, got -1'],
      [{ searchLimit: 0 }, '/surface/searchLimit', 'must be >= 1, got 0'],
      [{ searchLimit: 51 }, '/surface/searchLimit', 'must be <= 50, got 51'],
      [{ unknownKey: true }, '/surface/unknownKey', 'unknown key "unknownKey"'],
      [{ maxDirectTokns: 5 }, '/surface/maxDirectTokns', 'unknown key "maxDirectTokns" (did you mean "maxDirectTokens"?)'],
      [{ serchLimit: 5 }, '/surface/serchLimit', 'unknown key "serchLimit" (did you mean "searchLimit"?)'],
      [{ searchToolName: 'find', callToolName: 'find' }, '/surface/callToolName', 'must differ from surface.searchToolName (both are "find")'],
      // The defaults collide too when only one is renamed onto the other.
      [{ searchToolName: 'call_tool' }, '/surface/callToolName', 'must differ from surface.searchToolName (both are "call_tool")'],
    ];
    for (const [surface, path, message] of cases) expect(await issuesOf({ ...servers, surface }), JSON.stringify(surface)).toEqual([{ path, message }]);
    expect(await issuesOf({ ...servers, surfce: {} })).toEqual([{ path: '/surfce', message: 'unknown key "surfce" (did you mean "surface"?)' }]);
  });

  it('refuses bad toolsets at their path', async () => {
    expect(await issuesOf({ ...servers, toolsets: { x: { tools: [] } } })).toEqual([{ path: '/toolsets/x/tools', message: 'must list at least 1 item' }]);
    expect(await issuesOf({ ...servers, toolsets: { x: { tools: ['a__*'], surface: 'bogus' } } })).toEqual([
      { path: '/toolsets/x/surface', message: 'must be one of "auto", "all", "search", got "bogus"' },
    ]);
    expect(await issuesOf({ ...servers, toolsets: { x: {} } })).toEqual([{ path: '/toolsets/x/tools', message: 'missing required key "tools"' }]);
    expect(await issuesOf({ ...servers, toolsets: { x: { tool: ['a__*'] } } })).toEqual([
      { path: '/toolsets/x/tools', message: 'missing required key "tools"' },
      { path: '/toolsets/x/tool', message: 'unknown key "tool" (did you mean "tools"?)' },
    ]);
    // Reported once, at the name. (The message still says "server name": the schema-error
    // wording of propertyNames predates toolsets; only its path and advice are pinned here.)
    const named = await issuesOf({ ...servers, toolsets: { 'my set': { tools: ['a__*'] } } });
    expect(named).toHaveLength(1);
    expect(named[0]!.path).toBe('/toolsets/my set');
    expect(named[0]!.message).toBe('invalid toolset name "my set": use only letters, digits, "_", "." and "-" (at most 64)');
  });

  it('refuses a token client naming an unknown toolset, with the nearest name', async () => {
    const env = { CI_TOKEN: 'ci-secret' };
    const token = (toolset: string) => ({ listen: { auth: { tokens: [{ client: 'ci', tokenEnv: 'CI_TOKEN', toolset }] } } });
    const toolsets = { coding: { tools: ['a__*'] }, docs: { tools: ['d__*'] } };
    expect(await issuesOf({ ...servers, toolsets, ...token('codng') }, env)).toEqual([
      { path: '/listen/auth/tokens/0/toolset', message: 'no toolset named "codng" (did you mean "coding"?); toolsets: coding, docs' },
    ]);
    expect(await issuesOf({ ...servers, toolsets, ...token('zzzzzz') }, env)).toEqual([
      { path: '/listen/auth/tokens/0/toolset', message: 'no toolset named "zzzzzz"; toolsets: coding, docs' },
    ]);
    expect(await issuesOf({ ...servers, ...token('coding') }, env)).toEqual([
      { path: '/listen/auth/tokens/0/toolset', message: 'no toolset named "coding": the config defines no "toolsets"' },
    ]);
    // The message is the one --toolset and ?toolset= give (src/config/suggest.ts).
    expect(unknownToolset('codng', toolsets)).toBe('no toolset named "codng" (did you mean "coding"?); toolsets: coding, docs');
  });
});

describe('loadConfig: oauth', () => {
  it('is for Streamable HTTP servers, and every key needs what makes it work', async () => {
    const url = 'https://mcp.example.com/mcp';
    expect((await load({ mcpServers: { a: { url, oauth: { clientId: 'c', scopes: ['x'] } } } })).servers[0]).toMatchObject({ oauth: { clientId: 'c', scopes: ['x'] } });
    const cases: [object, string, string][] = [
      [{ command: 'x', oauth: {} }, '/mcpServers/a/oauth', '"oauth" applies to url servers, not to "command" servers'],
      [{ url: 'ws://h/mcp', oauth: {} }, '/mcpServers/a/oauth', 'applies to Streamable HTTP servers only, not to ws ones'],
      [{ url, headers: { Authorization: 'Bearer x' }, oauth: {} }, '/mcpServers/a/oauth', 'cannot be combined with an Authorization header: the login provides it'],
      [{ url, oauth: { clientSecret: 's' } }, '/mcpServers/a/oauth/clientSecret', 'applies only with oauth.clientId (a registered client)'],
      [{ url, oauth: { grant: 'client_credentials', clientId: 'c' } }, '/mcpServers/a/oauth/grant', 'client_credentials needs oauth.clientId and oauth.clientSecret or oauth.privateKey'],
      [{ url, oauth: { clientId: 'c', privateKey: 'k' } }, '/mcpServers/a/oauth/privateKey', 'applies only with oauth.grant "client_credentials"'],
      [{ url, oauth: { grant: 'client_credentials', clientId: 'c', clientSecret: 's', signingAlgorithm: 'ES256' } }, '/mcpServers/a/oauth/signingAlgorithm', 'applies only with oauth.privateKey'],
      [{ url: 'http://mcp.example.com/mcp', oauth: {} }, '/mcpServers/a/url', 'must be https:// for a server behind OAuth (tokens would cross the network in clear); plain http is for loopback servers only'],
    ];
    for (const [server, path, message] of cases) expect(await issuesOf({ mcpServers: { a: server } }), JSON.stringify(server)).toEqual([{ path, message }]);
    expect(await issuesOf({ mcpServers: { a: { url, oauth: { clientMetadataUrl: 'http://x/c.json' } } } })).toEqual([{ path: '/mcpServers/a/oauth/clientMetadataUrl', message: 'must be an https:// URL' }]);
    expect((await issuesOf({ mcpServers: { a: { url, oauth: { grant: 'password' } } } }))[0]!.path).toBe('/mcpServers/a/oauth/grant');
  });

  it('perClient: a login per host client, for logins a person makes (not the daemon\'s own client_credentials)', async () => {
    const url = 'https://mcp.example.com/mcp';
    const [per, plain] = (await load({ mcpServers: { a: { url, oauth: { perClient: true } }, b: { url, oauth: {} } } })).servers;
    expect(per).toMatchObject({ oauth: { perClient: true } });
    expect([isPerClient(per!), isPerClient(plain!)]).toEqual([true, false]);
    // sharing "session" is allowed: each session's connection carries its client's login.
    expect(isPerClient((await load({ mcpServers: { a: { url, sharing: 'session', oauth: { perClient: true } } } })).servers[0]!)).toBe(true);
    expect(await issuesOf({ mcpServers: { a: { url, oauth: { perClient: true, grant: 'client_credentials', clientId: 'c', clientSecret: 's' } } } })).toEqual([
      { path: '/mcpServers/a/oauth/perClient', message: "applies to logins made for a client (mcpmux login NAME --client C), not to the client_credentials grant: its token is the daemon's own" },
    ]);
    expect((await issuesOf({ mcpServers: { a: { url, oauth: { perClient: 'yes' } } } }))[0]!.path).toBe('/mcpServers/a/oauth/perClient');
    expect((await issuesOf({ mcpServers: { a: { command: 'x', oauth: { perClient: true } } } }))[0]).toEqual({ path: '/mcpServers/a/oauth', message: '"oauth" applies to url servers, not to "command" servers' });
  });
});

describe('loadConfig: oauth.interactive (issue 22)', () => {
  it('is a boolean and a bounded wait, for the authorization_code grant only', async () => {
    const url = 'https://mcp.example.com/mcp';
    expect((await load({ mcpServers: { a: { url, oauth: { interactive: false, interactiveWaitMs: 0 } } } })).servers[0]).toMatchObject({ oauth: { interactive: false, interactiveWaitMs: 0 } });
    expect(interactiveLogin((await load({ mcpServers: { a: { url } } })).servers[0]!)).toEqual({ waitMs: 50_000 });
    expect(interactiveLogin((await load({ mcpServers: { a: { url, oauth: { interactiveWaitMs: 120_000 } } } })).servers[0]!)).toEqual({ waitMs: 120_000 });
    expect(interactiveLogin((await load({ mcpServers: { a: { url, oauth: { interactive: false } } } })).servers[0]!)).toBeUndefined();
    expect(interactiveLogin((await load({ mcpServers: { a: { url, headers: { Authorization: 'Bearer k' } } } })).servers[0]!)).toBeUndefined();
    expect(await issuesOf({ mcpServers: { a: { url, oauth: { interactive: 'yes' } } } })).toEqual([{ path: '/mcpServers/a/oauth/interactive', message: 'expected boolean, got string' }]);
    expect(await issuesOf({ mcpServers: { a: { url, oauth: { interactiveWaitMs: 120_001 } } } })).toEqual([{ path: '/mcpServers/a/oauth/interactiveWaitMs', message: 'must be <= 120000, got 120001' }]);
    expect(await issuesOf({ mcpServers: { a: { url, oauth: { interactiveWaitMs: -1 } } } })).toEqual([{ path: '/mcpServers/a/oauth/interactiveWaitMs', message: 'must be >= 0, got -1' }]);
    expect((await issuesOf({ mcpServers: { a: { url, oauth: { interactiveWaitMs: 1.5 } } } }))[0]!.path).toBe('/mcpServers/a/oauth/interactiveWaitMs');
    expect(await issuesOf({ mcpServers: { a: { url, oauth: { grant: 'client_credentials', clientId: 'c', clientSecret: 's', interactive: true } } } })).toEqual([
      { path: '/mcpServers/a/oauth/interactive', message: 'applies only to the authorization_code grant (a browser login)' },
    ]);
  });
});

describe('loadConfig: listen.adminPort', () => {
  it('is carried on listen and must differ from port', async () => {
    const c = await load({ mcpServers: {}, listen: { port: 8000, adminPort: 8001 } });
    expect(c.listen).toMatchObject({ port: 8000, adminPort: 8001 });
    const issues = await issuesOf({ mcpServers: {}, listen: { port: 8000, adminPort: 8000 } });
    expect(issues).toEqual([{ path: '/listen/adminPort', message: 'must differ from listen.port (8000)' }]);
  });

  it('binds loopback unless listen.adminHost says otherwise, which needs an adminPort; tokens may be marked admin', async () => {
    const c = await load({ mcpServers: {}, listen: { host: '0.0.0.0', adminPort: 8001 } });
    expect(c.listen).toMatchObject({ host: '0.0.0.0', adminHost: '127.0.0.1' });
    expect((await load({ mcpServers: {}, listen: { adminPort: 8001, adminHost: '::1' } })).listen.adminHost).toBe('::1');
    expect(await issuesOf({ mcpServers: {}, listen: { adminHost: '0.0.0.0' } })).toEqual([
      { path: '/listen/adminHost', message: 'applies only when listen.adminPort is set (without it the operator routes are on the main listener, at listen.host)' },
    ]);
    expect((await issuesOf({ mcpServers: {}, listen: { adminPort: 8001, adminHost: '' } }))[0]!.path).toBe('/listen/adminHost');
    expect((await issuesOf({ mcpServers: {}, listen: { auth: { tokens: [{ client: 'ops', tokenEnv: 'X', admin: 'yes' }] } } }))[0]!.path).toBe('/listen/auth/tokens/0/admin');
  });
});

const crossReference = [
  ['mcpServers', '{}'],
  ['listen', '{}'],
  ['listen/auth', '{}'],
  ['listen/auth/tokens', '[]'],
  ['listen/auth/tokens/0/client', '"x"'],
];

describe('parseConfig: robustness', () => {
  // Replace every value of the DESIGN example, one at a time, by values of the wrong kind:
  // loading must end in a Config or a ConfigError naming that path, never in a crash.
  it('throws only ConfigError, at the path of the damage', () => {
    const paths: (string | number)[][] = [];
    const collect = (v: unknown, at: (string | number)[]) => {
      if (at.length > 0) paths.push(at);
      if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) collect(x, [...at, Array.isArray(v) ? Number(k) : k]);
    };
    collect(designExample, []);
    let refused = 0;
    for (const at of paths) {
      for (const bad of [null, 5, 'x', [], {}]) {
        // Valid damage that breaks a cross-reference is refused where the reference is: an empty
        // mcpServers (the rate limit names "remote"), an empty or renamed token list (the
        // policy names client "ci").
        if (crossReference.some(([p, b]) => p === at.join('/') && b === JSON.stringify(bad))) continue;
        const copy = structuredClone(designExample) as Record<string | number, unknown>;
        let node = copy;
        for (const k of at.slice(0, -1)) node = node[k] as Record<string | number, unknown>;
        node[at.at(-1)!] = bad;
        try {
          parseConfig(JSON.stringify(copy), '/etc/mcpmux.json', exampleEnv);
        } catch (e) {
          expect(e).toBeInstanceOf(ConfigError);
          const pointer = jsonPointer(at);
          for (const i of (e as ConfigError).issues) expect(i.path.startsWith(pointer), `${pointer} -> ${i.path}`).toBe(true);
          refused++;
        }
      }
    }
    expect(paths.length).toBeGreaterThan(40);
    expect(refused).toBeGreaterThan(paths.length * 3);
  });
});

describe('loadConfig: secrets', () => {
  it('collects secret expanded values, header values, secret-named env values and tokens, deduplicated and non-empty', async () => {
    const c = await load(
      {
        mcpServers: {
          a: { command: 'x', env: { API_KEY: 'inline-key', EMPTY: '', SAME: '${SHARED}' } },
          b: { url: 'https://b.example/mcp', headers: { Authorization: 'Bearer ${B_TOKEN}', 'X-Plain': 'plain' } },
          c: { command: '${CMD}', disabled: true },
        },
        listen: { auth: { tokens: [{ client: 'ci', tokenEnv: 'CI_TOKEN' }] } },
      },
      { SHARED: 'shared-value', B_TOKEN: 'b-secret', CMD: 'node', CI_TOKEN: 'ci-token', UNUSED: 'unused' },
    );
    expect([...c.secrets].sort()).toEqual(
      // SHARED (in env SAME) and CMD name no secret: their values are words, not secrets.
      ['b-secret', 'inline-key', 'Bearer b-secret', 'plain', 'ci-token'].sort(),
    );
  });
});

describe('config.schema.json', () => {
  it('gives every property a title or description (editor help)', async () => {
    const schema = JSON.parse(await readFile(new URL('../schema/config.schema.json', import.meta.url), 'utf8'));
    const missing: string[] = [];
    const walk = (node: unknown, at: string) => {
      if (Array.isArray(node)) return node.forEach((x, i) => walk(x, `${at}/${i}`));
      if (node === null || typeof node !== 'object') return;
      const props = (node as { properties?: Record<string, Record<string, unknown>> }).properties;
      for (const [k, p] of Object.entries(props ?? {})) {
        if (!p.title && !p.description) missing.push(`${at}/properties/${k}`);
      }
      for (const [k, v] of Object.entries(node)) walk(v, `${at}/${k}`);
    };
    walk(schema, '');
    expect(missing).toEqual([]);
    expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
    expect(schema.additionalProperties).toBe(false);
  });
});

describe('secrecy: which ${VAR} values are secrets (issue 19)', () => {
  it('a name that says secret, or one listed in "secrets"; not a folder, a mode or PATH', () => {
    const none = new Set<string>();
    for (const name of ['GITHUB_TOKEN', 'OPENAI_API_KEY', 'apikey', 'CLIENT_SECRET', 'DB_PASSWORD', 'FTP_PASSWD', 'SSH_PASSPHRASE', 'SLACK_AUTH', 'GOOGLE_APPLICATION_CREDENTIALS', 'SESSION_COOKIE', 'GITHUB_PAT', 'PRIVATE_PEM', 'MYSQL_PWD', 'DB_PASS', 'redis-pw']) {
      expect(secretVariable(name, none), name).toBe(true);
    }
    for (const name of ['HOME_DIR', 'MODE', 'PATH', 'PWD', 'NOTES_DIR', 'PORT', 'PASSTHROUGH', 'DATABASE_URL', 'OLDPWD', 'COMPASS', 'PATHS']) expect(secretVariable(name, none), name).toBe(false);
    expect(secretVariable('DATABASE_URL', new Set(['DATABASE_URL']))).toBe(true);
  });

  it('values are secret by name, by place (headers, OAuth secrets), by shape, or by the list', async () => {
    const env = {
      NOTES: '/home/me/notes', MODE: 'stdio', GH_TOKEN: 'gh-value', HDR: 'header-value', CS: 'client-secret-value',
      SHAPED: 'ghp_0123456789abcdefABCDEF', DB: 'postgres-url', PLAIN: 'plain-value',
    };
    const c = await load(
      {
        mcpServers: {
          s: { command: 'x', args: ['${NOTES}', '${MODE}', '${GH_TOKEN}', '${SHAPED}', '${DB}'], env: { WHERE: '${NOTES}', API_TOKEN: '${PLAIN}', LITERAL: 'as-written', MY_DB: 'listed-literal' } },
          r: { url: 'https://r.example/mcp', headers: { 'X-Any': 'x-${HDR}' }, oauth: { clientId: 'id', clientSecret: '${CS}' } },
        },
        secrets: ['DB', 'MY_DB'],
      },
      env,
    );
    expect([...c.secrets].sort()).toEqual(
      ['gh-value', 'header-value', 'x-header-value', 'client-secret-value', 'ghp_0123456789abcdefABCDEF', 'postgres-url', 'plain-value', 'listed-literal'].sort(),
    );
    // Folders, words and env values under ordinary names are not.
    for (const word of ['/home/me/notes', 'stdio', 'as-written']) expect(c.secrets).not.toContain(word);
  });

  it('one name rule for variables, env keys and flags: a password under a short name is hidden in the spawn line too', async () => {
    const c = await load({ mcpServers: { s: { command: 'mysql', args: ['--user', 'me', '-p', '${MYSQL_PWD}', '--pw=literal-pw'], env: { DB_PASS: 'env-pass' } } } }, { MYSQL_PWD: 'hunter22' });
    expect([...c.secrets].sort()).toEqual(['env-pass', 'hunter22', 'literal-pw']);
    expect(c.secrets).not.toContain('me');
  });

  it("a hosted server's key in its URL (a token-shaped path segment, a password, a key= parameter) is a secret, whatever the variable is called", async () => {
    const c = await load(
      {
        mcpServers: {
          zap: { url: '${ZAPIER_MCP_URL}' },
          pw: { url: 'https://user:pa55word@mcp.example/mcp?key=q-value&page=2' },
        },
      },
      { ZAPIER_MCP_URL: 'https://actions.zapier.example/mcp/sk-ak-3fA9kQ2mZ7xL0pW4vB8n/sse' },
    );
    expect(c.secrets).toContain('sk-ak-3fA9kQ2mZ7xL0pW4vB8n');
    expect(c.secrets).toContain('pa55word');
    expect(c.secrets).toContain('q-value');
    for (const word of ['mcp', 'sse', 'actions.zapier.example', '2']) expect(c.secrets).not.toContain(word);
  });

  it('"secrets" is not expanded: a ${...} in it is refused as a name', async () => {
    expect(await issuesOf({ mcpServers: {}, secrets: ['${X}', 'OK_NAME', 3] }, { X: 'VALUE' })).toEqual([
      { path: '/secrets/0', message: 'must be the name of an environment variable (letters, digits and _, not starting with a digit; no ${...}), got "${X}"' },
      { path: '/secrets/2', message: 'expected string, got number' },
    ]);
    expect(await issuesOf({ mcpServers: {}, secrets: 'X' })).toEqual([{ path: '/secrets', message: 'expected array, got string' }]);
  });
});

describe('loadConfig: cluster (issue 21)', () => {
  const store = { redis: { url: 'redis://127.0.0.1:6390/0' } };
  const SECRET = 'c'.repeat(40);
  const cluster = (c: object, withStore = true) => ({ mcpServers: {}, ...(withStore && { store }), cluster: { advertiseUrl: 'http://10.0.0.5:7330', secretEnv: 'MCPMUX_CLUSTER_SECRET', ...c } });

  it('a good block: the advertised origin without a trailing slash, the secret read from its variable (and scrubbed from logs)', async () => {
    const c = await load(cluster({ advertiseUrl: 'http://MUX-1.internal:7330/' }), { MCPMUX_CLUSTER_SECRET: SECRET });
    expect(c.cluster).toEqual({ advertiseUrl: 'http://mux-1.internal:7330', secretEnv: 'MCPMUX_CLUSTER_SECRET', secret: SECRET, drainMs: 10_000 });
    expect(c.secrets).toContain(SECRET);
  });

  it('cluster without store, a bad advertiseUrl, a missing or short secret: each a clear error at its path', async () => {
    const env = { MCPMUX_CLUSTER_SECRET: SECRET };
    expect(await issuesOf(cluster({}, false), env)).toEqual([{ path: '/cluster', message: 'needs store: the daemons of a cluster share their state, and find each other, in Redis' }]);
    expect(await issuesOf(cluster({ advertiseUrl: 'not a url' }), env)).toEqual([{ path: '/cluster/advertiseUrl', message: 'is not a URL: "not a url"' }]);
    expect(await issuesOf(cluster({ advertiseUrl: 'ftp://10.0.0.5:7330' }), env)).toEqual([{ path: '/cluster/advertiseUrl', message: 'must be an http:// or https:// URL, not ftp://' }]);
    expect(await issuesOf(cluster({ advertiseUrl: 'http://10.0.0.5:7330/mcp' }), env)).toEqual([
      { path: '/cluster/advertiseUrl', message: 'must be the base URL of the main listener only (scheme, host and port), with no path, query or credentials' },
    ]);
    expect(await issuesOf(cluster({}), {})).toEqual([{ path: '/cluster/secretEnv', message: 'environment variable MCPMUX_CLUSTER_SECRET is not set' }]);
    expect(await issuesOf(cluster({}), { MCPMUX_CLUSTER_SECRET: 'short' })).toEqual([
      { path: '/cluster/secretEnv', message: 'environment variable MCPMUX_CLUSTER_SECRET holds 5 characters; use at least 32 (e.g. openssl rand -hex 32)' },
    ]);
    expect(await issuesOf({ mcpServers: {}, store, cluster: { advertiseUrl: 'http://10.0.0.5:7330' } }, env)).toEqual([{ path: '/cluster/secretEnv', message: 'missing required key "secretEnv"' }]);
  });
});
