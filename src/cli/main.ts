// The `mcpmux` command line. Exit codes: 0 ok; 1 something failed (an invalid config, a failed
// check, a daemon that cannot be reached or refuses); 2 a usage error (the command line is wrong).

import type { Command, Option } from 'commander';
import { LOG_FORMATS, LOG_LEVELS } from '../observe/log-format.js';
import { VERSION } from '../version.js';
// Each command's module loads when that command runs: a host waits for `mcpmux stdio`'s first
// answer, and what `tools`, `check` or `serve` need (search, Redis, HTTP) would only delay it.
import { UsageError } from './usage-error.js';
import { plainStdio } from './plain-stdio.js';
import type { GlobalOptions } from './config-file.js';
import type { StdioOptions } from './stdio.js';

export async function main(argv: string[]): Promise<number> {
  // How hosts run mcpmux, read without commander: its stdio upstreams start sooner (plain-stdio.ts).
  const plain = plainStdio(argv.slice(2));
  if (plain) return usageErrorsSaid(import('./stdio.js').then((m) => m.runStdio(plain)));
  const { Command, CommanderError, Option } = await import('commander');
  let result: Promise<number> = Promise.resolve(0);
  const program = new Command('mcpmux')
    .description('One MCP server in front of many')
    .version(VERSION)
    .exitOverride()
    .showHelpAfterError();

  const configOpt = (): Option => new Option('-c, --config <file>', 'config file (default: $MCPMUX_CONFIG)');
  const levelOpt = (): Option =>
    new Option('--log-level <level>', 'log level').choices([...LOG_LEVELS]);
  const formatOpt = (): Option =>
    new Option('--log-format <format>', 'log lines as JSON, or pretty for people (default: pretty when stderr is a terminal)').choices([...LOG_FORMATS]);

  /** A command that reads a config file: every one but `connect`. */
  const configured = (name: string, description: string): Command =>
    program.command(name).description(description).addOption(configOpt()).addOption(levelOpt()).addOption(formatOpt());

  configured('stdio', 'serve one host on stdin/stdout')
    .option('--admin-port <port>', 'serve /metrics, /healthz and /readyz on this port (default: listen.adminPort; none)')
    .option('--toolset <name>', 'offer the host only this toolset\'s tools (a name in "toolsets")')
    .action((o: StdioOptions) => {
      result = import('./stdio.js').then((m) => m.runStdio(o));
    });

  configured('check', 'validate the config; --probe also connects to every upstream')
    .option('--probe', 'connect to each upstream and report its capabilities and counts')
    .option('--strict', 'exit 1 when a server is disabled because an environment variable it needs is not set')
    .action((o: import('./check.js').CheckOptions) => {
      result = import('./check.js').then((m) => m.runCheck(o));
    });

  configured('login', 'log in to a remote server behind OAuth (opens a browser; the daemon picks the login up)')
    .argument('<server>', 'the server name in the config')
    .option('--no-browser', 'print the URL instead of opening a browser ($BROWSER, or the platform opener)')
    .option('--client <name>', 'for a server with "oauth": {"perClient": true}: the host client this login is for (a name in listen.auth.tokens)')
    .action((server: string, o: GlobalOptions & { browser?: boolean; client?: string }) => {
      result = import('./login.js').then((m) => m.runLogin(server, o));
    });

  configured('logout', "forget (and revoke, where the server can) a remote server's OAuth login")
    .argument('<server>', 'the server name in the config')
    .option('--client <name>', 'for a server with "oauth": {"perClient": true}: the host client whose login to forget')
    .action((server: string, o: GlobalOptions & { client?: string }) => {
      result = import('./login.js').then((m) => m.runLogout(server, o));
    });

  configured('tools', 'print the merged, filtered tool table')
    .option('--json', 'print JSON')
    .option('--client <name>', 'as this client sees it (a name in listen.auth.tokens; default: anonymous)')
    .option('--approve <name>', 'approve a held tool (pinTools): server/tool, its public name, or its own name; repeatable', (v: string, prev: string[]) => [...prev, v], [] as string[])
    .option('--approve-all', 'approve every current tool definition')
    .option('--all', 'the same as --approve-all')
    .option('--tokens', "print each server's and the total token cost of the tool definitions (o200k_base), and what each toolset sends in each surface mode")
    .option('--toolset <name>', 'only this toolset\'s tools (a name in "toolsets")')
    .option('--search <query>', 'print what search_tools would answer a host for this query')
    .option('--limit <n>', 'with --search: how many matches (default: surface.searchLimit)')
    .action((o: import('./tools.js').ToolsOptions) => {
      result = import('./tools.js').then((m) => m.runTools(o));
    });

  configured('serve', 'run the daemon: Streamable HTTP at /mcp, HTTP+SSE at /sse, WebSocket at /ws')
    .option('--host <host>', 'address to bind (default: listen.host, 127.0.0.1)')
    .option('--port <port>', 'port to listen on, 0 for any free port (default: listen.port, 7330)')
    .action(async (o: import('./serve.js').ServeOptions) => {
      const { runServe } = await import('./serve.js');
      result = runServe(o);
    });

  program
    .command('status')
    .description("show a running daemon's upstreams and sessions (GET /status)")
    .option('--url <base>', "the daemon's base URL, or its admin port's (default http://127.0.0.1:7330)")
    .option('--json', 'print the JSON as the daemon sent it')
    .option('--token-env <var>', 'the environment variable holding a bearer token from listen.auth.tokens (default MCPMUX_TOKEN)')
    .action(async (o: import('./status.js').StatusOptions) => {
      const { runStatus } = await import('./status.js');
      result = runStatus(o);
    });

  program
    .command('restart')
    .description('restart one upstream of a running daemon now (forgets its failures)')
    .argument('<server>', 'the server name in the config')
    .option('--url <base>', "the daemon's base URL, or its admin port's (default http://127.0.0.1:7330)")
    .option('--token-env <var>', 'the environment variable holding the bearer token of a client with "admin": true (default MCPMUX_TOKEN)')
    .action(async (name: string, o: { url?: string; tokenEnv?: string }) => {
      const { runRestart } = await import('./status.js');
      result = runRestart(name, o);
    });

  program
    .command('import')
    .description("gather the desktop hosts' MCP servers into one mcpmux config")
    .option('--from <source>', `a host (${['claude', 'claude-code', 'cursor', 'vscode', 'windsurf'].join(', ')}) or a file; repeatable (default: every host)`, (v: string, prev: string[]) => [...prev, v], [] as string[])
    .option('-o, --output <file>', 'write the config here (default: stdout)')
    .option('--force', 'overwrite --output if it exists')
    .action(async (o: import('./import.js').ImportOptions) => {
      const { runImport } = await import('./import.js');
      result = runImport(o);
    });

  program
    .command('install')
    .description("point a desktop host at mcpmux: its config gets one server, `mcpmux stdio --config F`")
    .requiredOption('--host <host>', 'claude, claude-code, cursor, vscode or windsurf')
    .option('-c, --config <file>', 'the mcpmux config (from mcpmux import -o)')
    .option('--file <file>', "the host file to edit (default: the first of the host's files that has servers)")
    .option('--env-from-shell', "copy variables the config needs and the host would not give mcpmux from this shell into the entry's env")
    .option('--force', 'install even if some servers would not start in the host (they stay off)')
    .option('--dry-run', 'show the change, write nothing')
    .action(async (o: import('./install.js').InstallOptions) => {
      const { runInstall } = await import('./install.js');
      result = runInstall(o);
    });

  program
    .command('uninstall')
    .description("give a host its own servers back: restores the newest backup install made of the host's file")
    .requiredOption('--host <host>', 'claude, claude-code, cursor, vscode or windsurf')
    .option('--file <file>', "the host file install edited (default: the first of the host's files that runs mcpmux)")
    .action(async (o: import('./uninstall.js').UninstallOptions) => {
      const { runUninstall } = await import('./uninstall.js');
      result = runUninstall(o);
    });

  program
    .command('connect')
    .description('bridge stdin/stdout to a running daemon (default http://127.0.0.1:7330/mcp)')
    .argument('[url]', "the daemon's /mcp URL")
    .addOption(levelOpt())
    .addOption(formatOpt())
    .option('-H, --header <header>', 'extra HTTP header, repeatable, e.g. "Authorization: Bearer ..." (or $MCPMUX_TOKEN)', (v: string, prev: string[]) => [...prev, v], [] as string[])
    .option('--toolset <name>', 'offer the host only this toolset\'s tools (a name in the daemon\'s "toolsets"; sent as ?toolset=)')
    .action(async (url: string | undefined, o: import('./connect.js').ConnectOptions) => {
      const { runConnect } = await import('./connect.js');
      result = runConnect(url, o);
    });

  return usageErrorsSaid(
    program.parseAsync(argv).then(
      () => result,
      (err: unknown) => {
        if (!(err instanceof CommanderError)) throw err;
        return err.code === 'commander.helpDisplayed' || err.code === 'commander.version' ? 0 : 2;
      },
    ),
  );
}

/** A command's exit code; a usage error it throws is said, and exits 2. */
async function usageErrorsSaid(result: Promise<number>): Promise<number> {
  try {
    return await result;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`mcpmux: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
}
