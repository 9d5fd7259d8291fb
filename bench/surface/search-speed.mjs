// Speed of the tool search engine on 1 000 synthetic tools: index build and search latency.
// Targets (issue 20): build <= 100 ms, search p50 <= 2 ms. Run after `npm run build`:
//   node bench/surface/search-speed.mjs [--tools 1000] [--searches 2000]
// Deterministic: the catalogue and the requests come from a fixed-seed generator.
import { ToolIndex } from '../../dist/surface/search-index.js';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const TOOLS = arg('--tools', 1000);
const SEARCHES = arg('--searches', 2000);

let seed = 20;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];

const servers = ['github', 'gitlab', 'linear', 'jira', 'fs', 'git', 'browser', 'postgres', 'sqlite', 'mysql',
  'slack', 'notion', 'docs', 'charts', 'time', 'fetch', 'memory', 'aws', 'gcp', 'stripe', 'sentry', 'figma',
  'calendar', 'gmail', 'drive', 'kubernetes', 'docker', 'redis', 'search', 'weather'];
const verbs = ['get', 'list', 'create', 'update', 'delete', 'search', 'add', 'remove', 'run', 'send', 'read',
  'write', 'move', 'copy', 'export', 'import', 'archive', 'assign', 'close', 'open', 'merge', 'render', 'query'];
const nouns = ['issue', 'comment', 'file', 'directory', 'branch', 'commit', 'pull_request', 'message', 'channel',
  'page', 'database', 'table', 'row', 'user', 'team', 'project', 'event', 'invoice', 'customer', 'bucket',
  'object', 'instance', 'pod', 'container', 'image', 'chart', 'dashboard', 'alert', 'label', 'milestone',
  'document', 'folder', 'note', 'record', 'webhook', 'secret', 'deployment', 'log', 'metric', 'screenshot'];
const params = ['id', 'name', 'title', 'body', 'query', 'limit', 'cursor', 'owner', 'repo', 'path', 'url',
  'content', 'labels', 'assignee', 'state', 'since', 'until', 'timezone', 'format', 'page', 'pageSize',
  'teamId', 'projectId', 'channel_id', 'message_text', 'sql', 'region', 'namespace', 'tag', 'dryRun'];
const adj = ['existing', 'new', 'recent', 'open', 'archived', 'shared', 'private', 'public', 'all', 'matching'];

const tools = [];
const seen = new Set();
while (tools.length < TOOLS) {
  const server = pick(servers);
  const verb = pick(verbs);
  const noun = pick(nouns);
  const style = rand();
  const own = style < 0.6 ? `${verb}_${noun}` : style < 0.85 ? `${verb}${noun[0].toUpperCase()}${noun.slice(1).replace(/_(.)/g, (_m, c) => c.toUpperCase())}` : `${verb}-${noun.replace(/_/g, '-')}`;
  const name = `${server}__${own}${seen.has(`${server}__${own}`) ? `_${tools.length}` : ''}`;
  seen.add(name);
  const properties = {};
  const n = 1 + Math.floor(rand() * 6);
  for (let i = 0; i < n; i++) {
    const p = pick(params);
    properties[p] = { type: 'string', description: `The ${p.replace(/_/g, ' ')} of the ${pick(adj)} ${noun.replace(/_/g, ' ')}.` };
  }
  tools.push({
    name,
    server,
    ...(rand() < 0.3 ? { title: `${verb[0].toUpperCase()}${verb.slice(1)} ${noun.replace(/_/g, ' ')}` } : {}),
    description: `${verb[0].toUpperCase()}${verb.slice(1)} ${pick(adj)} ${noun.replace(/_/g, ' ')}s in ${server}. ` +
      `Use this to ${pick(verbs)} a ${pick(nouns).replace(/_/g, ' ')} when the ${pick(adj)} ${noun.replace(/_/g, ' ')} changes; ` +
      `returns the ${pick(params)} and ${pick(params)} of each result.`,
    inputSchema: { type: 'object', properties, required: [Object.keys(properties)[0]] },
  });
}
const requests = [];
for (let i = 0; i < 200; i++) {
  const r = rand();
  requests.push(r < 0.4 ? `${pick(verbs)} the ${pick(adj)} ${pick(nouns).replace(/_/g, ' ')}`
    : r < 0.8 ? `can you please ${pick(verbs)} a ${pick(nouns).replace(/_/g, ' ')} in ${pick(servers)} with its ${pick(params)}`
    : `${pick(nouns)} ${pick(nouns)}`);
}

const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))];
// Warm the code (JIT) on throw-away builds, as a long-running daemon would be.
for (let i = 0; i < 3; i++) ToolIndex.build(tools).search("warm up");
// Wall time and this process's CPU time per build: on a loaded machine (shared CI, 2 cores) the
// wall figure includes time spent waiting for a core; the CPU figure is the work itself.
const builds = [];
const buildCpu = [];
let index;
for (let i = 0; i < 15; i++) {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  index = ToolIndex.build(tools);
  builds.push(Number(process.hrtime.bigint() - t0) / 1e6);
  const c = process.cpuUsage(c0);
  buildCpu.push((c.user + c.system) / 1e3);
}
builds.sort((a, b) => a - b);
buildCpu.sort((a, b) => a - b);
const times = [];
let hits = 0;
for (let i = 0; i < SEARCHES; i++) {
  const q = requests[i % requests.length];
  const t0 = process.hrtime.bigint();
  hits += index.search(q).length;
  times.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
times.sort((a, b) => a - b);
const long = 'x'.repeat(10_240).replace(/x{8}/g, 'issue ab ');
const t0 = process.hrtime.bigint();
index.search(long);
const longMs = Number(process.hrtime.bigint() - t0) / 1e6;
const f = (x) => x.toFixed(2);
console.log(`tools ${index.size}, searches ${SEARCHES} (mean ${(hits / SEARCHES).toFixed(1)} hits)`);
console.log(`build ms: min ${f(builds[0])}, median ${f(pct(builds, 0.5))}, max ${f(builds.at(-1))}; CPU ms median ${f(pct(buildCpu, 0.5))} (target <= 100)`);
console.log(`search ms: p50 ${f(pct(times, 0.5))}, p90 ${f(pct(times, 0.9))}, p99 ${f(pct(times, 0.99))}, max ${f(times.at(-1))} (target p50 <= 2)`);
console.log(`10 KB request: ${f(longMs)} ms`);
console.log(`node ${process.version}, load ${(await import('node:os')).loadavg().map((x) => x.toFixed(2)).join(' ')}`);
