// A login as the shared store holds it: sealed with AES-256-GCM, never plain in Redis. The key
// comes from the config's store.secretEnv value through HKDF-SHA256 (a passphrase-like secret
// is never used as a key as it is); every write draws a fresh 12-byte IV; the blob's own key
// (`<keyPrefix>login:<server>`) is the associated data, so a blob copied under another server's
// key, or into another deployment sharing the Redis and the secret, does not open there. The
// tag is 16 bytes and nothing shorter is accepted (GCM would otherwise check a truncated one).
//
// Stored as `v1.<iv>.<ciphertext>.<tag>`, each part base64url.

import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { StoredLogin } from './store.js';

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** The AES-256 key of a store secret (the same secret gives the same key on every daemon). */
export function loginKey(secret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'mcpmux store', 'mcpmux login encryption v1', 32));
}

/** What a sealed login is bound to: the full Redis key it is stored under. */
const aad = (keyPrefix: string, server: string) => Buffer.from(`${keyPrefix}login:${server}`);

export function sealLogin(key: Buffer, keyPrefix: string, server: string, login: StoredLogin): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad(keyPrefix, server));
  const body = Buffer.concat([cipher.update(JSON.stringify(login), 'utf8'), cipher.final()]);
  return [VERSION, iv.toString('base64url'), body.toString('base64url'), cipher.getAuthTag().toString('base64url')].join('.');
}

/**
 * The login in a sealed blob; throws when it does not open (another key, another server's
 * blob, or tampered with): the caller says which server and that the key may differ.
 */
export function openLogin(key: Buffer, keyPrefix: string, server: string, sealed: string): StoredLogin {
  const [version, ivText, body, tagText, ...rest] = sealed.split('.');
  if (version !== VERSION || !ivText || body === undefined || !tagText || rest.length > 0) throw new Error('not a sealed login');
  const iv = Buffer.from(ivText, 'base64url');
  const tag = Buffer.from(tagText, 'base64url');
  if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new Error('not a sealed login');
  const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(aad(keyPrefix, server));
  decipher.setAuthTag(tag);
  const text = Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
  return JSON.parse(text) as StoredLogin;
}
