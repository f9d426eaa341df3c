/**
 * V8's own log of a daemon's JIT (`--log-code --log-deopt`), read for diag-pg's DIAG_V8_LOG: how many functions TurboFan
 * compiled and how many of its codes were thrown away (deopts) inside a window of the daemon's life (its measured run,
 * after the warm-up), which functions, and whether any function was optimized again and again (a deopt-reopt loop).
 *
 * The log's timestamps are µs from the logger's start, which is the process's start to within node's bootstrap (tens of
 * ms): a window is given in ms from the daemon's spawn, which is precise enough to split a warm-up of seconds from the
 * run after it. Positions in dist/ bundles are mapped back to src/ through the bundle's source map.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { SourceMap } from 'node:module';

/** The flags that make a daemon write the log this reads (one file per process: `%p` is its pid). */
export function v8LogFlags(dir: string): string[] {
  return ['--log-code', '--log-deopt', `--logfile=${dir}/v8-%p.log`, '--no-logfile-per-isolate'];
}

/** A window of the daemon's life, ms from its spawn. */
interface LogWindow {
  readonly fromMs: number;
  readonly toMs: number;
}

/** What TurboFan did in a window: compiles and deopts, each keyed by function (name and source position). */
interface JitCounts {
  /** TurboFan compiles (code-creation with state `*`), OSR included. */
  readonly compiles: number;
  /** Their machine code's bytes (a rough measure of the compile's work: TurboFan's time grows with the graph it built). */
  readonly codeBytes: number;
  /** Of the compiles, those of a function this process had compiled before (its optimized code thrown away since). */
  readonly recompiles: number;
  /**
   * Of the recompiles, those with no deopt of the function's code since its previous compile: either the GC dropped
   * that code (a feedback vector holds its optimized code weakly: a closure made anew per call, none of which lives
   * across a full GC, loses it there) or the previous compile was an OSR one and this is the function's normal entry's
   * (the log does not tell the two apart, so this is an upper bound on GC drops).
   */
  readonly noDeoptSince: number;
  readonly noDeoptSinceByFunction: Map<string, number>;
  readonly deopts: number;
  readonly compilesByFunction: Map<string, number>;
  /** Keyed by `<function whose code was thrown away> | <kind>: <reason> at <position of the failed check>`. */
  readonly deoptsBySite: Map<string, number>;
}

const sourceMaps = new Map<string, SourceMap | null>();

