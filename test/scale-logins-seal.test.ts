// The sealed login format (seal.ts): a GCM tag shorter than 16 bytes or an IV other than 12
// bytes never opens (GCM would otherwise accept a truncated tag, 4 bytes of forgery work), and
// the blob is bound to its full Redis key, keyPrefix included: two deployments sharing a Redis
// and a secret cannot swap blobs.

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loginKey, openLogin, sealLogin } from '../src/upstream/oauth/seal.js';
import type { StoredLogin } from '../src/upstream/oauth/store.js';

const key = loginKey(randomBytes(32).toString('hex'));
const login: StoredLogin = {
  server: 'https://mcp.example/mcp',
  resource: 'https://mcp.example/mcp',
  as: { issuer: 'https://as.example', token_endpoint: 'https://as.example/token' },
  client: { client_id: 'c1' },
  tokens: { access_token: 'at-123', refresh_token: 'rt-456' },
};

const parts = (sealed: string) => sealed.split('.');
const b64 = (b: Buffer) => b.toString('base64url');

describe('sealed logins', () => {
  it('open with the same key, prefix and server only', () => {
    const sealed = sealLogin(key, 'mcpmux:', 'secure', login);
    expect(openLogin(key, 'mcpmux:', 'secure', sealed)).toEqual(login);
    expect(() => openLogin(key, 'mcpmux:', 'other', sealed)).toThrow();
    expect(() => openLogin(key, 'staging:', 'secure', sealed)).toThrow();
    expect(() => openLogin(loginKey(randomBytes(32).toString('hex')), 'mcpmux:', 'secure', sealed)).toThrow();
  });

  it('refuse a truncated tag (a 4-byte prefix of the right tag) and an IV of the wrong size', () => {
    const sealed = sealLogin(key, 'mcpmux:', 'secure', login);
    const [v, iv, body, tag] = parts(sealed) as [string, string, string, string];
    const full = Buffer.from(tag, 'base64url');
    expect(full).toHaveLength(16);
    for (const n of [4, 8, 12, 15]) expect(() => openLogin(key, 'mcpmux:', 'secure', [v, iv, body, b64(full.subarray(0, n))].join('.'))).toThrow('not a sealed login');
    expect(() => openLogin(key, 'mcpmux:', 'secure', [v, b64(randomBytes(16)), body, tag].join('.'))).toThrow('not a sealed login');
    // A tampered body with the full tag fails authentication.
    const flipped = Buffer.from(body, 'base64url');
    flipped[0]! ^= 1;
    expect(() => openLogin(key, 'mcpmux:', 'secure', [v, iv, b64(flipped), tag].join('.'))).toThrow();
  });
});
