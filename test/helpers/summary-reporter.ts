// Prints one plain closing line, `N passed, N failed, N skipped`, after vitest's own summary, so
// tools that read a run's last line (CI) need not parse vitest's coloured table. Above it, each
// distinct reason a test gave for skipping itself (`ctx.skip(note)`), so a skip is never silent.

import type { Reporter, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandled: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = unhandled.length;
    let skipped = 0;
    const notes = new Map<string, number>();
    for (const m of modules) {
      // A file that failed outside any test (its beforeAll threw, it did not import) fails the
      // run: count it, or the closing line would say 0 failed for a red run.
      if (m.state() === 'failed' && ![...m.children.allTests()].some((t) => t.result().state === 'failed')) failed++;
      for (const t of m.children.allTests()) {
        const r = t.result();
        if (r.state === 'passed') passed++;
        else if (r.state === 'failed') failed++;
        else {
          skipped++;
          if (r.state === 'skipped' && r.note) notes.set(r.note, (notes.get(r.note) ?? 0) + 1);
        }
      }
    }
    for (const [note, n] of notes) process.stdout.write(`\nskipped ${n} test(s): ${note}`);
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
