import { join } from 'node:path';

/**
 * The node flags the daemon process is started with — by `combine daemon start`, by the systemd unit
 * `combine daemon install` writes and by the benchmarks (a `combine daemon run` typed in a terminal runs
 * on V8's defaults). V8's young generation grows to 2 × 16 MiB semi-spaces, resident for the daemon's life once
 * a burst has grown it; 2 × 8 MiB takes ~10 MiB off the peak of a daemon with 2,000 calls open (issue 20
 * target 3). GC time over that run, A/B in the same minutes (bench/README.md, 2026-11-24 17:02–17:08):
 * 1.2–1.4× V8's default with 2 × 8 MiB, 1.5–1.8× with 2 × 4 MiB (which takes ~8 MiB more), noisy under
 * load: 8 is the setting closest to flat. The old generation's cap goes in NODE_OPTIONS (`daemonNodeOptions`),
 * where a heap size the user sets wins.
 */
export const DAEMON_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=8'];

/**
 * The daemon's old-generation cap. After each full GC, V8 lets the old generation grow to its live size
 * times a factor before the next one: up to 4 when the old generation's limit is V8's maximum of 2048 MiB
 * or more, and 1.3 + 0.7 × (limit − 256 MiB) / 1792 MiB (≤ 2) below it. V8's own limit is half of the
 * memory it sizes from (the host's, or the cgroup's when that is lower), capped at 2048 MiB below 16 GiB and
 * 4096 MiB above: the factor is 4 from 4 GiB of memory on. A burst of 2,000 calls started on an idle daemon
 * (~15 MiB live) then grew the old space to ~60 MiB before its first full GC, ~25 MiB of it garbage. At
 * 2047 MiB — 1 MiB under V8's cut-off, which gives the factor 2; 2048 would change nothing — a full GC comes
 * in the middle of the burst, and the daemon's peak RSS with 2,000 calls open is ~8 MiB lower at the same
 * GC time (bench/README.md, 2026-11-25 17:20–18:35). 2047 MiB holds ~150,000 open calls (~13 KiB each),
 * more than `engine.max_in_flight` allows (100,000). Given only where it lowers V8's own limit
 * (`capLowersHeapLimit`), never where the user set a heap size (`setsHeapSize`).
 */
export const OLD_SPACE_CAP = '--max-old-space-size=2047';

/** Whether a NODE_OPTIONS value sets V8's heap size: the user's choice, which the daemon's cap never overrides. */
export function setsHeapSize(nodeOptions: string | undefined): boolean {
  return /--max[-_](old[-_]space|heap)[-_]size\b/.test(nodeOptions ?? '');
}

/**
 * The daemon's NODE_OPTIONS: the user's `nodeOptions`, with OLD_SPACE_CAP after them when `capLowers`
 * (`capLowersHeapLimit`) and they set no heap size.
 */
export function daemonNodeOptions(nodeOptions: string | undefined, capLowers: boolean): string | undefined {
  if (!capLowers || setsHeapSize(nodeOptions)) return nodeOptions;
  return nodeOptions ? `${nodeOptions} ${OLD_SPACE_CAP}` : OLD_SPACE_CAP;
}

let capLowers: Promise<boolean> | undefined;

/** A probe that has not answered in this long counts as failed: a daemon start never hangs on it. */
const PROBE_TIMEOUT_MS = 5000;

/**
 * Whether OLD_SPACE_CAP lowers the heap limit V8 gives a node process on this host, in this container: V8's
 * word, not a formula — two nodes started here, both without the caller's NODE_OPTIONS (a heap size set in
 * the shell that runs `daemon install` must not decide the unit's cap), one on V8's defaults (which V8 sizes
 * from `process.constrainedMemory()` as well as the host's memory) and one with the cap, run at once; their
 * `heap_size_limit`s compared. Both have the same young generation, which the old-space flag leaves alone.
 * False if either cannot be run in PROBE_TIMEOUT_MS: the daemon then keeps V8's defaults. Measured once per
 * process, by `daemon start` and `daemon install` only (~80 ms).
 */
export function capLowersHeapLimit(): Promise<boolean> {
  capLowers ??= (async () => {
    // Loaded here, not at the top: only a daemon start or install needs it (an `await import(`, which the
    // CLI bundle's build rewrites: scripts/build.mjs).
    const { execFile } = await import('node:child_process');
    const limit = (flags: string[]) =>
      new Promise<number>((resolve) => {
        const probe = [...flags, '-p', 'v8.getHeapStatistics().heap_size_limit'];
        const env = { ...process.env, NODE_OPTIONS: '' };
        execFile(process.execPath, probe, { env, timeout: PROBE_TIMEOUT_MS }, (err, out) => resolve(err ? Number.NaN : Number(out)));
      });
    const [defaults, capped] = await Promise.all([limit([]), limit([OLD_SPACE_CAP])]);
    return defaults > capped; // false when either is NaN
  })();
  return capLowers;
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

/**
 * `env` with DAEMON_ENV under it (a value the user set is kept) and its NODE_OPTIONS given the heap cap
 * where `capLowers` (`daemonNodeOptions`).
 */
export function daemonEnv(env: NodeJS.ProcessEnv, capLowers: boolean): NodeJS.ProcessEnv {
  const nodeOptions = daemonNodeOptions(env.NODE_OPTIONS, capLowers);
  return { ...DAEMON_ENV, ...env, ...(nodeOptions !== undefined && { NODE_OPTIONS: nodeOptions }) };
}

/**
 * The daemon process's argv after `node`: its node flags, then `extraNodeFlags` (the later of two
 * settings of one flag wins), then its own entry in `distDir`, daemon-run.js (daemon/daemon-run.ts: the
 * daemon without the CLI's bundle), and `args` (`--metrics-port`, `--http-port`, as `combine daemon run` takes them).
 */
export function daemonArgv(distDir: string, args: readonly string[] = [], extraNodeFlags: readonly string[] = []): string[] {
  return [...DAEMON_NODE_FLAGS, ...extraNodeFlags, join(distDir, 'daemon-run.js'), ...args];
}
