// Reloads asked for while one runs (the console's reload button, SIGHUP, a file save): the one
// an HTTP caller asked for is the one whose record it gets, whatever file event comes after.

import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Reloader } from '../src/cli/reload.js';
import { loadConfig } from '../src/config/load.js';
import { createLogger } from '../src/observe/logger.js';
import { tempFile } from './helpers/harness.js';

describe('Reloader coalescing', () => {
  it('a file event while a reload runs does not take the place of an http reload waiting its turn', async () => {
    const file = tempFile('mcpmux.json');
    writeFileSync(file, JSON.stringify({ mcpServers: {} }));
    let current = await loadConfig(file);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let applied = 0;
    const reloader = new Reloader({
      file,
      log: createLogger('silent'),
      current: () => current,
      apply: async (next) => {
        // The first reload waits here until the others have been asked for.
        if (applied++ === 0) await held;
        current = next;
      },
    });
    const first = reloader.reload('signal');
    const http = reloader.reload('http');
    void reloader.reload('file');
    release();
    await Promise.all([first, http]);
    expect(reloader.last).toMatchObject({ trigger: 'http', result: 'applied' });
    expect(applied).toBe(2);
  });
});
