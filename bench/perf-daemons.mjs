// Where the daemons' own CPU goes (issue 18 target 9), from a `perf record --call-graph fp` of their processes with
// V8's code map, so that JavaScript frames have names:
//
//   BENCH_DAEMON_FLAGS='--perf-basic-prof-only-functions --interpreted-frames-native-stack' \
//     DIAG_PERF=/tmp/d.perf DIAG_PERF_CALLGRAPH=fp DIAG_EPICS=480 npx tsx bench/diag-pg.ts scale 3
//   node bench/perf-daemons.mjs /tmp/d.perf [detail rows per bucket]
//
// Unlike a .cpuprofile (wall-clock samples of the main thread: a socket write that wakes the backend and is
// descheduled meanwhile counts as the write's), perf counts CPU only, in every thread. Main threads (tid = pid):
// each sample goes to the bucket of its nearest JavaScript frame that says whose it is (dist/ frames through the
// bundle's source maps), kernel time to the syscall it is in, and to that frame's owner; samples without one are
// the event loop's (epoll, libuv's reads before the JavaScript callback, microtask plumbing, malloc). Other
// threads: TurboFan compile jobs, GC helpers, the rest.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';

const [file, detailArg] = process.argv.slice(2);
if (!file) throw new Error('usage: node bench/perf-daemons.mjs <perf.data> [detail rows per bucket]');
const DETAIL = Number(detailArg ?? 0);
const out = spawnSync('perf', ['script', '-i', file, '--comm', 'node', '-F', 'comm,pid,tid,ip,sym,dso'], {
  encoding: 'utf8',
  maxBuffer: 2 ** 31,
  stdio: ['ignore', 'pipe', 'ignore'],
}).stdout;