/** `file:///…/dist/x.js:12:34` → `src/…/y.ts:5:6` when the bundle has a source map; other positions are shortened. */
function sourcePosition(position: string): string {
  const m = /^(?:file:\/\/)?(\/.*?):(\d+):(\d+)$/.exec(position);
  if (!m) return position;
  const [, file, line, column] = m as unknown as [string, string, string, string];
  const nodeModules = file.lastIndexOf('/node_modules/');
  if (nodeModules >= 0) return `${file.slice(nodeModules + 14)}:${line}:${column}`;
  if (!sourceMaps.has(file)) {
    try {
      sourceMaps.set(file, new SourceMap(JSON.parse(readFileSync(`${file}.map`, 'utf8'))));
    } catch {
      sourceMaps.set(file, null);
    }
  }
  const map = sourceMaps.get(file);
  const entry = map?.findEntry(Number(line) - 1, Number(column) - 1);
  if (!entry || !('originalSource' in entry)) return `${file.slice(file.lastIndexOf('/') + 1)}:${line}:${column}`;
  const source = entry.originalSource.replace(/^.*?\/(src|node_modules)\//, '$1/');
  return `${source}:${entry.originalLine + 1}:${entry.originalColumn + 1}`;
}

/** A code-creation name, `fn file:line:col` (or `fn <anonymous>`), with its position mapped. */
function functionName(name: string): string {
  const space = name.lastIndexOf(' ');
  return space < 0 ? name : `${name.slice(0, space) || '(anonymous)'} ${sourcePosition(name.slice(space + 1))}`;
}

/** Splits a log line at its commas (V8 writes a comma inside a name as `\x2C`). */
function fields(line: string): string[] {
  return line.split(',');
}

/** Reads one daemon's log and counts TurboFan's compiles and deopts in each window. */
function countJit(logFile: string, windows: readonly LogWindow[]): JitCounts[] {
  const counts = windows.map(() => ({
    compiles: 0,
    codeBytes: 0,
    recompiles: 0,
    noDeoptSince: 0,
    noDeoptSinceByFunction: new Map<string, number>(),
    deopts: 0,
    compilesByFunction: new Map<string, number>(),
    deoptsBySite: new Map<string, number>(),
  }));
  const codeAt = new Map<string, string>(); // code address → the function's name, for the deopts (which name the code only)
  const compiledBefore = new Set<string>();
  const deoptedSince = new Set<string>(); // functions whose last optimized code a deopt threw away
  const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  const inWindow = (micros: number) => windows.findIndex((w) => micros >= w.fromMs * 1000 && micros < w.toMs * 1000);
  for (const line of readFileSync(logFile, 'utf8').split('\n')) {
    if (line.startsWith('code-creation,JS,')) {
      // code-creation,JS,<kind>,<µs>,<address>,<size>,<name>,<shared info address>,<state: ~ bytecode, ^ Sparkplug, + Maglev, * TurboFan>
      const f = fields(line);
      if (f[8] !== '*') continue;
      const name = functionName(f[6]!);
      codeAt.set(f[4]!, name);
      const w = inWindow(Number(f[3]));
      const again = compiledBefore.has(name);
      const noDeopt = again && !deoptedSince.has(name);
      compiledBefore.add(name);
      deoptedSince.delete(name);
      if (w < 0) continue;
      counts[w]!.compiles++;
      if (again) counts[w]!.recompiles++;
      if (noDeopt) {
        counts[w]!.noDeoptSince++;
        bump(counts[w]!.noDeoptSinceByFunction, name);
      }
      counts[w]!.codeBytes += Number(f[5]);
      bump(counts[w]!.compilesByFunction, name);
    } else if (line.startsWith('code-move,')) {
      const f = fields(line);
      const name = codeAt.get(f[1]!);
      if (name !== undefined) codeAt.set(f[2]!, name);
    } else if (line.startsWith('code-deopt,')) {
      // code-deopt,<µs>,<size>,<code address>,<inlining id>,<script offset>,<kind>,<position of the failed check>,<reason>
      const f = fields(line);
      const deopted = codeAt.get(f[3]!);
      if (deopted !== undefined) deoptedSince.add(deopted);
      const w = inWindow(Number(f[1]));
      if (w < 0) continue;
      counts[w]!.deopts++;
      const at = sourcePosition(f[7]!.replace(/^<|>$/g, ''));
      bump(counts[w]!.deoptsBySite, `${codeAt.get(f[3]!) ?? f[3]} | ${f[6]}: ${f.slice(8).join(',')} at ${at}`);
    }
  }
  return counts;
}

function top(m: Map<string, number>, n: number): [string, number][] {
  return [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, n);
}

function lines(m: Map<string, number>, n = Infinity): string[] {
  return top(m, n).map(([k, v]) => `    ${String(v).padStart(4)}  ${k}`);
}

/**
 * Prints each daemon's counts per window and, for the last window (summed over the daemons), the functions
 * compiled more than once in one daemon, the deopt sites and the functions compiled most; `listFile` gets every
 * window's full lists.
 */
function printJit(labels: readonly string[], perDaemon: readonly JitCounts[][], items: number, listFile: string): void {
  console.log(`TurboFan per daemon (V8 log, DIAG_V8_LOG), windows: ${labels.join(' / ')}`);
  for (const [i, windows] of perDaemon.entries()) {
    console.log(
      `  daemon ${i}: compiles ${windows.map((c) => c.compiles).join(' / ')} (of them recompiles ${windows.map((c) => c.recompiles).join(' / ')}, of which with no deopt since (GC drop or after OSR) ${windows.map((c) => c.noDeoptSince).join(' / ')}; code KB ${windows.map((c) => Math.round(c.codeBytes / 1024)).join(' / ')}); deopts ${windows.map((c) => c.deopts).join(' / ')}`,
    );
  }
  const sum = (w: number) => {
    const again = new Map<string, number>();
    const sites = new Map<string, number>();
    const compiled = new Map<string, number>();
    const noDeopt = new Map<string, number>();
    for (const windows of perDaemon) {
      const c = windows[w]!;
      for (const [k, v] of c.noDeoptSinceByFunction) noDeopt.set(k, (noDeopt.get(k) ?? 0) + v);
      for (const [k, v] of c.compilesByFunction) {
        compiled.set(k, (compiled.get(k) ?? 0) + v);
        if (v > 1) again.set(k, (again.get(k) ?? 0) + v);
      }
      for (const [k, v] of c.deoptsBySite) sites.set(k, (sites.get(k) ?? 0) + v);
    }
    return { again, sites, compiled, noDeopt };
  };
  const out: string[] = [];
  for (const [w, label] of labels.entries()) {
    const { again, sites, compiled, noDeopt } = sum(w);
    out.push(`== ${label}: functions compiled more than once in one daemon`, ...lines(again), `== ${label}: deopts`, ...lines(sites));
    out.push(`== ${label}: recompiled with no deopt since (GC drop or after OSR)`, ...lines(noDeopt));
    out.push(`== ${label}: functions compiled (summed over the daemons)`, ...lines(compiled));
  }
  writeFileSync(listFile, `${out.join('\n')}\n`);
  const last = labels.length - 1;
  const { again, sites, compiled, noDeopt } = sum(last);
  const total = perDaemon.reduce((a, w) => a + w[last]!.compiles, 0);
  console.log(
    `  ${labels[last]}, summed over the daemons: ${total} compiles of ${compiled.size} functions (${((1000 * total) / items).toFixed(1)} per 1,000 items), ${perDaemon.reduce((a, w) => a + w[last]!.deopts, 0)} deopts; every window's lists: ${listFile}`,
  );
  console.log(`  functions compiled more than once in one daemon (compiles, summed):`, ...lines(again, 15).map((l) => `\n${l}`));
  console.log(`  deopts by function | reason at the failed check:`, ...lines(sites, 15).map((l) => `\n${l}`));
  console.log(`  recompiled with no deopt since its last compile (GC drop or after OSR):`, ...lines(noDeopt, 15).map((l) => `\n${l}`));
  console.log(`  functions compiled most:`, ...lines(compiled, 15).map((l) => `\n${l}`));
}

/** When the diag's phases ended (Date.now()): the warm-up, the projects' import (the run's start), the run's generate-all, the run. */
export interface RunMarks {
  readonly warmed: number;
  readonly started: number;
  readonly queued: number;
  readonly ended: number;
}

/** A daemon as its log knows it: its pid (the log's name) and when it was spawned (Date.now()). */
export interface LoggedDaemon {
  readonly pid: number;
  readonly spawnedAt: number;
}

/**
 * Reads each daemon's log in `dir` and prints its TurboFan counts per window: its start and warm-up, the projects'
 * import, the run's generate-all, the run after it (`printJit`). Call it once the daemons have exited: V8 buffers its
 * file output, so a live process's log lacks its last lines.
 */
export function reportDaemonJit(dir: string, daemons: readonly LoggedDaemon[], marks: RunMarks, items: number): void {
  const windows = (d: LoggedDaemon): LogWindow[] => [
    { fromMs: 0, toMs: marks.warmed - d.spawnedAt },
    { fromMs: marks.warmed - d.spawnedAt, toMs: marks.started - d.spawnedAt },
    { fromMs: marks.started - d.spawnedAt, toMs: marks.queued - d.spawnedAt },
    { fromMs: marks.queued - d.spawnedAt, toMs: marks.ended - d.spawnedAt },
  ];
  const counts = daemons.map((d) => countJit(`${dir}/v8-${d.pid}.log`, windows(d)));
  printJit(['start and warm-up', "the run's projects' import", "the run's generate-all", 'the run after it'], counts, items, `${dir}/jit-lists.txt`);
}
