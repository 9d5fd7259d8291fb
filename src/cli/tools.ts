// `mcpmux tools [--json]`: the merged tool table exactly as hosts will see it.

import { ANONYMOUS_CLIENT } from '../config/types.js';
import { loadOrReport, startedRouter, tolerateClosedStdout, UsageError, type GlobalOptions } from './runtime.js';

export async function runTools(opts: GlobalOptions & { json?: boolean; client?: string }): Promise<number> {
  tolerateClosedStdout();
  const config = await loadOrReport(opts);
  if (!config) return 1;
  const client = opts.client ?? ANONYMOUS_CLIENT;
  if (client !== ANONYMOUS_CLIENT && !config.listen.auth.tokens.some((t) => t.client === client)) {
    throw new UsageError(`--client: no client named ${JSON.stringify(client)} in listen.auth.tokens`);
  }
  const router = await startedRouter(config, opts);
  try {
    const tools = await router.allTools(client);
    if (opts.json) {
      process.stdout.write(JSON.stringify(tools, null, 2) + '\n');
    } else {
      const width = Math.max(4, ...tools.map((t) => String(t.name).length));
      process.stdout.write(`${'NAME'.padEnd(width)}  DESCRIPTION\n`);
      for (const t of tools) {
        const d = typeof t.description === 'string' ? t.description.split('\n')[0]!.slice(0, 80) : '';
        process.stdout.write(`${String(t.name).padEnd(width)}  ${d}\n`);
      }
    }
    const failed = router.list().filter((u) => u.state !== 'ready');
    for (const u of failed) process.stderr.write(`mcpmux: server ${u.name} is not available: ${u.reason}\n`);
    return 0;
  } finally {
    await router.close();
  }
}

