/**
 * What the checks for text neither backend stores as given (U+0000, lone surrogates) cost per call
 * (src/domain/storable-text.ts): `npx tsx bench/nul-checks.ts`. Results of the NUL checks alone in bench/README.md
 * (2026-11-25 17:28 UTC, issue-18-pgnul); with the surrogate checks, in commit 97c8155's message (load 7): a
 * 6-field input 310 ns, an answer's pre-check 0.97 µs against its JSON.parse 5.2 µs.
 */
import { findUnstorableText, mayHoldUnstorableText } from '../src/domain/storable-text.js';
import { simulatedStories } from '../src/operations/builtin/story_generate_epic/simulate.js';
const submit = { project_id: 'acme', epic_id: 'E123', force: false, deadline_ms: null, created_by: 'alice', traceparent: null };
const answer = JSON.stringify({ stories: simulatedStories('E1', 'Checkout and payment flow') });
const project = {
  file: {
    id: 'big',
    name: 'Big',
    epics: Array.from({ length: 2000 }, (_, i) => ({ id: `E${i}`, title: `Epic number ${i}`, description: `Everything about epic ${i}.` })),
  },
};
function time(label: string, n: number, fn: () => unknown) {
  for (let i = 0; i < n / 10; i++) fn();
  const runs: number[] = [];
  for (let r = 0; r < 7; r++) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) fn();
    runs.push(Number(process.hrtime.bigint() - t) / n);
  }
  runs.sort((a, b) => a - b);
  console.log(`${label}: median ${runs[3]!.toFixed(1)} ns per call (min ${runs[0]!.toFixed(1)}, max ${runs[6]!.toFixed(1)})`);
}
let sink = 0;
time('findUnstorableText(generate.epic input, 6 fields)', 1_000_000, () => (sink += findUnstorableText(submit) === null ? 1 : 0));
time(`answer check: mayHoldUnstorableText on a ${answer.length}-char story answer`, 1_000_000, () => (sink += mayHoldUnstorableText(answer) ? 1 : 0));
time('JSON.parse of the same answer (for scale: checkAnswer already does it)', 100_000, () => (sink += JSON.parse(answer) ? 1 : 0));
time('findUnstorableText(project import of 2,000 epics)', 2_000, () => (sink += findUnstorableText(project) === null ? 1 : 0));
console.log(sink > 0 ? '' : 'x');
