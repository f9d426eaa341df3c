/**
 * A real daemon for the socket benchmarks: a temporary COMBINE_HOME, the daemon's own entry as
 * `combine daemon start` runs it (dist/daemon-run.js: the same process users run), and the CLI's own tRPC client over the Unix socket.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectHttp, probeSocket, type DaemonClient } from '../../src/cli/client.js';
import { capLowersHeapLimit, daemonArgv, daemonEnv } from '../../src/cli/daemon-heap.js';
import { sleep } from './stats.js';

export const ROOT = new URL('../..', import.meta.url).pathname;

export function projectFile(id: string, epics: number) {
  return {
    id,
    name: `Bench ${id}`,
    epics: Array.from({ length: epics }, (_, i) => ({ id: `E${i + 1}`, title: `Epic ${i + 1}`, description: `What epic ${i + 1} is about.` })),
  };
}

export class BenchDaemon {
  readonly socket: string;
  client!: DaemonClient;
  private child: ChildProcess | null = null;

  constructor(
    readonly home: string,
    readonly env: NodeJS.ProcessEnv,
  ) {
    this.socket = join(home, 'combine.sock');
  }

  /**
   * A fresh home with `config` as config.json, talking to the provider at `baseURL`. Backpressure is
   * lifted (the ack benchmark queues tens of thousands of items; it measures acks, not QUEUE_FULL).
   */
  static inTempHome(baseURL: string, config: unknown, databaseUrl?: string): BenchDaemon {
    return BenchDaemon.inHome(mkdtempSync(join(tmpdir(), 'cmb-bench-')), baseURL, config, databaseUrl);
  }

  /** The same, on an existing home (a database a benchmark filled beforehand); `databaseUrl`: state in Postgres. */
  static inHome(home: string, baseURL: string, config: unknown, databaseUrl?: string): BenchDaemon {
    writeFileSync(join(home, 'config.json'), JSON.stringify(config));
    return new BenchDaemon(home, {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      COMBINE_HOME: home,
      OPENAI_BASE_URL: baseURL,
      OPENAI_API_KEY: 'bench',
      COMBINE_MODEL: 'bench',
      COMBINE_MAX_QUEUED: '10000000',
      ...(databaseUrl ? { COMBINE_DATABASE_URL: databaseUrl } : {}),
    });
  }

  get pid(): number {
    return this.child?.pid ?? 0;
  }

  /** Date.now() when the process was spawned (diag-pg's DIAG_V8_LOG splits V8's log, timed from the process's start, by it). */
  spawnedAt = 0;

  /** Spawns the daemon (`flags`: node flags of this daemon's, after BENCH_DAEMON_FLAGS) and waits for its socket. */
  async start(flags: readonly string[] = []): Promise<void> {
    // BENCH_PROFILE_DIR: profile the daemon (node --cpu-prof); it is then stopped gracefully so the profile is written.
    const prof = process.env.BENCH_PROFILE_DIR
      ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`]
      : process.env.BENCH_HEAPSNAP
        ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${process.env.BENCH_HEAPSNAP}`]
        : [];
    const extra = process.env.BENCH_DAEMON_FLAGS ? process.env.BENCH_DAEMON_FLAGS.split(' ') : [];
    // The daemon's own heap settings first (as `daemon start` runs it); BENCH_DAEMON_FLAGS after them overrides.
    this.spawnedAt = Date.now();
    this.child = spawn(process.execPath, daemonArgv(join(ROOT, 'dist'), [], [...extra, ...flags, ...prof]), {
      env: daemonEnv(this.env, await capLowersHeapLimit()),
      stdio: 'ignore',
    });
    const deadline = Date.now() + 60_000;
    while (!(await probeSocket(this.socket))) {
      if (this.child.exitCode !== null) throw new Error(`the daemon exited ${this.child.exitCode}: ${this.logTail()}`);
      if (Date.now() > deadline) throw new Error(`the daemon did not start: ${this.logTail()}`);
      await sleep(20);
    }
    this.client = connectHttp(this.socket).client;
  }

  async importProject(p: unknown): Promise<void> {
    await this.client.project.import.mutate({ file: p });
  }

  /** Resident set size of the daemon process, from /proc (bytes). */
  rssBytes(): number {
    const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
    return kb * 1024;
  }

  logTail(): string {
    try {
      return readFileSync(join(this.home, 'daemon.log'), 'utf8').trim().split('\n').slice(-5).join('\n');
    } catch {
      return '(no log)';
    }
  }

  /**
   * SIGTERM rather than SIGKILL at `stop`, so what the process writes at its exit is complete: a CPU profile
   * (BENCH_PROFILE_DIR), V8's buffered log (diag-pg's DIAG_V8_LOG).
   */
  stopGracefully = Boolean(process.env.BENCH_PROFILE_DIR);

  /** SIGKILL: the benchmarks need no graceful drain (SIGTERM with `stopGracefully`). */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill(this.stopGracefully ? 'SIGTERM' : 'SIGKILL');
    await exited;
  }

  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.home, { recursive: true, force: true });
  }
}
