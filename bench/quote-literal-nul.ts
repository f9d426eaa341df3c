/**
 * What the COMMIT query's NUL check costs per literal (src/db/pg/commit-query.ts `quoteLiteral`):
 * `npx tsx bench/quote-literal-nul.ts`. Results in bench/README.md (2026-11-25, issue-18-pgdata).
 */
import { quoteLiteral } from '../src/db/pg/commit-query.js';
import { simulatedStories } from '../src/operations/builtin/story_generate_epic/simulate.js';

// 64 distinct ledger payloads of ~2 KB (a response body with its stories), as the COMMIT query inlines them.
const payloads = Array.from({ length: 64 }, (_, i) => JSON.stringify({ body: { stories: simulatedStories(`E${i}`, `Checkout and payment flow ${i}`) } }));
function time(label: string, n: number, fn: (v: string) => unknown) {
  let sink = 0;
  for (let i = 0; i < n / 10; i++) sink += fn(payloads[i & 63]!) ? 1 : 0;
  const runs: number[] = [];
  for (let r = 0; r < 9; r++) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) sink += fn(payloads[i & 63]!) ? 1 : 0;
    runs.push(Number(process.hrtime.bigint() - t) / n);
  }
  runs.sort((a, b) => a - b);
  console.log(`${label}: median ${runs[4]!.toFixed(1)} ns per payload (min ${runs[0]!.toFixed(1)}, max ${runs[8]!.toFixed(1)})${sink < 0 ? '' : ''}`);
}
console.log(`payloads: ${payloads.length}, ${payloads[0]!.length} chars each (about)`);
time("the check: value.includes('\\0')", 200_000, (v) => v.includes('\0'));
time('quoteLiteral (the check, then the quoting)', 200_000, (v) => quoteLiteral(v));
time("for scale: the quote-doubling replaceAll of a payload holding '", 200_000, (v) => v.replaceAll('"', "''"));
