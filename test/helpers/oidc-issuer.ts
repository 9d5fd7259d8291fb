// A local OpenID Connect issuer for tests (issue 22): serves its discovery document and JWKS on
// loopback, holds keys made with jose, and signs JWTs with them. Which keys it publishes can
// change (a rotation), and its JWKS can go down (the connection is cut).

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';

export interface IssuerKey {
  kid: string;
  alg: 'RS256' | 'ES256';
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  /** The public JWK as the JWKS lists it (kid, alg, use). */
  jwk: JWK;
}

export async function makeKey(kid: string, alg: 'RS256' | 'ES256' = 'RS256'): Promise<IssuerKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { kid, alg, privateKey, publicKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

export class OidcIssuer {
  /** The public keys the JWKS lists now. */
  published: JWK[] = [];
  /** How many times the JWKS was asked for. */
  jwksFetches = 0;
  /** While true the JWKS answers nothing (the connection is cut): an unreachable IdP. */
  down = false;
  /** `http://127.0.0.1:<port>`, the issuer identifier (set by start). */
  url = '';
  private server: Server | undefined;

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      if (req.url === '/.well-known/openid-configuration') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer: this.url, jwks_uri: `${this.url}/jwks` }));
      } else if (req.url === '/jwks') {
        this.jwksFetches++;
        if (this.down) return void req.socket.destroy();
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: this.published }));
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /**
   * A JWT signed with `key` (header kid: the key's unless `kid` says otherwise), issued by this
   * issuer for `audience`, valid for a minute unless `claims` say otherwise.
   */
  async sign(key: IssuerKey, audience: string, claims: Record<string, unknown>, kid: string = key.kid): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    const body = { iss: this.url, aud: audience, iat: now, exp: now + 60, ...claims };
    return new SignJWT(body).setProtectedHeader({ alg: key.alg, kid, typ: 'JWT' }).sign(key.privateKey);
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((r) => (this.server ? this.server.close(r) : r(undefined)));
  }
}
