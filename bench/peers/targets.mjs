// What runs in each row of the peers table, and how. Every row serves the same upstreams
// (bench/echo-server.mjs, run by the same node binary with the same arguments) and is driven by
// the same light client (bench/lib/light-client.mjs; mcp-hub's older SSE transport by
// bench/peers/sse-light.mjs, the same client code with that wire).
//
// A target: {key, label, transport ('stdio' | 'http' | 'sse'), aggregates, pkg?, how,
//            spawn({servers, port, tmp}) -> {cmd, args, env?}, url?(port)}
// servers: [{name, args}] — the node arguments of each upstream (the echo server and its flags).

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const q = (s) => `'${String(s).replace(/'/g, `'\\''`)}'`;

export function makeTargets({ root, node, peersDir }) {
  const MCPMUX = join(root, 'bin', 'mcpmux.js');
  const bin = (pkg, rel) => join(peersDir, 'node_modules', pkg, rel);
  const mcpmuxConfig = (servers, tmp, port) => {
    const file = join(tmp, `mcpmux-${servers.length}.json`);
    const mcpServers = Object.fromEntries(servers.map((s) => [s.name, { command: node, args: s.args }]));
    // surface "all": the whole catalogue is listed, as every peer lists it (the default "auto"
    // would give a 1 010-tool session the search surface). startupMs 60 s: 10 SDK servers
    // booting at once on 2 cores can take longer than the default 10 s (the same as bench/run.mjs).
    writeFileSync(file, JSON.stringify({ mcpServers, listen: { host: '127.0.0.1', port: port ?? 0 }, timeouts: { startupMs: 60_000 }, surface: { mode: 'all' } }, null, 2));
    return file;
  };
  return [
    {
      key: 'direct-stdio',
      label: 'direct (stdio), reference',
      transport: 'stdio',
      aggregates: false,
      how: 'the echo server spawned by the client, newline JSON over its stdin/stdout; no process in the middle',
      spawn: ({ servers }) => ({ cmd: node, args: servers[0].args }),
    },
    {
      key: 'mcpmux-stdio',
      label: 'mcpmux stdio',
      transport: 'stdio',
      aggregates: true,
      how: '`mcpmux stdio --config FILE`, spawned by the client as a desktop host does; upstreams over stdio',
      spawn: ({ servers, tmp }) => ({ cmd: node, args: [MCPMUX, 'stdio', '--config', mcpmuxConfig(servers, tmp)] }),
    },
    {
      key: 'direct-http',
      label: 'direct (HTTP, SDK server), reference',
      transport: 'http',
      aggregates: false,
      how: "the echo server's own SDK StreamableHTTPServerTransport (`--http PORT`, stateful, JSON responses)",
      spawn: ({ servers, port }) => ({ cmd: node, args: [...servers[0].args, '--http', String(port)] }),
      url: (port) => `http://127.0.0.1:${port}/mcp`,
    },
    {
      key: 'mcpmux-http',
      label: 'mcpmux serve',
      transport: 'http',
      aggregates: true,
      how: '`mcpmux serve --config FILE --port PORT` (listen 127.0.0.1), Streamable HTTP at /mcp; upstreams over stdio, started with the daemon',
      spawn: ({ servers, tmp, port }) => ({ cmd: node, args: [MCPMUX, 'serve', '--config', mcpmuxConfig(servers, tmp, port), '--port', String(port)] }),
      url: (port) => `http://127.0.0.1:${port}/mcp`,
    },
    {
      key: 'supergateway',
      label: 'supergateway',
      pkg: 'supergateway',
      transport: 'http',
      aggregates: false,
      how: '`supergateway --stdio "node echo-server.mjs" --outputTransport streamableHttp --stateful --port PORT --logLevel none`: one upstream child per session, started at its initialize (the default, stateless, spawns a child per POST; `--logLevel info`, the default, logs every message)',
      spawn: ({ servers, port }) => ({
        cmd: node,
        args: [bin('supergateway', 'dist/index.js'), '--stdio', [node, ...servers[0].args].map(q).join(' '), '--outputTransport', 'streamableHttp', '--stateful', '--port', String(port), '--logLevel', 'none'],
      }),
      url: (port) => `http://127.0.0.1:${port}/mcp`,
    },
    {
      key: 'mcp-proxy',
      label: 'mcp-proxy',
      pkg: 'mcp-proxy',
      transport: 'http',
      aggregates: false,
      how: '`mcp-proxy --host 127.0.0.1 --port PORT --server stream -- node echo-server.mjs`: one upstream, connected before it listens, shared by every session; defaults otherwise (event store on)',
      spawn: ({ servers, port }) => ({ cmd: node, args: [bin('mcp-proxy', 'dist/bin/mcp-proxy.mjs'), '--host', '127.0.0.1', '--port', String(port), '--server', 'stream', '--', node, ...servers[0].args] }),
      url: (port) => `http://127.0.0.1:${port}/mcp`,
    },
    {
      key: 'mcp-hub',
      label: 'mcp-hub',
      pkg: 'mcp-hub',
      transport: 'sse',
      aggregates: true,
      how: "`mcp-hub --port PORT --config FILE` with a fresh HOME whose marketplace cache is warm (so it does not fetch its registry from the internet at start); its MCP endpoint is the 2024-11-05 HTTP+SSE transport (GET /mcp, POST /messages); tools named SERVER__TOOL",
      spawn: ({ servers, port, tmp }) => {
        const home = join(tmp, `mcp-hub-home-${servers.length}-${port}`);
        const cache = join(home, '.mcp-hub', 'cache');
        mkdirSync(cache, { recursive: true });
        // A registry fetched "just now" with one entry is what isCatalogValid() accepts.
        writeFileSync(join(cache, 'registry.json'), JSON.stringify({ registry: { version: 'bench', generatedAt: Date.now(), totalServers: 1, servers: [{ id: 'bench', name: 'bench' }] }, lastFetchedAt: Date.now(), serverDocumentation: {} }));
        const file = join(home, 'mcp-hub.json');
        writeFileSync(file, JSON.stringify({ mcpServers: Object.fromEntries(servers.map((s) => [s.name, { command: node, args: s.args }])) }, null, 2));
        return {
          cmd: node,
          args: [bin('mcp-hub', 'dist/cli.js'), '--port', String(port), '--config', file],
          env: { ...process.env, HOME: home, XDG_STATE_HOME: join(home, 'state'), XDG_DATA_HOME: join(home, 'data'), XDG_CONFIG_HOME: join(home, 'config'), XDG_CACHE_HOME: join(home, 'cache') },
        };
      },
      url: (port) => `http://127.0.0.1:${port}/mcp`,
    },
  ];
}
