import { join } from 'node:path';

/**
 * The node flags the daemon process is started with — by `combine daemon start`, by the systemd unit
 * `combine daemon install` writes and by the benchmarks (a `combine daemon run` typed in a terminal runs
 * on V8's defaults). V8's young generation grows to 2 × 16 MiB semi-spaces, resident for the daemon's life once
 * a burst has grown it; 2 × 8 MiB takes ~10 MiB off the peak of a daemon with 2,000 calls open (issue 20
 * target 3). GC time over that run, A/B in the same minutes (bench/README.md, 2026-11-24 17:02–17:08):
 * 1.2–1.4× V8's default with 2 × 8 MiB, 1.5–1.8× with 2 × 4 MiB (which takes ~8 MiB more), noisy under
 * load: 8 is the setting closest to flat. No cap on the old generation: a daemon with a larger
 * max_in_flight must grow rather than run out of heap.
 */
export const DAEMON_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=8'];

/**
 * The environment variables the daemon process is started with (by `combine daemon start`, the systemd
 * unit and the benchmarks), under the caller's own: glibc's malloc arenas capped at 1. By default glibc
 * gives each thread that allocates (libuv's pool, V8's GC and compiler workers) an arena of its own, up to
 * 8 per core, and what one frees the others do not reuse. With 2 the daemon's peak with 2,000 calls open
 * is ~7 MiB lower at the same GC time (bench/README.md, 2026-11-24 22:24–22:26); with 1, ~4 MiB lower again,
 * at the same GC time and ack rate (4 alternated pairs, 2026-11-25 01:43–01:47). The main thread does
 * nearly all of the daemon's allocating, so one arena's lock is not contended (issue 20 target 3).
 */
export const DAEMON_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '1' };

/** `env` with DAEMON_ENV under it: a value the user set (in the environment or daemon.env) is kept. */
export function daemonEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { ...DAEMON_ENV, ...env };
}

/**
 * The daemon process's argv after `node`: its node flags, then `extraNodeFlags` (the later of two
 * settings of one flag wins), then its own entry in `distDir`, daemon-run.js (daemon/daemon-run.ts: the
 * daemon without the CLI's bundle), and `args` (`--metrics-port`, `--http-port`, as `combine daemon run` takes them).
 */
export function daemonArgv(distDir: string, args: readonly string[] = [], extraNodeFlags: readonly string[] = []): string[] {
  return [...DAEMON_NODE_FLAGS, ...extraNodeFlags, join(distDir, 'daemon-run.js'), ...args];
}
