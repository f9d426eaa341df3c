// `node --max-old-space-size=4000 bench/heap-summary.mjs <file.heapsnapshot>`: live JS heap of a snapshot,
// by object kind (self size and count), largest first. Snapshots come from
// `BENCH_HEAPSNAP=<dir> npm run bench -- --only memory` (taken at the peak of the memory target).
import { readFileSync } from 'node:fs';
const snap = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const m = snap.snapshot.meta;
const nf = m.node_fields;
const N = nf.length;
const types = m.node_types[0];
const strings = snap.strings;
const nodes = snap.nodes;
const iType = nf.indexOf('type'),
  iName = nf.indexOf('name'),
  iSize = nf.indexOf('self_size');
const agg = new Map();
let total = 0;
for (let i = 0; i < nodes.length; i += N) {
  const t = types[nodes[i + iType]];
  let name = strings[nodes[i + iName]];
  if (t === 'string' || t === 'concatenated string' || t === 'sliced string') name = '(string)';
  else if (t === 'code') name = '(code)';
  else if (t === 'array') name = `(array) ${name.slice(0, 30)}`;
  else if (t === 'closure') name = '(closure)';
  else if (t === 'hidden') name = `(hidden) ${name.slice(0, 30)}`;
  else if (t === 'native') name = `(native) ${name.slice(0, 40)}`;
  else name = `${t} ${name.slice(0, 50)}`;
  const e = agg.get(name) ?? [0, 0];
  e[0] += nodes[i + iSize];
  e[1]++;
  agg.set(name, e);
  total += nodes[i + iSize];
}
console.log('total MiB', (total / 2 ** 20).toFixed(1));
for (const [k, [s, n]] of [...agg].sort((a, b) => b[1][0] - a[1][0]).slice(0, 40)) console.log((s / 2 ** 20).toFixed(2).padStart(7), String(n).padStart(8), k);
