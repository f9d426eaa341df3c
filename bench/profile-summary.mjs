// Summarises a .cpuprofile (node --cpu-prof, or BENCH_PROFILE_DIR): self and inclusive time by function.
// Usage: node bench/profile-summary.mjs <file.cpuprofile> [top-self] [top-inclusive]
import { readFileSync } from 'node:fs';
const prof = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const self = new Map();
const dt = prof.timeDeltas;
let total = 0;
for (let i = 0; i < prof.samples.length; i++) {
  const n = byId.get(prof.samples[i]);
  const d = dt[i] ?? 0;
  total += d;
  const cf = n.callFrame;
  const key = `${cf.functionName || '(anon)'} ${cf.url.replace(/.*\/(node_modules\/)?/, '')}:${cf.lineNumber}`;
  self.set(key, (self.get(key) ?? 0) + d);
}
// inclusive: parent links
const parent = new Map();
for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const incl = new Map();
for (let i = 0; i < prof.samples.length; i++) {
  const seen = new Set();
  let id = prof.samples[i];
  const d = dt[i] ?? 0;
  while (id !== undefined) {
    const cf = byId.get(id).callFrame;
    const key = `${cf.functionName || '(anon)'} ${cf.url.replace(/.*\/(node_modules\/)?/, '')}:${cf.lineNumber}`;
    if (!seen.has(key)) {
      seen.add(key);
      incl.set(key, (incl.get(key) ?? 0) + d);
    }
    id = parent.get(id);
  }
}
const top = (m, k) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, k)
    .map(([f, t]) => `${((100 * t) / total).toFixed(1).padStart(5)}%  ${f}`)
    .join('\n');
console.log(`SELF\n${top(self, Number(process.argv[3] ?? 25))}\n\nINCLUSIVE\n${top(incl, Number(process.argv[4] ?? 40))}`);
