// The governed config every governance measurement uses (bench/run.mjs, bench/interleaved.mjs,
// bench/governance-cost.mjs): 50 policy rules, 3 rate limits that apply to every call but never
// refuse, a redacted audit log; and the scraper that fetches /metrics as Prometheus would.

import { errText } from './calls.mjs';

const deny = (kind, n) => Array.from({ length: n }, (_, i) => `nothing${i}__${kind}_*`);

/** 50 rules, none of which matches the echo server's tools. */
export const POLICY = {
  tools: { allow: ['*'], deny: deny('tool', 20) },
  prompts: { deny: deny('prompt', 10) },
  resources: { deny: deny('resource', 10) },
  clients: { anonymous: { allow: ['*'], deny: deny('anon', 10) } },
};

/** Every call passes all three; none is ever refused. */
export const LIMITS = [
  { server: 'echo', perMinute: 60_000_000, burst: 1_000_000 },
  { tool: 'echo', perMinute: 60_000_000, burst: 1_000_000 },
  { client: '*', perMinute: 60_000_000, burst: 1_000_000, per: ['client'] },
];

/** `echo`: the stdio upstream ({command, args}); `auditPath`: where the audit log goes. */
export function governedConfig(echo, auditPath) {
  return { mcpServers: { echo }, policy: POLICY, rateLimits: LIMITS, audit: { path: auditPath, arguments: 'redacted' } };
}

/**
 * Fetches /metrics from the admin port `child` logged (a spawnTracked child), at once and then
 * every second, until stopped; counts the scrapes that held mcpmux's metrics in `rec.scrapes`
 * and keeps the first failure in `rec.scrapeError`.
 */
export function startScraper(child, rec) {
  const m = /"port":(\d+)[^\n]*"msg":"admin listening"/.exec(child.stderrTail(64 * 1024));
  if (!m) throw new Error(`no "admin listening" line from ${child.pid}`);
  const url = `http://127.0.0.1:${m[1]}/metrics`;
  const scrape = () =>
    fetch(url).then((r) => r.text()).then(
      (text) => {
        if (text.includes('mcpmux_requests_total')) rec.scrapes++;
      },
      (e) => (rec.scrapeError ??= errText(e)),
    );
  // Once at once (a short smoke run still scrapes), then every second, as Prometheus would.
  let busy = scrape();
  const timer = setInterval(() => (busy = busy.then(scrape)), 1000);
  return {
    async stop() {
      clearInterval(timer);
      await busy;
    },
  };
}
