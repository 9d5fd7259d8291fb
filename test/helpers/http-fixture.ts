// Starts test/fixtures/http-upstream.mjs (the SDK fixture served over Streamable HTTP, legacy
// SSE and WebSocket) and waits, bounded, for the line with its URL.

import { spawn } from 'node:child_process';
import path from 'node:path';
import { exitWithin, ROOT, tempFile } from './harness.js';

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
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`http fixture did not start within 10 s:\n${err}`)), 10_000);
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(timer);
      resolve(JSON.parse(out.slice(0, nl)).url);
    });
    void exited.then(() => (clearTimeout(timer), reject(new Error(`http fixture exited:\n${err}`))));
  });
  return {
    url,
    events,
    async close() {
      child.stdin.end();
      await exitWithin(child, exited, 5000);
    },
  };
}

