/**
 * The node flags the daemon process is started with — by `combine daemon start` and by the systemd
 * unit `combine daemon install` writes (a `combine daemon run` typed in a terminal runs on V8's
 * defaults). V8's young generation grows to 2 × 16 MiB semi-spaces, resident for the daemon's life once
 * a burst has grown it; 2 × 4 MiB takes ~9 MiB off the idle daemon and ~20 MiB off the peak of one with
 * 2,000 calls open (issue 20 target 3), and its GC time over that run stays as it was (bench/README.md,
 * 2026-11-24 16:45–16:52: the A/B with GC times; 2 × 2 MiB cost more GC for no lower peak). No cap on
 * the old generation: a daemon with a larger max_in_flight must grow rather than run out of heap.
 */
export const DAEMON_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4'];
