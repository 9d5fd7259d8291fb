// `mcpmux tools [--json]`: the merged tool table exactly as hosts will see it.

import { loadOrReport, startedRouter, tolerateClosedStdout, type GlobalOptions } from './runtime.js';

export async function runTools(opts: GlobalOptions & { json?: boolean }): Promise<number> {
  tolerateClosedStdout();
  const config = await loadOrReport(opts);
  if (!config) return 1;
  const router = await startedRouter(config, opts);
  try {
    const tools = await router.allTools();
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

