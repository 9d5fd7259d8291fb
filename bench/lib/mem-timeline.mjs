// `node --import ./mem-timeline.mjs ...` (bench/idle-memory.mjs --timeline): samples the process's
// memory every 5 ms into $MEM_TIMELINE_OUT, one JSON line each (kB: rss, V8 heap committed and
// used, external, array buffers), with V8's spaces and malloc figures on each new RSS maximum,
// and one line per GC (kind, duration). Where a peak of RSS comes from: what V8 had committed
// and used, and what lay outside its heap, at the sample that saw it.
import { appendFileSync, writeFileSync } from 'node:fs';
import v8 from 'node:v8';
import { PerformanceObserver, constants } from 'node:perf_hooks';
const out = process.env.MEM_TIMELINE_OUT;
writeFileSync(out, '');
let buf = [];
let maxRss = 0;
const KIND = { [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major', [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor', [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incr', [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak' };
function sample() {
  const m = process.memoryUsage();
  const rec = { t: Date.now(), rss: m.rss >> 10, heapTotal: m.heapTotal >> 10, heapUsed: m.heapUsed >> 10, ext: m.external >> 10, ab: m.arrayBuffers >> 10 };
  if (m.rss > maxRss) {
    maxRss = m.rss;
    rec.max = true;
    rec.spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, [s.space_size >> 10, s.space_used_size >> 10, s.physical_space_size >> 10]]));
    const h = v8.getHeapStatistics();
    rec.malloced = h.malloced_memory >> 10;
    rec.peakMalloced = h.peak_malloced_memory >> 10;
  }
  buf.push(JSON.stringify(rec));
  if (buf.length >= 50) flush();
}
function flush() {
  if (buf.length) appendFileSync(out, buf.join('\n') + '\n');
  buf = [];
}
setInterval(sample, 5).unref();
setInterval(flush, 100).unref();
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) buf.push(JSON.stringify({ t: Math.round(performance.timeOrigin + e.startTime), gc: KIND[e.detail?.kind ?? e.kind] ?? String(e.detail?.kind), ms: +e.duration.toFixed(2) }));
}).observe({ entryTypes: ['gc'] });
process.on('exit', flush);
