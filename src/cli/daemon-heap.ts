import { totalmem } from 'node:os';
import { join } from 'node:path';

const GiB = 2 ** 30;

/**
 * The node flags the daemon process is started with — by `combine daemon start`, by the systemd unit
 * `combine daemon install` writes and by the benchmarks (a `combine daemon run` typed in a terminal runs
 * on V8's defaults).
 * - `--max-semi-space-size=8`: V8's young generation grows to 2 × 16 MiB semi-spaces, resident for the
 *   daemon's life once a burst has grown it; 2 × 8 MiB takes ~10 MiB off the peak of a daemon with 2,000
 *   calls open (issue 20 target 3). GC time over that run, A/B in the same minutes (bench/README.md,
 *   2026-11-24 17:02–17:08): 1.2–1.4× V8's default with 2 × 8 MiB, 1.5–1.8× with 2 × 4 MiB (which takes
 *   ~8 MiB more), noisy under load: 8 is the setting closest to flat.
 * - `--max-old-space-size=2047` on a host with 8 GiB of memory or more (`oldSpaceFlags`).
 */
export const DAEMON_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=8', ...oldSpaceFlags(totalmem())];

/**
 * After each full GC, V8 lets the old generation grow to its live size times a factor of up to 4 before
 * the next one when its heap limit is 2 GiB or more — what it gives a host with 8 GiB of memory or more
 * (a quarter of it, 4 GiB from 16 GiB) — and of up to 1.3–2 below that, by the limit. A burst of 2,000
 * calls started on an idle daemon (~15 MiB live) then grew the old space to ~60 MiB before its first full
 * GC, ~25 MiB of it garbage. With the limit at 2047 MiB the factor is at most 2: a full GC comes in the
 * middle of the burst, and the daemon's peak RSS with 2,000 calls open is ~8 MiB lower at the same GC time
 * (bench/README.md, 2026-11-25 17:20–18:35). The limit is then the one V8 gives an 8 GiB host: it holds
 * ~150,000 open calls (~13 KiB each), more than `engine.max_in_flight` allows (100,000). A smaller host
 * keeps V8's own limit (a quarter of its memory, factor ≤ 2), which this flag would raise.
 */
export function oldSpaceFlags(hostMemoryBytes: number): string[] {
  return hostMemoryBytes >= 8 * GiB ? ['--max-old-space-size=2047'] : [];
}

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
