// The `telemetry` config key (issue 24.1): what turns traces on, what adjusts them, and every
// bad value refused with a clear error. Real files through loadConfig, as test/config.test.ts.

import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planReload } from '../src/config/diff.js';
import { loadConfig } from '../src/config/load.js';
import { ConfigError, type ConfigIssue } from '../src/config/types.js';
import { makeScrubber } from '../src/observe/logger.js';
import { ROOT } from './helpers/harness.js';

let dir: string;
let n = 0;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'mcpmux-telemetry-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const SERVERS = { mcpServers: { a: { command: 'node', args: ['x.js'] } } };

async function load(content: object, env: NodeJS.ProcessEnv = {}) {
  const file = path.join(dir, `config-${++n}.json`);
  await writeFile(file, JSON.stringify({ ...SERVERS, ...content }));
  return loadConfig(file, env);
}

async function issuesOf(content: object, env: NodeJS.ProcessEnv = {}): Promise<ConfigIssue[]> {
  const err = await load(content, env).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).issues;
}

describe('telemetry config', () => {
  it('is off by default, and with OTEL_TRACES_EXPORTER=none whatever the file says', async () => {
    expect((await load({})).telemetry).toBeUndefined();
    expect((await load({ telemetry: { otlp: { endpoint: 'http://127.0.0.1:4318' } } }, { OTEL_TRACES_EXPORTER: 'none' })).telemetry).toBeUndefined();
  });

  it('turns on with telemetry.otlp, with its defaults', async () => {
    expect((await load({ telemetry: { otlp: {} } })).telemetry).toEqual({ endpoint: undefined, headers: {}, sampleRatio: 1 });
    const c = await load({ telemetry: { otlp: { endpoint: 'https://collector.example:4318', headers: { 'x-api-key': '${OTLP_KEY}' } }, sampleRatio: 0.25 } }, { OTLP_KEY: 'k-123456789' });
    expect(c.telemetry).toEqual({ endpoint: 'https://collector.example:4318', headers: { 'x-api-key': 'k-123456789' }, sampleRatio: 0.25 });
    // The collector's headers are secrets: scrubbed from every log line.
    expect(c.secrets).toContain('k-123456789');
    expect(makeScrubber(c.secrets)!('header k-123456789 here')).not.toContain('k-123456789');
  });

  it('turns on with OTEL_TRACES_EXPORTER=otlp alone (the variables then say where)', async () => {
    expect((await load({}, { OTEL_TRACES_EXPORTER: 'otlp' })).telemetry).toEqual({ endpoint: undefined, headers: {}, sampleRatio: 1 });
    expect((await load({ telemetry: { sampleRatio: 0.5 } }, { OTEL_TRACES_EXPORTER: 'otlp' })).telemetry?.sampleRatio).toBe(0.5);
  });

  it('refuses bad values with a clear error', async () => {
    const at = async (content: object, env: NodeJS.ProcessEnv = {}) => (await issuesOf(content, env)).map((i) => `${i.path}: ${i.message}`).join('\n');
    expect(await at({ telemetry: { sampleRatio: 1.5, otlp: {} } })).toMatch(/\/telemetry\/sampleRatio: .*1/);
    expect(await at({ telemetry: { sampleRatio: -0.1, otlp: {} } })).toMatch(/\/telemetry\/sampleRatio/);
    expect(await at({ telemetry: { sampleRatio: 'all', otlp: {} } })).toMatch(/\/telemetry\/sampleRatio/);
    expect(await at({ telemetry: { otlp: { endpoint: 'not a url' } } })).toMatch(/\/telemetry\/otlp\/endpoint: must be an http:\/\/ or https:\/\/ URL/);
    expect(await at({ telemetry: { otlp: { endpoint: 'ftp://collector:21' } } })).toMatch(/\/telemetry\/otlp\/endpoint: must be an http:\/\/ or https:\/\/ URL/);
    expect(await at({ telemetry: { otlp: { endpoint: '' } } })).toMatch(/\/telemetry\/otlp\/endpoint/);
    expect(await at({ telemetry: { otlp: { headers: { a: 1 } } } })).toMatch(/\/telemetry\/otlp\/headers\/a/);
    expect(await at({ telemetry: { otlp: { endpoint: 'http://127.0.0.1:4318', protocol: 'grpc' } } })).toMatch(/unknown key "protocol"/);
    expect(await at({ telemetry: { enabled: true } })).toMatch(/unknown key "enabled"/);
    // A key that would do nothing.
    expect(await at({ telemetry: { sampleRatio: 0.5 } })).toMatch(/\/telemetry\/sampleRatio: applies only when traces are on/);
    // Secrets in clear across a network.
    const clear = await issuesOf({ telemetry: { otlp: { endpoint: 'http://collector.example:4318', headers: { 'x-api-key': 'k-abcdefgh' } } } });
    expect(clear.map((i) => i.path)).toEqual(['/telemetry/otlp/headers']);
    expect(JSON.stringify(clear)).not.toContain('k-abcdefgh');
    // On loopback, plain http with headers is fine.
    expect((await load({ telemetry: { otlp: { endpoint: 'http://127.0.0.1:4318', headers: { 'x-api-key': 'k-abcdefgh' } } } })).telemetry?.headers).toEqual({ 'x-api-key': 'k-abcdefgh' });
  });

  it('is read at start: a reload that changes it says it needs a restart', async () => {
    const before = await load({});
    const after = await load({ telemetry: { otlp: {} } });
    expect(planReload(before, after).needsRestart).toContain('telemetry');
  });
});

describe('with traces off, no OpenTelemetry code is loaded', () => {
  it('only observe/tracing.ts imports OpenTelemetry, and only startTracing imports it (dynamically, when on)', () => {
    const files = readdirSync(path.join(ROOT, 'src'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
    const importers = files.filter((f) => /from '@opentelemetry\//.test(readFileSync(path.join(ROOT, 'src', f), 'utf8')));
    expect(importers.map((f) => f.split(path.sep).join('/'))).toEqual(['observe/tracing.ts']);
    const loaders = files.filter((f) => /observe\/tracing\.js'/.test(readFileSync(path.join(ROOT, 'src', f), 'utf8')));
    expect(loaders.map((f) => f.split(path.sep).join('/'))).toEqual(['cli/runtime.ts']);
    const runtime = readFileSync(path.join(ROOT, 'src/cli/runtime.ts'), 'utf8');
    expect(runtime).toMatch(/if \(!telemetry\) return undefined;\n\s+const \{ Tracing \} = await import\('\.\.\/observe\/tracing\.js'\);/);
  });
});

