// Ranking quality of the tool search on the small in-repo sample (test/fixtures/search-sample.json):
// recall@1/@5/@10 and MRR by kind of request, and each miss. Run after `npm run build`:
//   node bench/surface/search-sample.mjs [--misses]
// The unit test asserts the floor; this prints the figures used to tune docs/search.md.
import { readFileSync } from 'node:fs';
import { ToolIndex } from '../../dist/surface/search-index.js';

const sample = JSON.parse(readFileSync(new URL('../../test/fixtures/search-sample.json', import.meta.url), 'utf8'));
const index = ToolIndex.build(sample.tools);
const showMisses = process.argv.includes('--misses');
const by = new Map();
for (const q of sample.queries) {
  const hits = index.search(q.query, { limit: 10 }).map((h) => h.tool.name);
  const rank = hits.findIndex((n) => q.expect.includes(n)) + 1; // 0 = not in the top 10
  for (const kind of [q.kind, 'all']) {
    const s = by.get(kind) ?? { n: 0, r1: 0, r5: 0, r10: 0, mrr: 0 };
    s.n++;
    if (rank === 1) s.r1++;
    if (rank >= 1 && rank <= 5) s.r5++;
    if (rank >= 1) s.r10++;
    if (rank >= 1) s.mrr += 1 / rank;
    by.set(kind, s);
  }
  if (showMisses && rank !== 1) console.log(`rank ${rank || '>10'}: ${q.query} -> ${hits.slice(0, 3).join(', ')}`);
}
const f = (x, n) => (x / n).toFixed(2);
console.log('| kind | n | recall@1 | recall@5 | recall@10 | MRR |\n|---|---|---|---|---|---|');
for (const [kind, s] of by) console.log(`| ${kind} | ${s.n} | ${f(s.r1, s.n)} | ${f(s.r5, s.n)} | ${f(s.r10, s.n)} | ${f(s.mrr, s.n)} |`);
