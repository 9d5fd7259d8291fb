// Starts test/fixtures/http-upstream.mjs (the SDK fixture served over Streamable HTTP, legacy
// SSE and WebSocket) and waits, bounded, for the line with its URL.

import { spawn } from 'node:child_process';
import path from 'node:path';
import { awaitJsonLine, exitWithin, ROOT, tempFile } from './harness.js';

const HTTP_FIXTURE = path.join(ROOT, 'test/fixtures/http-upstream.mjs');

export interface Fixture {
  url: string;
  events: string;
  close(): Promise<void>;
}

/** Starts the HTTP fixture and waits (bounded) for the line with its URL. */
export async function startHttpFixture(opts: object = {}): Promise<Fixture> {
  const events = tempFile('http-events.jsonl');
  const child = spawn(process.execPath, [HTTP_FIXTURE, JSON.stringify({ ...opts, events })], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await awaitJsonLine(child.stdout, exited, (j) => j.url as string | undefined, { ms: 10_000, what: 'http fixture URL line', log: () => err });
  return {
    url,
    events,
    async close() {
      child.stdin.end();
      await exitWithin(child, exited, 5000);
    },
  };
}

