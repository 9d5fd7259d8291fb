// listen.auth.oidc in the config (issue 22): defaults, and each bad value refused with its path.

import { describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.js';
import { planReload } from '../src/config/diff.js';
import { ConfigError, OIDC_ALGORITHMS, settingsClient, type ConfigIssue } from '../src/config/types.js';
import { RateLimiter } from '../src/governance/rate-limit.js';
import { Policy } from '../src/governance/policy.js';

const servers = { mcpServers: { a: { command: 'x' } } };
const env = { CI_TOKEN: 'ci-secret-value', OPS_TOKEN: 'ops-secret-value' };
const tokens = [{ client: 'ci', tokenEnv: 'CI_TOKEN' }, { client: 'ops', tokenEnv: 'OPS_TOKEN', admin: true }];

function load(oidc: unknown, extra: Record<string, unknown> = {}) {
  return parseConfig(JSON.stringify({ ...servers, listen: { auth: { tokens, oidc } }, ...extra }), '/tmp/oidc.json', env);
}

function issuesOf(oidc: unknown, extra: Record<string, unknown> = {}): ConfigIssue[] {
  try {
    load(oidc, extra);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues;
  }
  throw new Error('the config was accepted');
}

describe('listen.auth.oidc', () => {
  it('fills the defaults: clientClaim sub, no mapping, every asymmetric algorithm; audience always a list', () => {
    const c = load({ issuer: 'https://idp.example.com', audience: 'mcpmux' });
    expect(c.listen.auth.oidc).toEqual({ issuer: 'https://idp.example.com', audience: ['mcpmux'], clientClaim: 'sub', clients: {}, algorithms: [...OIDC_ALGORITHMS] });
    expect(OIDC_ALGORITHMS.some((a) => a === 'none' || a.startsWith('HS'))).toBe(false);
    const full = load({ issuer: 'http://127.0.0.1:8080/realms/x', audience: ['a', 'b'], jwksUrl: 'http://[::1]:8080/jwks', clientClaim: 'email', clients: { 'ci@example.com': 'ci' }, algorithms: ['ES256'] });
    expect(full.listen.auth.oidc).toEqual({ issuer: 'http://127.0.0.1:8080/realms/x', audience: ['a', 'b'], jwksUrl: 'http://[::1]:8080/jwks', clientClaim: 'email', clients: { 'ci@example.com': 'ci' }, algorithms: ['ES256'] });
    // Unmapped hosts take the settings of "oidc": a name policy and rate limits may use.
    expect(load({ issuer: 'https://idp.example.com', audience: 'm' }, { policy: { clients: { oidc: { deny: ['*'] } } }, rateLimits: [{ client: 'oidc', perMinute: 5 }] }).policy.clients.oidc).toBeDefined();
    expect(settingsClient('oidc:alice')).toBe('oidc');
    expect(settingsClient('ci')).toBe('ci');
  });

  it('refuses plain-http and malformed URLs, none/HS* algorithms, unknown clients, odd claim values, each at its path', () => {
    const base = { issuer: 'https://idp.example.com', audience: 'mcpmux' };
    expect(issuesOf({ ...base, issuer: 'http://idp.example.com' })).toEqual([
      { path: '/listen/auth/oidc/issuer', message: "must be an https:// URL (plain http only on a loopback address): the issuer decides which keys sign hosts' tokens" },
    ]);
    expect(issuesOf({ ...base, jwksUrl: 'http://10.0.0.1/jwks' })).toEqual([
      { path: '/listen/auth/oidc/jwksUrl', message: "must be an https:// URL (plain http only on a loopback address): the JWKS decides which keys sign hosts' tokens" },
    ]);
    expect(issuesOf({ ...base, issuer: 'idp.example.com' })).toEqual([{ path: '/listen/auth/oidc/issuer', message: 'is not a URL: "idp.example.com"' }]);
    expect(issuesOf({ ...base, issuer: 'https://idp.example.com/?tenant=1' })).toEqual([{ path: '/listen/auth/oidc/issuer', message: 'must have no query, fragment or credentials' }]);
    for (const alg of ['none', 'HS256']) {
      const [i] = issuesOf({ ...base, algorithms: ['RS256', alg] });
      expect(i.path).toBe('/listen/auth/oidc/algorithms/1');
      expect(i.message).toMatch(new RegExp(`^must be one of "RS256".*, got "${alg}"$`));
    }
    expect(issuesOf({ ...base, clients: { alice: 'nobody' } })).toEqual([
      { path: '/listen/auth/oidc/clients/alice', message: 'no client named "nobody" in listen.auth.tokens: a claim value maps to a configured client (unmapped ones are "oidc:<value>" anyway)' },
    ]);
    expect(issuesOf({ ...base, clients: { 'two words': 'ci' } })).toEqual([
      { path: '/listen/auth/oidc/clients/two words', message: 'a claim value is 1 to 256 visible ASCII characters (no spaces): other values are refused at sign-in' },
    ]);
    expect(issuesOf({ audience: 'x' })).toEqual([{ path: '/listen/auth/oidc/issuer', message: 'missing required key "issuer"' }]);
    expect(issuesOf({ ...base, audience: [] })[0].path).toBe('/listen/auth/oidc/audience');
    expect(issuesOf({ ...base, clientclaim: 'sub' })).toEqual([{ path: '/listen/auth/oidc/clientclaim', message: 'unknown key "clientclaim" (did you mean "clientClaim"?)' }]);
  });

  it('reserves the client names of OIDC hosts: "oidc:..." always, "oidc" beside listen.auth.oidc', () => {
    const named = (client: string, oidc?: unknown) =>
      parseConfig(JSON.stringify({ ...servers, listen: { auth: { tokens: [{ client, tokenEnv: 'CI_TOKEN' }], ...(oidc !== undefined && { oidc }) } } }), '/tmp/o.json', env);
    const message = '"oidc" and names beginning "oidc:" are for hosts signed in through listen.auth.oidc; give this client another name';
    expect(() => named('oidc:alice')).toThrow(message);
    expect(() => named('oidc', { issuer: 'https://idp.example.com', audience: 'm' })).toThrow(message);
    expect(named('oidc').listen.auth.tokens[0].client).toBe('oidc'); // no OIDC: an ordinary name
    // ...and without listen.auth.oidc, "oidc" is no client policy may name.
    expect(() => parseConfig(JSON.stringify({ ...servers, policy: { clients: { oidc: { deny: ['*'] } } } }), '/tmp/o.json', env)).toThrow('no client named "oidc"');
  });

  it('applies on reload: no restart is asked for', () => {
    const a = load({ issuer: 'https://idp.example.com', audience: 'm' });
    const b = load({ issuer: 'https://idp.example.com', audience: 'other', clients: { alice: 'ci' } });
    expect(planReload(a, b).needsRestart).toEqual([]);
  });
});

describe('the "oidc" defaults of unmapped hosts (oidc:<value>)', () => {
  it('a rate limit for client "oidc" limits each unmapped host in a bucket of its own, and no token client', () => {
    const rl = new RateLimiter([{ client: 'oidc', server: '*', tool: '*', perMinute: 1, burst: 1, per: ['client'] }], 100, () => 0);
    expect(rl.take('oidc:alice', 'fx', 'tools/call', 'echo')).toBeUndefined();
    expect(rl.take('oidc:alice', 'fx', 'tools/call', 'echo')).toBeDefined();
    expect(rl.take('oidc:bob', 'fx', 'tools/call', 'echo')).toBeUndefined();
    expect(rl.take('ci', 'fx', 'tools/call', 'echo')).toBeUndefined();
    expect(rl.take('ci', 'fx', 'tools/call', 'echo')).toBeUndefined();
    // A glob on the full name matches them too.
    const glob = new RateLimiter([{ client: 'oidc:*', server: '*', tool: '*', perMinute: 1, burst: 1, per: ['client'] }], 100, () => 0);
    expect(glob.take('oidc:carol', 'fx', 'tools/call', 'echo')).toBeUndefined();
    expect(glob.take('oidc:carol', 'fx', 'tools/call', 'echo')).toBeDefined();
  });

  it('policy.clients.oidc is the lists of every unmapped host, and of no token client', () => {
    const c = load({ issuer: 'https://idp.example.com', audience: 'm' }, { policy: { clients: { oidc: { deny: ['a__secret'] } } } });
    const p = new Policy(c);
    expect(p.clientAllows('oidc:alice', 'tools', 'a__secret')).toBe(false);
    expect(p.clientAllows('oidc:ci', 'tools', 'a__secret')).toBe(false);
    expect(p.clientAllows('ci', 'tools', 'a__secret')).toBe(true);
    expect(p.clientAllows('oidc:alice', 'tools', 'a__other')).toBe(true);
  });
});
