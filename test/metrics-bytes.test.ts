// Request bytes are counted for host-to-server requests only: a server-to-host request
// (sampling, elicitation, roots) adds no mcpmux_request_bytes_total series, not even a zero one.

import { describe, expect, it } from 'vitest';
import { endRequest, startHostRequest, startServerRequest } from '../src/observe/events.js';
import { createLogger } from '../src/observe/logger.js';
import { Metrics } from '../src/observe/metrics.js';

describe('metrics request bytes', () => {
  it('a server-to-host request creates no byte series; a host-to-server one of the same labels does', async () => {
    const metrics = new Metrics({ version: 'test', toolLabel: false, toolLabelLimit: 0, log: createLogger('silent') });
    metrics.start();
    try {
      const session = { id: 's1', client: 'anonymous', transport: 'stdio' as const };
      const up = startServerRequest(session, 'sampling/createMessage', 1, {}, 'fx')!;
      endRequest(up, { jsonrpc: '2.0', id: 1, result: {} }, 40);
      let { body } = await metrics.text();
      expect(body).toMatch(/mcpmux_requests_total\{[^}]*method="sampling\/createMessage"/);
      expect(body).not.toMatch(/mcpmux_request_bytes_total\{/);

      const down = startHostRequest(session, 'tools/call', 2, {}, 30)!;
      endRequest(down, { jsonrpc: '2.0', id: 2, result: {} }, 50);
      ({ body } = await metrics.text());
      expect(body).toMatch(/mcpmux_request_bytes_total\{[^}]*method="tools\/call"[^}]*direction="in"[^}]*\} 30/);
      expect(body).toMatch(/mcpmux_request_bytes_total\{[^}]*method="tools\/call"[^}]*direction="out"[^}]*\} 50/);
    } finally {
      metrics.stop();
    }
  });
});
