// The console's HTML: a shell the script (script.ts) fills from the token-guarded routes. No
// inline script or style (the Content-Security-Policy forbids both), no third-party asset.

export function consolePage(version: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>mcpmux console</title>
<link rel="stylesheet" href="/ui/console.css">
<script src="/ui/console.js" defer></script>
</head>
<body>
<header>
  <h1>mcpmux <span class="muted">${escapeHtml(version)}</span></h1>
  <p id="daemon" class="muted"></p>
  <nav>
    <button type="button" id="reload">Reload config</button>
    <button type="button" id="forget" hidden>Forget token</button>
  </nav>
</header>
<section id="login" hidden>
  <h2>Token</h2>
  <p>This daemon wants a bearer token (<code>listen.auth.tokens</code>). It is kept in this tab only (sessionStorage) and sent as <code>Authorization: Bearer</code>.</p>
  <p><input type="password" id="token" autocomplete="off" placeholder="token" aria-label="token"> <button type="button" id="signin">Open</button></p>
  <p id="login-error" class="error"></p>
</section>
<p id="notice" role="status"></p>
<main id="main" hidden>
  <section>
    <h2>Upstreams</h2>
    <table id="upstreams"><thead><tr><th>server</th><th>state</th><th>transport</th><th>pid</th><th>tools</th><th>tokens</th><th>restarts</th><th>in flight</th><th>last error</th><th></th></tr></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Held tools <span class="muted">(tool pinning)</span></h2>
    <p id="held-none" class="muted">None.</p>
    <table id="held"><thead><tr><th>server</th><th>tool</th><th>changed</th><th>description now</th><th></th></tr></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Sessions <span id="session-count" class="muted"></span></h2>
    <table id="sessions"><thead><tr><th>session</th><th>client</th><th>transport</th><th>era</th><th>protocol</th><th>toolset</th><th>surface</th></tr></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Rate limits near their limit</h2>
    <p id="limits-none" class="muted">None.</p>
    <table id="limits"><thead><tr><th>rule</th><th>client</th><th>server</th><th>tool</th><th>tokens left</th><th>burst</th><th>per minute</th></tr></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Audit log <span class="muted">(last lines)</span></h2>
    <p id="audit-note" class="muted"></p>
    <ol id="audit"></ol>
  </section>
</main>
<dialog id="confirm">
  <p id="confirm-text"></p>
  <p><button type="button" id="confirm-ok">Confirm</button> <button type="button" id="confirm-cancel">Cancel</button></p>
</dialog>
</body>
</html>
`;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
