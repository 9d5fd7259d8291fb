// Config of the grants that need no person (issue 22): token_exchange and jwt_bearer (Cross-App
// Access). Each setting only with its grant, the IdP complete, token endpoints over https (plain
// http on loopback), and the ID token a secret that never reaches a log.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { ConfigError, type ConfigIssue, type RemoteServerConfig } from '../src/config/types.js';

let dir: string;
let n = 0;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'mcpmux-grants-config-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function write(content: unknown): Promise<string> {
  const file = path.join(dir, `config-${++n}.json`);
  await writeFile(file, JSON.stringify(content, null, 2));
  return file;
}

async function issuesOf(server: unknown, env: NodeJS.ProcessEnv = {}): Promise<ConfigIssue[]> {
  const err = await loadConfig(await write({ mcpServers: { a: server } }), env).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).issues;
}

const url = 'https://mcp.example.com/mcp';
const idp = { issuer: 'https://idp.example.com', clientId: 'mux-at-idp' };

describe('config: token_exchange and jwt_bearer', () => {
  it('takes both grants with their settings', async () => {
    const cfg = await loadConfig(
      await write({
        mcpServers: {
          x: { url, oauth: { grant: 'token_exchange', clientId: 'c', clientSecret: '${XS}', audience: 'mcp', resource: 'https://mcp.example.com/mcp', subjectTokenType: 'jwt', tokenEndpoint: 'https://as.example.com/token', scopes: ['read'] } },
          j: { url, oauth: { grant: 'jwt_bearer', clientId: 'c', idp: { ...idp, tokenEndpoint: 'http://127.0.0.1:9/token', clientSecret: '${IS}', idToken: '${IDT}' } } },
        },
      }),
      { XS: 'xs', IS: 'is', IDT: 'plain.words.here' },
    );
    const j = cfg.servers.find((s) => s.name === 'j') as RemoteServerConfig;
    expect(j.oauth?.idp?.idToken).toBe('plain.words.here');
    // The ID token and both secrets are scrubbed from logs by where they are used, though neither
    // their variables' names nor their values say so.
    for (const v of ['xs', 'is', 'plain.words.here']) expect(cfg.secrets).toContain(v);
  });

  it.each([
    [{ url, oauth: { grant: 'token_exchange' } }, '/mcpServers/a/oauth/grant', 'token_exchange needs oauth.clientId'],
    [{ url, oauth: { grant: 'jwt_bearer', idp } }, '/mcpServers/a/oauth/grant', 'jwt_bearer needs oauth.clientId'],
    [{ url, oauth: { grant: 'jwt_bearer', clientId: 'c' } }, '/mcpServers/a/oauth/grant', 'jwt_bearer needs oauth.idp'],
    [{ url, oauth: { grant: 'jwt_bearer', clientId: 'c', idp: { issuer: idp.issuer } } }, '/mcpServers/a/oauth/idp/clientId', 'missing required key'],
    [{ url, oauth: { grant: 'client_credentials', clientId: 'c', clientSecret: 's', idp } }, '/mcpServers/a/oauth/idp', 'applies only with oauth.grant "jwt_bearer"'],
    [{ url, oauth: { clientId: 'c', audience: 'x' } }, '/mcpServers/a/oauth/audience', 'applies only with oauth.grant "token_exchange"'],
    [{ url, oauth: { grant: 'jwt_bearer', clientId: 'c', idp, tokenEndpoint: 'https://as.example.com/token' } }, '/mcpServers/a/oauth/tokenEndpoint', 'applies only with oauth.grant "token_exchange"'],
    [{ url, oauth: { grant: 'token_exchange', clientId: 'c', subjectTokenType: 'saml2' } }, '/mcpServers/a/oauth/subjectTokenType', ''],
    [{ url, oauth: { grant: 'token_exchange', clientId: 'c', tokenEndpoint: 'http://as.example.com/token' } }, '/mcpServers/a/oauth/tokenEndpoint', 'must be https://'],
    [{ url, oauth: { grant: 'token_exchange', clientId: 'c', resource: 'not a uri' } }, '/mcpServers/a/oauth/resource', 'absolute URI'],
    [{ url, oauth: { grant: 'jwt_bearer', clientId: 'c', idp: { ...idp, issuer: 'http://idp.example.com' } } }, '/mcpServers/a/oauth/idp/issuer', 'must be https://'],
    [{ url, oauth: { grant: 'jwt_bearer', clientId: 'c', idp: { ...idp, tokenEndpoint: 'http://idp.example.com/token' } } }, '/mcpServers/a/oauth/idp/tokenEndpoint', 'must be https://'],
    [{ url, oauth: { grant: 'token_exchange', clientId: 'c', redirectPort: 8000 } }, '/mcpServers/a/oauth/redirectPort', 'applies only to the authorization_code grant'],
    [{ url, oauth: { grant: 'jwt_bearer', clientId: 'c', idp, privateKey: 'k' } }, '/mcpServers/a/oauth/privateKey', 'applies only with oauth.grant "client_credentials"'],
    [{ url: 'http://mcp.example.com/mcp', oauth: { grant: 'token_exchange', clientId: 'c' } }, '/mcpServers/a/url', 'must be https://'],
  ])('refuses %j at its path', async (server, at, message) => {
    const issues = await issuesOf(server);
    const found = issues.find((i) => i.path === at);
    expect(found, JSON.stringify(issues)).toBeDefined();
    expect(found!.message).toContain(message);
  });
});

