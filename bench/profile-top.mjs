#!/usr/bin/env node
// Top self-time functions of a V8 .cpuprofile (as written by `node --cpu-prof`).
//
//   node bench/profile-top.mjs [file.cpuprofile] [--top N] [--json]
//
// Without a file, the newest .cpuprofile in bench/results/. Self time of a function is the sum
// of the sampling intervals whose leaf frame is that function (the profile's timeDeltas, so the
// figures are in ms). Lines are 1-based; a dist/*.js location is mapped back to src/*.ts through
// the build's source map when one exists. Also prints self time per file.

import { readFileSync, readdirSync, statSync, existsSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

const maps = new Map(); // dist file path -> SourceMap | null
function sourceMapFor(file) {
  if (maps.has(file)) return maps.get(file);
  let sm = null;
  try {
    if (file.includes(`${join(ROOT, 'dist')}`) && existsSync(`${file}.map`)) sm = new SourceMap(JSON.parse(readFileSync(`${file}.map`, 'utf8')));
  } catch {
    sm = null;
  }
  maps.set(file, sm);
  return sm;
}

/** "src/x.ts:12" for a built file with a map, else the file relative to the project. */
function location(url, line0, col0) {
  if (!url) return '';
  let file = url;
  if (url.startsWith('file://')) file = fileURLToPath(url);
  const sm = sourceMapFor(file);
  if (sm && line0 >= 0) {
    const e = sm.findEntry(line0, Math.max(0, col0));
    if (e && e.originalSource) {
      const src = e.originalSource.startsWith('file://') ? fileURLToPath(e.originalSource) : resolve(dirname(file), e.originalSource);
      return `${rel(src)}:${e.originalLine + 1}`;
    }
  }
  return `${rel(file)}:${line0 + 1}`;
}
function rel(p) {
  if (!p.startsWith('/')) return p;
  const r = relative(ROOT, p);
  return r.startsWith('..') ? p : r;
}

/** Returns {totalMs, functions: [{name, location, selfMs, pct}], files: [{file, selfMs, pct}]}. */
export function analyse(profile) {
  const byId = new Map();
  const parentOf = new Map();
  for (const n of profile.nodes) {
    byId.set(n.id, n);
    for (const c of n.children ?? []) parentOf.set(c, n.id);
  }
  const self = new Map(); // node id -> µs
  const { samples, timeDeltas } = profile;
  // timeDeltas[i] is the time before sample i; attribute the interval after a sample to it.
  for (let i = 0; i < samples.length; i++) {
    const dt = timeDeltas[i + 1] ?? 0;
    self.set(samples[i], (self.get(samples[i]) ?? 0) + Math.max(0, dt));
  }
  let total = 0;
  const fns = new Map();
  const files = new Map();
  for (const [id, us] of self) {
    total += us;
    const cf = byId.get(id)?.callFrame ?? {};
    const name = cf.functionName || (cf.url ? '(anonymous)' : '');
    const key = `${name}|${cf.url}|${cf.lineNumber}|${cf.columnNumber}`;
    let f = fns.get(key);
    if (!f) fns.set(key, (f = { name: name || '(root)', url: cf.url, line: cf.lineNumber, col: cf.columnNumber, us: 0, callers: new Map() }));
    f.us += us;
    // The caller, for native frames (e.g. writeUtf8String) that have no location of their own.
    const p = byId.get(parentOf.get(id))?.callFrame;
    if (p) {
      const pk = `${p.functionName || '(anonymous)'}|${p.url}|${p.lineNumber}|${p.columnNumber}`;
      const e = f.callers.get(pk) ?? { cf: p, us: 0 };
      e.us += us;
      f.callers.set(pk, e);
    }
  }
  const out = [...fns.values()].sort((a, b) => b.us - a.us);
  // Percentages of busy time too: (idle) is the event loop waiting for I/O.
  const idle = out.filter((f) => f.name === '(idle)').reduce((n, f) => n + f.us, 0);
  const busy = total - idle;
  for (const f of out) {
    f.location = location(f.url, f.line, f.col);
    const top = [...f.callers.values()].sort((a, b) => b.us - a.us)[0];
    f.caller = top ? `${top.cf.functionName || '(anonymous)'}${top.cf.url ? ` ${location(top.cf.url, top.cf.lineNumber, top.cf.columnNumber)}` : ''}` : '';
    const file = f.location ? f.location.replace(/:\d+$/, '') : f.name;
    files.set(file, (files.get(file) ?? 0) + f.us);
  }
  return {
    totalMs: total / 1000,
    idleMs: idle / 1000,
    functions: out.map((f) => ({ name: f.name, location: f.location, caller: f.caller, selfMs: f.us / 1000, pct: (100 * f.us) / total, busyPct: f.name === '(idle)' ? NaN : (100 * f.us) / busy })),
    files: [...files.entries()].map(([file, us]) => ({ file, selfMs: us / 1000, pct: (100 * us) / total, busyPct: file === '(idle)' ? NaN : (100 * us) / busy })).sort((a, b) => b.selfMs - a.selfMs),
  };
}

/** Markdown: the top n functions by self time (idle excluded from the ranking), then files. */
export function topTable(a, n = 10) {
  const pc = (x) => (Number.isFinite(x) ? x.toFixed(1) : '—');
  const lines = [];
  lines.push(`${a.totalMs.toFixed(0)} ms sampled, of which ${a.idleMs.toFixed(0)} ms (idle) (${((100 * a.idleMs) / a.totalMs).toFixed(0)}%), waiting for I/O. "busy %" is the share of the rest.`);
  lines.push('');
  lines.push(`| # | self ms | busy % | function | location | main caller |`);
  lines.push(`|---|---:|---:|---|---|---|`);
  a.functions
    .filter((f) => f.name !== '(idle)')
    .slice(0, n)
    .forEach((f, i) => lines.push(`| ${i + 1} | ${f.selfMs.toFixed(1)} | ${pc(f.busyPct)} | \`${f.name}\` | ${f.location || '(native)'} | ${f.caller || ''} |`));
  lines.push('');
  lines.push(`| self time by file | self ms | busy % |`);
  lines.push(`|---|---:|---:|`);
  for (const f of a.files.filter((x) => x.file !== '(idle)').slice(0, n)) lines.push(`| ${f.file} | ${f.selfMs.toFixed(1)} | ${pc(f.busyPct)} |`);
  return lines.join('\n');
}

function newestProfile() {
  const dir = join(ROOT, 'bench', 'results');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => ({ f: join(dir, f), t: statSync(join(dir, f)).mtimeMs }))
    .sort((a, b) => b.t - a.t);
  if (!files.length) throw new Error(`no .cpuprofile in ${dir}`);
  return files[0].f;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  let top = 10;
  let json = false;
  let file;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--top') top = Number(args[++i]);
    else if (args[i] === '--json') json = true;
    else file = args[i];
  }
  file ??= newestProfile();
  const a = analyse(JSON.parse(readFileSync(file, 'utf8')));
  if (json) console.log(JSON.stringify({ file, totalMs: a.totalMs, idleMs: a.idleMs, functions: a.functions.slice(0, top), files: a.files.slice(0, top) }, null, 2));
  else {
    console.log(`${rel(file)}\n`);
    console.log(topTable(a, top));
  }
}