const maps = new Map();
function sourceMapOf(path) {
  if (!maps.has(path)) maps.set(path, existsSync(`${path}.map`) ? new SourceMap(JSON.parse(readFileSync(`${path}.map`, 'utf8'))) : null);
  return maps.get(path);
}
const frameSources = new Map();
/** A JavaScript frame's source file (src/…, node_modules/…, node:…) and function, from V8's `JS:<tier>name url:line:column`. */
function jsFrame(sym) {
  if (frameSources.has(sym)) return frameSources.get(sym);
  let frame = null;
  const m = /^JS:[*~^+-]?(\S*) (.+?):(\d+):(\d+)$/.exec(sym);
  if (m) {
    const [, fn, url, line, column] = m;
    let src = url;
    if (url.includes('/node_modules/')) src = `node_modules/${url.replace(/.*\/node_modules\//, '')}`;
    else if (url.includes('/dist/')) {
      const entry = sourceMapOf(url.replace(/^file:\/\//, ''))?.findEntry(Number(line) - 1, Number(column) - 1);
      src = entry?.originalSource ? entry.originalSource.replace(/^(?:.*?\/)?(src|node_modules)\//, '$1/') : 'dist (unmapped)';
    }
    frame = { fn, src };
  }
  frameSources.set(sym, frame);
  return frame;
}

const PG = 'pg driver (pg, pg-protocol, src/db/pg)';
const HTTP = 'provider call (node:http, provider-http, openai-provider)';
const ENGINE = "engine's JavaScript (engine, ledger, db, domain, operations, logs, events, metrics)";
/** Whose a source file is, or null for a frame that does not say (node's streams, events, timers: look further up). */
function ownerOf(src) {
  if (/^node_modules\/(pg|pg-protocol|pg-pool|pg-types|postgres-array|postgres-date|postgres-interval|postgres-bytea)\//.test(src)) return PG;
  if (/^src\/db\/pg\//.test(src)) return PG;
  if (/^node:(_http|https?$|internal\/http)/.test(src) || /^src\/daemon\/(provider-http|openai-provider)\.ts$/.test(src)) return HTTP;
  if (/^src\//.test(src) || /^node_modules\//.test(src)) return ENGINE;
  return null;
}
/** An engine frame's finer part (detail rows). */
function partOf(src) {
  return src.split('/').slice(0, 3).join('/');
}

const main = new Map();
const other = new Map();
let mainSamples = 0;
let otherSamples = 0;
const count = (map, bucket, detail) => {
  const b = map.get(bucket) ?? { n: 0, detail: new Map() };
  map.set(bucket, b);
  b.n++;
  b.detail.set(detail, (b.detail.get(detail) ?? 0) + 1);
};

function mainThreadSample(frames) {
  const syms = frames.map((f) => f.sym);
  if (syms.some((s) => /v8::internal::(Heap::|Scavenger|MarkCompact|MinorMarkCompact|IncrementalMarking|MarkingVisitor|Sweeper)/.test(s)))
    return count(main, 'GC (main thread)', 'GC');
  let owner = null;
  let ownerFrame = null;
  for (const f of frames) {
    const js = jsFrame(f.sym);
    const o = js && ownerOf(js.src);
    if (o) {
      owner = o;
      ownerFrame = js;
      break;
    }
  }
  const kernel = frames.filter((f) => f.dso === '[kernel.kallsyms]').map((f) => f.sym);
  const entry = kernel.indexOf('do_syscall_64');
  const syscall = entry > 0 ? kernel[entry - 1] : kernel.length > 0 ? 'interrupt' : null;
  const bucket = owner ?? 'event loop without a JavaScript owner (epoll, libuv reads, microtasks, malloc)';
  const detail = syscall ? `kernel: ${syscall}` : ownerFrame ? (owner === ENGINE ? partOf(ownerFrame.src) : `${ownerFrame.src} ${ownerFrame.fn}`) : syms[0];
  count(main, bucket, detail);
}

function otherThreadSample(frames) {
  const syms = frames.map((f) => f.sym).join('\n');
  if (/OptimizingCompileDispatcher|compiler::Pipeline/.test(syms)) count(other, 'TurboFan compile jobs', 'TurboFan');
  else if (/Scavenger|ConcurrentMarking|Sweeper|MarkCompact|Heap::|ArrayBufferSweeper/.test(syms))
    count(other, 'GC helpers (scavenge, marking, sweeping)', 'GC');
  else count(other, 'other', frames[0]?.sym ?? '?');
}

let header = null;
let frames = [];
function endSample() {
  if (header && frames.length > 0) {
    if (header.pid === header.tid) {
      mainSamples++;
      mainThreadSample(frames);
    } else {
      otherSamples++;
      otherThreadSample(frames);
    }
  }
  header = null;
  frames = [];
}
for (const line of out.split('\n')) {
  if (line.trim() === '') {
    endSample();
    continue;
  }
  const h = /^\s*(\S+)\s+(\d+)\/(\d+)/.exec(line);
  if (h && !/^\s+[0-9a-f]+ /.test(line)) {
    endSample();
    header = { pid: h[2], tid: h[3] };
    continue;
  }
  const m = /^\s+[0-9a-f]+ (.+?) \((.+)\)$/.exec(line);
  if (m) frames.push({ sym: m[1].replace(/\+0x[0-9a-f]+$/, ''), dso: m[2] });
}
endSample();

const all = mainSamples + otherSamples;
function print(title, map, n) {
  console.log(`${title}: ${n} samples, ${((100 * n) / all).toFixed(1)} % of the daemons'`);
  for (const [bucket, b] of [...map].sort((a, c) => c[1].n - a[1].n)) {
    console.log(`  ${((100 * b.n) / n).toFixed(1).padStart(5)} %  ${bucket}`);
    for (const [d, k] of [...b.detail].sort((a, c) => c[1] - a[1]).slice(0, DETAIL))
      console.log(`           ${((100 * k) / n).toFixed(1).padStart(5)} %  ${d}`);
  }
}
print('main threads', main, mainSamples);
print('other threads', other, otherSamples);
