// The web console: `GET /ui` (a page), `/ui/console.js` and `/ui/console.css`, on the operator
// routes (so wherever /status is served: the main listener, or listen.adminPort when set).
//
// The page and its two assets are the same for every daemon and hold nothing of the config, so
// they are served without a token: a browser's navigation cannot carry a bearer header anyway.
// Everything the page shows or does goes through the token-guarded routes (/status,
// /status/audit, /status/restart, /status/reload, /status/approve) with `Authorization: Bearer`
// sent by its script from sessionStorage: never a cookie, so no request another site makes the
// browser send can read or act (it has no bearer header: 401, or a foreign Origin: 403).
//
// Headers: a strict Content-Security-Policy (only this origin's script, style and fetches; no
// framing, no base, no forms; Trusted Types required, so an innerHTML slipped in fails loudly),
// nosniff, no referrer, no caching, COOP and CORP same-origin.

import type { ServerResponse } from 'node:http';
import type { OperatorRoutes } from '../transport/http/admin.js';
import { HttpRpcCode, sendError } from '../transport/http/respond.js';
import { VERSION } from '../version.js';
import { consolePage } from './page.js';
import { CONSOLE_JS } from './script.js';
import { CONSOLE_CSS } from './style.js';

export const CONSOLE_PATH = '/ui';

export const CONSOLE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'; require-trusted-types-for 'script'";

const HEADERS = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'x-frame-options': 'DENY',
  // No opener handle for a page that opened the console; its files for this origin only.
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

export function addConsoleRoutes(routes: OperatorRoutes): void {
  const page = consolePage(VERSION);
  const serve = (type: string, body: string) => (req: { method?: string }, res: ServerResponse) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendError(res, 405, HttpRpcCode.Transport, 'Method Not Allowed', { allow: 'GET, HEAD' });
    res.writeHead(200, { ...HEADERS, 'content-type': type, 'content-length': Buffer.byteLength(body) });
    res.end(req.method === 'HEAD' ? undefined : body);
  };
  routes.set(CONSOLE_PATH, serve('text/html; charset=utf-8', page));
  routes.set(`${CONSOLE_PATH}/console.js`, serve('text/javascript; charset=utf-8', CONSOLE_JS));
  routes.set(`${CONSOLE_PATH}/console.css`, serve('text/css; charset=utf-8', CONSOLE_CSS));
}
