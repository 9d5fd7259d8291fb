// The WWW-Authenticate reader the HTTP transport judges every 401 and 403 by (issue 22, point 6):
// real headers as servers send them, including ones the old regexes misread: the Bearer
// challenge after another scheme, odd spacing, `error` among other parameters, and an
// `insufficient_scope` that is not the error.

import { describe, expect, it } from 'vitest';
import { bearerChallenge, challenges } from '../src/upstream/oauth/challenge.js';

describe('bearerChallenge', () => {
  it('reads the MCP SDK\'s and GitHub-style challenges', () => {
    expect(bearerChallenge('Bearer error="invalid_token", error_description="Missing Authorization header", resource_metadata="http://127.0.0.1:5000/.well-known/oauth-protected-resource/mcp"')).toEqual({
      error: 'invalid_token',
      error_description: 'Missing Authorization header',
      resource_metadata: 'http://127.0.0.1:5000/.well-known/oauth-protected-resource/mcp',
    });
    expect(bearerChallenge('Bearer realm="GitHub", error="insufficient_scope", scope="repo read:org"')).toEqual({ realm: 'GitHub', error: 'insufficient_scope', scope: 'repo read:org' });
  });

  it('finds the Bearer challenge after another scheme, with a token68 or parameters', () => {
    expect(bearerChallenge('Basic realm=x, Bearer error=insufficient_scope, scope="files:write"')).toEqual({ error: 'insufficient_scope', scope: 'files:write' });
    expect(bearerChallenge('Basic realm="a, b", Bearer error="insufficient_scope"')).toEqual({ error: 'insufficient_scope' });
    expect(bearerChallenge('Negotiate, Bearer scope="a"')).toEqual({ scope: 'a' });
    expect(bearerChallenge('Negotiate YIIB3gYGKwYBBQUCoIIB0jCCAc6gMDAu==, Bearer error="invalid_token"')).toEqual({ error: 'invalid_token' });
    // The old test read a 403 as a step-up only when the header began with Bearer... or anywhere it said insufficient_scope.
    expect(bearerChallenge('Basic realm="insufficient_scope"')).toBeUndefined();
  });

  it('takes odd spacing, case and escapes', () => {
    expect(bearerChallenge('  bEaReR   scope = "a b" ,error=  "insufficient_scope"  ,  realm=x')).toEqual({ scope: 'a b', error: 'insufficient_scope', realm: 'x' });
    expect(bearerChallenge('Bearer realm="say \\"hi\\"", Error="invalid_token"')).toEqual({ realm: 'say "hi"', error: 'invalid_token' });
    expect(bearerChallenge('Bearer')).toEqual({});
  });

  it('is not fooled by a parameter that merely mentions insufficient_scope, nor by a scheme that starts with Bearer', () => {
    expect(bearerChallenge('Bearer error="invalid_token", error_description="not insufficient_scope"')?.error).toBe('invalid_token');
    expect(bearerChallenge('BearerToken realm="x"')).toBeUndefined();
    expect(bearerChallenge('')).toBeUndefined();
    expect(bearerChallenge(null)).toBeUndefined();
  });

  it('lists every challenge in order', () => {
    expect(challenges('Basic realm="r", Bearer scope="s", DPoP algs="ES256 PS256"').map((c) => [c.scheme, c.params])).toEqual([
      ['basic', { realm: 'r' }],
      ['bearer', { scope: 's' }],
      ['dpop', { algs: 'ES256 PS256' }],
    ]);
  });
});
