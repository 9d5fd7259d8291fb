// The many-upstream cases' servers: `n` echo servers (bench/echo-server.mjs) of `tools` tools
// each, named s01, s02, … so that every script's configs and tool names compare.

/** [{name, args}], args for node: the echo server at `echo` with its --tools and --name. */
export function echoUpstreams(echo, n, tools) {
  return Array.from({ length: n }, (_, i) => {
    const name = `s${String(i + 1).padStart(2, '0')}`;
    return { name, args: [echo, '--tools', String(tools), '--name', name] };
  });
}

/** The same as a config's mcpServers object, each run by `node`. */
export function echoServersConfig(echo, n, tools, node = process.execPath) {
  return Object.fromEntries(echoUpstreams(echo, n, tools).map((s) => [s.name, { command: node, args: s.args }]));
}
