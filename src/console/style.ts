// The console's style sheet, served as /ui/console.css (a string module, like script.ts).

export const CONSOLE_CSS = String.raw`/* mcpmux web console: plain, readable, light and dark. */
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #5b636e; --line: #d5dae0; --bg: #ffffff; --head: #f3f5f7; --ok: #1a7f37; --bad: #c62828; --warn: #9a6700; --accent: #0b5cad; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6e9ed; --muted: #9aa4af; --line: #343a42; --bg: #15181c; --head: #1e2227; --ok: #4ac26b; --bad: #ff6b6b; --warn: #d4a72c; --accent: #58a6ff; }
}
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1200px; padding: 1rem 1.5rem 3rem; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 0 1.5rem; border-bottom: 1px solid var(--line); margin-bottom: 0.5rem; }
h1 { font-size: 1.3rem; margin: 0.4rem 0; }
h2 { font-size: 1.05rem; margin: 1.4rem 0 0.4rem; }
nav { margin-left: auto; display: flex; gap: 0.5rem; }
.muted { color: var(--muted); font-weight: normal; }
.error { color: var(--bad); }
code { font: 12px ui-monospace, "SFMono-Regular", Menlo, monospace; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 0.3rem 0.6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--head); font-weight: 600; white-space: nowrap; }
td.wrap { max-width: 28rem; overflow-wrap: anywhere; color: var(--muted); }
td.state { font-weight: 600; }
.state-ready { color: var(--ok); }
.state-failed, .state-closed, .state-unavailable, .state-needs-login { color: var(--bad); }
.state-starting { color: var(--warn); }
button { font: inherit; padding: 0.2rem 0.7rem; border: 1px solid var(--line); border-radius: 4px; background: var(--head); color: var(--fg); cursor: pointer; }
button:hover { border-color: var(--accent); }
button.approve, #confirm-ok { border-color: var(--accent); color: var(--accent); }
input { font: inherit; padding: 0.25rem 0.5rem; border: 1px solid var(--line); border-radius: 4px; background: var(--bg); color: var(--fg); min-width: 20rem; }
#notice { min-height: 1.2rem; margin: 0.3rem 0; }
#audit { font: 12px/1.4 ui-monospace, "SFMono-Regular", Menlo, monospace; padding-left: 0; list-style: none; margin: 0; max-height: 22rem; overflow: auto; border: 1px solid var(--line); }
#audit li { padding: 0.15rem 0.5rem; border-bottom: 1px solid var(--line); overflow-wrap: anywhere; }
dialog { border: 1px solid var(--line); border-radius: 6px; background: var(--bg); color: var(--fg); max-width: 32rem; }
dialog::backdrop { background: rgba(0, 0, 0, 0.35); }
[hidden] { display: none !important; }
`;
