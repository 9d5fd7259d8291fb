// What mcpmux keeps of an authorization server's answers: tokens as the login file stores
// them, and a refusal as one line (its code and description, never a token).

import * as oauth from 'oauth4webapi';
import type { StoredLogin } from './store.js';

/** What a token response says, as stored (`keepRefresh`: the old refresh token when no new one came). */
export function tokensOf(t: oauth.TokenEndpointResponse, keepRefresh?: string): NonNullable<StoredLogin['tokens']> {
  return {
    access_token: t.access_token,
    ...((t.refresh_token ?? keepRefresh) && { refresh_token: t.refresh_token ?? keepRefresh }),
    ...(typeof t.expires_in === 'number' && { expires_at: Date.now() + t.expires_in * 1000 }),
    ...(t.scope && { scope: t.scope }),
  };
}

/** An OAuth error in a line: its code and description, never a token. */
export function describe(err: unknown): string {
  if (err instanceof oauth.ResponseBodyError) return `${err.error}${err.error_description ? `: ${err.error_description}` : ''}`;
  return (err as Error)?.message ?? String(err);
}
