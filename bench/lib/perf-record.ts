/**
 * DIAG_PERF=<file> (bench/diag-pg.ts): a `perf record` of a Postgres server's processes and the daemons over a measured
 * phase only (not the server's start, the migrations or the seed), to read the server's own functions:
 * `perf report -i <file> --comm postgres --sort sym`. DIAG_PERF_FREQ sets the sampling rate (999); DIAG_PERF_CALLGRAPH=1
 * records dwarf call graphs, DIAG_PERF_CALLGRAPH=fp frame pointers (see diag-pg.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { childrenOf, postmasterPid } from './proc.js';

/** Starts recording the server on `port` and `daemonPids`, or does nothing without DIAG_PERF. */
export function startPerf(port: number, daemonPids: readonly number[] = []): ChildProcess | undefined {
  const out = process.env.DIAG_PERF;
  if (!out) return undefined;
  // The server's processes (new backends are forked by the postmaster: inherited) and our daemons only —
  // other servers on the machine are not ours to count.
  const postmaster = postmasterPid(port);
  const pids = [postmaster, ...childrenOf(postmaster), ...daemonPids].join(',');
  return spawn(
    'perf',
    [
      'record',
      '-p',
      pids,
      '-F',
      process.env.DIAG_PERF_FREQ ?? '999',
      '-o',
      out,
      ...(process.env.DIAG_PERF_CALLGRAPH ? ['--call-graph', process.env.DIAG_PERF_CALLGRAPH === 'fp' ? 'fp' : 'dwarf,16384'] : []),
    ],
    {
      stdio: 'ignore',
    },
  );
}

/** Stops a recording (SIGINT: perf writes its file) and waits for it. */
export async function stopPerf(perf: ChildProcess | undefined): Promise<void> {
  if (!perf) return;
  const done = new Promise((resolve) => perf.once('exit', resolve));
  perf.kill('SIGINT');
  await done;
}
