// The `mcpmux` command line. Exit codes: 0 ok, 1 invalid config or failed check, 2 usage error.

import { Command, CommanderError, Option } from 'commander';
import { VERSION } from '../version.js';
import { runCheck } from './check.js';
import { UsageError, type GlobalOptions } from './runtime.js';
import { runStdio } from './stdio.js';
import { runTools } from './tools.js';

export async function main(argv: string[]): Promise<number> {
  let result: Promise<number> = Promise.resolve(0);
  const program = new Command('mcpmux')
    .description('One MCP server in front of many')
    .version(VERSION)
    .exitOverride()
    .showHelpAfterError();

  const configOpt = (): Option => new Option('-c, --config <file>', 'config file (default: $MCPMUX_CONFIG)');
  const levelOpt = (): Option =>
    new Option('--log-level <level>', 'log level').choices(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);

  program
    .command('stdio')
    .description('serve one host on stdin/stdout')
    .addOption(configOpt())
    .addOption(levelOpt())
    .action((o: GlobalOptions) => {
      result = runStdio(o);
    });

  program
    .command('check')
    .description('validate the config; --probe also connects to every upstream')
    .addOption(configOpt())
    .addOption(levelOpt())
    .option('--probe', 'connect to each upstream and report its capabilities and counts')
    .action((o: GlobalOptions & { probe?: boolean }) => {
      result = runCheck(o);
    });

  program
    .command('tools')
    .description('print the merged, filtered tool table')
    .addOption(configOpt())
    .addOption(levelOpt())
    .option('--json', 'print JSON')
    .action((o: GlobalOptions & { json?: boolean }) => {
      result = runTools(o);
    });

  try {
    await program.parseAsync(argv);
    return await result;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return 0;
      return 2;
    }
    if (err instanceof UsageError) {
      process.stderr.write(`mcpmux: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
}