// Review R1 of issue 22.
describe('config: where the host JWT may go, and perClient with the grants that act for the host', () => {
  it('token_exchange without oauth.tokenEndpoint is refused: the admin names where hosts\' JWTs go, never the upstream\'s metadata', async () => {
    const issues = await issuesOf({ url, oauth: { grant: 'token_exchange', clientId: 'c' } });
    expect(issues).toEqual([
      {
        path: '/mcpServers/a/oauth/tokenEndpoint',
        message: "token_exchange needs oauth.tokenEndpoint: the host's JWT is sent only to a token endpoint the config names, never to one the upstream's metadata points at",
      },
    ]);
  });

  it('perClient: true is implied by token_exchange and by jwt_bearer without idp.idToken, so it loads with them; only client_credentials refuses it, by name', async () => {
    const cfg = await loadConfig(
      await write({
        mcpServers: {
          x: { url, oauth: { grant: 'token_exchange', perClient: true, clientId: 'c', tokenEndpoint: 'https://as.example.com/token' } },
          j: { url, oauth: { grant: 'jwt_bearer', perClient: true, clientId: 'c', idp } },
        },
      }),
      {},
    );
    expect(cfg.servers.map((s) => (s as RemoteServerConfig).oauth?.perClient)).toEqual([true, true]);
    const issues = await issuesOf({ url, oauth: { grant: 'client_credentials', perClient: true, clientId: 'c', clientSecret: 's' } });
    expect(issues.find((i) => i.path === '/mcpServers/a/oauth/perClient')?.message).toContain('not to the client_credentials grant');
  });

  it('perClient: true with jwt_bearer and a fixed idp.idToken is refused: that ID token is the identity of every client, so per-client connections would only copy it', async () => {
    const issues = await issuesOf({ url, oauth: { grant: 'jwt_bearer', perClient: true, clientId: 'c', idp: { ...idp, idToken: 'eyJ.fixed.token' } } });
    expect(issues).toEqual([
      {
        path: '/mcpServers/a/oauth/perClient',
        message: "applies to identities per client, not to jwt_bearer with a fixed idp.idToken: that ID token is the identity, the same for every client (leave out idp.idToken to use each host's OIDC JWT)",
      },
    ]);
    // The same server without perClient (the daemon's own identity) loads.
    const cfg = await loadConfig(await write({ mcpServers: { a: { url, oauth: { grant: 'jwt_bearer', clientId: 'c', idp: { ...idp, idToken: 'eyJ.fixed.token' } } } } }), {});
    expect((cfg.servers[0] as RemoteServerConfig).oauth?.idp?.idToken).toBe('eyJ.fixed.token');
  });
});
