// The console's script, served as /ui/console.js. A string module rather than a file read at run
// time: it ships inside dist/ with the rest of the code (package.json "files"), works from a
// bundled global install, and needs no path lookup. Plain ES2017 for any current browser; no
// template literals in it (this file is one). docs/decisions.md ("Issue 24: console") says why.

export const CONSOLE_JS = String.raw`// mcpmux web console. Reads /status (every 2 s) and /status/audit, and asks for restart,
// reload and approval through their routes, with the bearer token this tab keeps in
// sessionStorage. Builds the page with textContent only: nothing a server says becomes markup.
'use strict';
(function () {
  var KEY = 'mcpmux.console.token';
  var POLL_MS = 2000;
  var AUDIT_LINES = 50;
  var timer;
  var busy = false;
  var $ = function (id) { return document.getElementById(id); };

  function token() { return sessionStorage.getItem(KEY); }
  function headers() {
    var t = token();
    // The operator header: what no page of another origin can send (the daemon wants it, or the
    // token, on every action: without tokens configured there is no token to send).
    var h = { 'x-mcpmux-operator': '1' };
    if (t) h.authorization = 'Bearer ' + t;
    return h;
  }
  function call(method, path) {
    return fetch(path, { method: method, headers: headers(), cache: 'no-store', credentials: 'omit', redirect: 'error' }).then(function (res) {
      return res.text().then(function (text) {
        var body;
        try { body = JSON.parse(text); } catch (e) { body = undefined; }
        return { status: res.status, body: body, text: text };
      });
    });
  }
  function reason(r) {
    var m = r.body && r.body.error && r.body.error.message;
    return m || ('HTTP ' + r.status);
  }
  var noticeAt = 0;
  var NOTICE_MS = 8000;
  function notice(text, bad) {
    var n = $('notice');
    n.textContent = text;
    n.className = bad ? 'error' : 'muted';
    noticeAt = Date.now();
  }
  function cell(tr, text, cls) {
    var td = document.createElement('td');
    td.textContent = text === undefined || text === null ? '' : String(text);
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }
  function count(n) { return typeof n === 'number' ? String(n) : '-'; }
  function fill(table, rows) {
    var body = $(table).tBodies[0];
    body.replaceChildren.apply(body, rows);
  }

  // ---- the token ---------------------------------------------------------------------------

  function askToken(message) {
    clearTimeout(timer);
    $('main').hidden = true;
    $('login').hidden = false;
    $('forget').hidden = true;
    $('login-error').textContent = message || '';
    $('token').focus();
  }
  function signIn() {
    var t = $('token').value.trim();
    if (!t) return;
    sessionStorage.setItem(KEY, t);
    $('token').value = '';
    refresh();
  }

  // ---- the confirmation dialog ---------------------------------------------------------------

  var pending;
  function confirmThen(text, action) {
    pending = action;
    $('confirm-text').textContent = text;
    $('confirm').showModal();
  }
  function confirmed(ok) {
    var action = pending;
    pending = undefined;
    $('confirm').close();
    if (ok && action) action();
  }

  // ---- actions (each through its own guarded route) --------------------------------------

  function act(method, path, done) {
    notice('working...');
    call(method, path).then(function (r) {
      if (r.status === 401) {
        sessionStorage.removeItem(KEY);
        return askToken('The token was refused (401).');
      }
      if (r.status >= 300) return notice(reason(r), true);
      notice(done(r.body));
      refresh();
    }, function (e) { notice('cannot reach the daemon: ' + e.message, true); });
  }
  function restart(name) {
    confirmThen('Restart upstream ' + name + '? Calls in flight to it fail.', function () {
      act('POST', '/status/restart?server=' + encodeURIComponent(name), function () { return name + ' is restarting'; });
    });
  }
  function approve(h) {
    // The definition shown is the one approved (fingerprint): changed again since, the daemon answers 409.
    var text = 'Approve ' + h.server + '/' + h.tool + ' as shown (changed: ' + h.changed.join(', ') + ')? Hosts will see and may call it.' +
      (h.description !== null && h.description !== undefined ? ' Its description now: ' + h.description : '');
    confirmThen(text, function () {
      act('POST', '/status/approve?server=' + encodeURIComponent(h.server) + '&tool=' + encodeURIComponent(h.tool) + '&fingerprint=' + encodeURIComponent(h.fingerprint), function () { return h.server + '/' + h.tool + ' approved'; });
    });
  }
  function reload() {
    confirmThen('Reload the config file now (as SIGHUP does)?', function () {
      act('POST', '/status/reload', function (b) {
        return b && b.result === 'applied' ? 'config reloaded' : 'reload refused: ' + ((b && b.error) || '');
      });
    });
  }

  // ---- rendering ---------------------------------------------------------------------------

  function button(text, cls, onClick) {
    var b = document.createElement('button');
    b.type = 'button';
    b.textContent = text;
    b.className = cls;
    b.addEventListener('click', onClick);
    return b;
  }
  function render(s) {
    $('daemon').textContent = 'pid ' + s.pid + ', up ' + s.uptimeS + ' s, config ' + (s.config.path || '(none)') +
      (s.lastReload ? ', last reload ' + s.lastReload.result + ' at ' + s.lastReload.at : '');
    fill('upstreams', s.upstreams.map(function (u) {
      var tr = document.createElement('tr');
      tr.dataset.upstream = u.name;
      var state = u.gaveUp ? u.state + ' (given up)' : u.state;
      tr.dataset.state = u.state;
      cell(tr, u.client === undefined ? u.name : u.name + ' (client ' + u.client + ')');
      cell(tr, state, 'state state-' + u.state);
      cell(tr, u.transport);
      cell(tr, u.pid, 'pid');
      cell(tr, count(u.tools));
      cell(tr, count(u.toolTokens));
      cell(tr, u.restarts, 'restarts');
      cell(tr, u.inFlight);
      cell(tr, u.lastError || (u.unavailable && u.unavailable.reason) || '', 'wrap');
      var td = cell(tr, '');
      if (u.state !== 'unavailable' && u.client === undefined && !u.session) td.appendChild(button('Restart', 'restart', function () { restart(u.name); }));
      return tr;
    }));
    var held = s.held || [];
    $('held-none').hidden = held.length > 0;
    $('held').hidden = held.length === 0;
    fill('held', held.map(function (h) {
      var tr = document.createElement('tr');
      tr.dataset.held = h.server + '/' + h.tool;
      cell(tr, h.server);
      cell(tr, h.tool);
      cell(tr, h.changed.join(', '));
      cell(tr, h.description === null || h.description === undefined ? '' : h.description, 'wrap description');
      cell(tr, '').appendChild(button('Approve', 'approve', function () { approve(h); }));
      return tr;
    }));
    var list = (s.sessionList && s.sessionList.list) || [];
    var more = (s.sessionList && s.sessionList.more) || 0;
    $('session-count').textContent = '(' + s.sessions.total + ' open' + (more ? ', ' + more + ' not shown' : '') + ')';
    fill('sessions', list.map(function (x) {
      var tr = document.createElement('tr');
      cell(tr, x.id + '…');
      cell(tr, x.client);
      cell(tr, x.transport);
      cell(tr, x.era || '-');
      cell(tr, x.protocolVersion);
      cell(tr, x.toolset || '-');
      cell(tr, x.surface);
      return tr;
    }));
    var near = (s.rateLimits && s.rateLimits.near) || [];
    $('limits-none').textContent = s.rateLimits && s.rateLimits.shared ? 'The buckets are kept in the shared store (Redis): not shown here.' : 'None.';
    $('limits-none').hidden = near.length > 0;
    $('limits').hidden = near.length === 0;
    fill('limits', near.map(function (b) {
      var tr = document.createElement('tr');
      cell(tr, '#' + b.rule);
      cell(tr, b.client);
      cell(tr, b.server);
      cell(tr, b.tool);
      cell(tr, b.tokens);
      cell(tr, b.burst);
      cell(tr, b.perMinute);
      return tr;
    }));
  }
  function renderAudit(r) {
    var note = $('audit-note');
    var list = $('audit');
    if (r.status === 403) {
      note.textContent = reason(r).replace(/^Forbidden: /, '');
      list.replaceChildren();
      return;
    }
    if (r.status !== 200 || !r.body) return;
    if (!r.body.on) note.textContent = 'The audit log is off (audit.path).';
    else note.textContent = r.body.lines.length ? '' : 'No lines yet.';
    var lines = r.body.lines.slice(-AUDIT_LINES).reverse();
    list.replaceChildren.apply(list, lines.map(function (line) {
      var li = document.createElement('li');
      li.textContent = line;
      return li;
    }));
  }

  // ---- polling -------------------------------------------------------------------------------

  function refresh() {
    clearTimeout(timer);
    if (busy) return;
    busy = true;
    Promise.all([call('GET', '/status'), call('GET', '/status/audit?last=' + AUDIT_LINES)]).then(function (both) {
      var st = both[0];
      // 401: the token is wrong (or missing); 403: it is valid but names no client of the
      // config (an OIDC person): either way another token is needed, so ask for one.
      if (st.status === 401 || st.status === 403) {
        var had = token();
        sessionStorage.removeItem(KEY);
        askToken(st.status === 403 ? reason(st) : had ? 'The token was refused (401).' : '');
        return false;
      }
      if (st.status !== 200 || !st.body) {
        notice('/status answered ' + reason(st), true);
      } else {
        $('login').hidden = true;
        $('main').hidden = false;
        $('forget').hidden = !token();
        render(st.body);
        renderAudit(both[1]);
        // What an action said, or a failed poll, fades once the page is current again.
        if (Date.now() - noticeAt > NOTICE_MS) $('notice').textContent = '';
        document.body.dataset.updated = new Date().toISOString();
      }
      return true;
    }).catch(function (e) {
      // The daemon unreachable, or an answer the page could not show: said, and polled again.
      notice('cannot show the daemon: ' + (e && e.message), true);
      return true;
    }).then(function (again) {
      busy = false;
      if (again) timer = setTimeout(refresh, POLL_MS);
    });
  }

  document.addEventListener('DOMContentLoaded', function () {
    $('signin').addEventListener('click', signIn);
    $('token').addEventListener('keydown', function (e) { if (e.key === 'Enter') signIn(); });
    $('forget').addEventListener('click', function () { sessionStorage.removeItem(KEY); askToken(''); });
    $('reload').addEventListener('click', reload);
    $('confirm-ok').addEventListener('click', function () { confirmed(true); });
    $('confirm-cancel').addEventListener('click', function () { confirmed(false); });
    $('confirm').addEventListener('cancel', function () { pending = undefined; });
    refresh();
  });
})();
`;
