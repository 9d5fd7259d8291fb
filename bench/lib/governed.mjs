// The governed config every governance measurement uses (bench/run.mjs, bench/interleaved.mjs):
// 50 policy rules, 3 rate limits that apply to every call but never refuse, a redacted audit log.

/** `echo`: the stdio upstream ({command, args}); `auditPath`: where the audit log goes. */
export function governedConfig(echo, auditPath) {
  const deny = (kind, n) => Array.from({ length: n }, (_, i) => `nothing${i}__${kind}_*`);
  return {
    mcpServers: { echo },
    policy: {
      tools: { allow: ['*'], deny: deny('tool', 20) },
      prompts: { deny: deny('prompt', 10) },
      resources: { deny: deny('resource', 10) },
      clients: { anonymous: { allow: ['*'], deny: deny('anon', 10) } },
    },
    rateLimits: [
      { server: 'echo', perMinute: 60_000_000, burst: 1_000_000 },
      { tool: 'echo', perMinute: 60_000_000, burst: 1_000_000 },
      { client: '*', perMinute: 60_000_000, burst: 1_000_000, per: ['client'] },
    ],
    audit: { path: auditPath, arguments: 'redacted' },
  };
}
