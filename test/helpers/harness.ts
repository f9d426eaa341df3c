/**
 * Integration harness: a temporary COMBINE_HOME, the simulator (in this process, over HTTP), and the real
 * CLI bundle run as a child process (which starts the real daemon on a real Unix socket).
 *
 * The storage backend is the test run's (vitest.config.ts's projects): SQLite in the home by default;
 * with COMBINE_TEST_BACKEND=postgres, each harness gets a database of its own on the run's Postgres and
 * starts its daemons with COMBINE_DATABASE_URL. `query` reads stored state on either.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import type pg from 'pg';
import { isAlive } from '../../src/cli/daemon-control.js';
import type { Sql, SqlParams } from '../../src/core/sql.js';
import { connectPostgres, openPostgresPool } from '../../src/db/pg/connection.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { SqliteSql } from '../../src/db/sql.js';
import { createTestDatabase, type TestDatabase } from './postgres.js';
import { createSimulator, type FaultRule, type Simulator, type SimulatorOptions } from '../../src/sim/simulator.js';

export const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const CLI = join(ROOT, 'dist', 'cli.js');
/** The test bundle (scripts/build.mjs --test-hooks): the shipped code plus the COMBINE_CRASH_AT seam. */
export const TEST_HOOKS_CLI = join(ROOT, 'dist-test', 'cli.js');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface ThreadJson {
  thread_id: string;
  kind: string;
  status: string;
  target_ref: { doc_type: string; project_id: string; epic_id?: string };
  parent_thread_id: string | null;
  created_at: string;
  closed_at: string | null;
  child_summary: Record<string, number> | null;
  usage: UsageJson;
}

export interface UsageJson {
  calls: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost_usd: number | null;
  wasted_calls: number;
  wasted_tokens: number;
  wasted_cost_usd: number | null;
  in_doubt_calls: number;
  in_doubt_tokens: number;
  in_doubt_cost_usd: number | null;
  reserved_calls: number;
  reserved_tokens: number;
  unpriced_calls: number;
}

export interface CommandJson {
  thread_id: string;
  status: string;
  deduplicated: boolean;
}

export function project(id: string, epicCount: number) {
  return {
    id,
    name: `Project ${id}`,
    epics: Array.from({ length: epicCount }, (_, i) => ({ id: `E${i + 1}`, title: `Epic number ${i + 1}`, description: `Everything about epic ${i + 1}.` })),
  };
}

/** The storage backend of this test run: `COMBINE_TEST_BACKEND` (set per vitest project), SQLite unless `postgres`. */
export const TEST_BACKEND: 'sqlite' | 'postgres' = process.env.COMBINE_TEST_BACKEND === 'postgres' ? 'postgres' : 'sqlite';

export class Harness {
  readonly home = mkdtempSync(join(tmpdir(), 'cmb-'));
  env: NodeJS.ProcessEnv;
  private pool: pg.Pool | null = null;

  private constructor(
    readonly sim: Simulator,
    /** The harness's own Postgres database when the run's backend is Postgres; null on SQLite. */
    readonly database: TestDatabase | null,
  ) {
    this.env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      COMBINE_HOME: this.home,
      OPENAI_BASE_URL: sim.url,
      OPENAI_API_KEY: 'sk-test-SECRET-0123456789abcdef',
      COMBINE_MODEL: 'test-model',
      // Resource pressure reads this directory instead of the machine: empty (no signal, no pressure)
      // unless a test writes proc/stat, proc/meminfo or sys/class/power_supply into it.
      COMBINE_PRESSURE_ROOT: join(this.home, 'pressure-root'),
      ...(database ? { COMBINE_DATABASE_URL: database.url } : {}),
    };
  }

  static async start(sim: SimulatorOptions = {}): Promise<Harness> {
    const database = TEST_BACKEND === 'postgres' ? await createTestDatabase({ migrated: true }) : null;
    return new Harness(await createSimulator(sim), database);
  }

  /**
   * Rows of a read of the stored state, on whichever backend the daemon uses. Statement texts are
   * written as for better-sqlite3 (`?` or `@name`); keep them portable SQL.
   */
  async query<T = Record<string, unknown>>(text: string, params?: SqlParams): Promise<T[]> {
    if (this.database) {
      // An idle connection the server ends (DROP DATABASE … WITH (FORCE) at cleanup can beat the pool's
      // own goodbye) is dropped by the pool; a query that needed it fails in the test anyway.
      this.pool ??= openPostgresPool(this.database.url, { max: 2 }).on('error', () => {});
      return new PgSql(this.pool).all<T>(text, params);
    }
    const db = this.openDb();
    try {
      return await new SqliteSql(db).all<T>(text, params);
    } finally {
      db.close();
    }
  }

  /**
   * Works on the stored state behind the daemon's back, as another process would (a foreign lock
   * holder, a tamperer, a verifier): `fn` gets a writable handle on one connection (so session settings
   * hold for its statements) and `sql.dialect` says which backend it is. Portable SQL where the texts allow it.
   */
  async edit<T>(fn: (sql: Sql) => Promise<T>): Promise<T> {
    if (this.database) {
      const client = await connectPostgres(this.database.url);
      try {
        return await fn(new PgSql(client));
      } finally {
        await client.end();
      }
    }
    const db = new Database(join(this.home, 'combine.db'), { fileMustExist: true });
    db.pragma('busy_timeout = 5000');
    try {
      return await fn(new SqliteSql(db));
    } finally {
      db.close();
    }
  }

  /**
   * The queue depth the triggers keep (llm_queue_depth: SQLite's one row, Postgres's shards summed) beside
   * the count of queued items it stands for: equal unless a move in or out of `queued` was missed.
   */
  async queueDepth(): Promise<{ kept: number; queued: number }> {
    return (await this.queryOne<{ kept: number; queued: number }>(
      `SELECT (SELECT coalesce(sum(queued), 0) FROM llm_queue_depth) AS kept,
              (SELECT count(*) FROM llm_work_items WHERE status = 'queued') AS queued`,
    ))!;
  }

  /** The first row of `query`, or undefined. */
  async queryOne<T = Record<string, unknown>>(text: string, params?: SqlParams): Promise<T | undefined> {
    return (await this.query<T>(text, params))[0];
  }

  /**
   * Runs the CLI; never throws on a non-zero exit. The shipped bundle, unless COMBINE_CRASH_AT is set: a
   * daemon started then must be the test bundle, whose crash points work (the shipped one ignores them).
   */
  cli(args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<CliResult> {
    const started = performance.now();
    const env = { ...this.env, ...opts.env };
    return new Promise((resolvePromise, reject) => {
      const child = spawn(process.execPath, [env.COMBINE_CRASH_AT ? TEST_HOOKS_CLI : CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 45_000);
      child.on('error', reject);
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        resolvePromise({ code: code ?? (signal ? 128 : 1), stdout, stderr, ms: performance.now() - started });
      });
    });
  }

  /** Runs the CLI with --json, expects exit 0, and parses stdout. */
  async json<T = any>(args: string[], opts: { env?: NodeJS.ProcessEnv } = {}): Promise<T> {
    const r = await this.cli([...args, '--json'], opts);
    if (r.code !== 0) throw new Error(`combine ${args.join(' ')} exited ${r.code}: ${r.stderr}${r.stdout}`);
    return JSON.parse(r.stdout) as T;
  }

  /** Follows a thread until it ends (event-driven: the CLI returns when the daemon says so). */
  async waitForEnd(threadId: string): Promise<ThreadJson> {
    const r = await this.cli(['thread', threadId, '--follow', '--json']);
    const lines = r.stdout.trim().split('\n');
    if (r.code > 1) throw new Error(`follow failed (${r.code}): ${r.stderr}`);
    return JSON.parse(lines[lines.length - 1]!) as ThreadJson;
  }

  async importProject(p: unknown): Promise<void> {
    const file = join(this.home, `project-${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(file, JSON.stringify(p));
    await this.json(['project', 'import', file]);
  }

  writeConfig(config: unknown): void {
    writeFileSync(join(this.home, 'config.json'), JSON.stringify(config));
  }

  setFaults(rules: FaultRule[]): void {
    this.sim.setFaults(rules);
  }

  daemonPid(): number | null {
    try {
      return Number(readFileSync(join(this.home, 'daemon.pid'), 'utf8').trim()) || null;
    } catch {
      return null;
    }
  }

  async startDaemon(env: NodeJS.ProcessEnv = {}): Promise<number> {
    const r = await this.cli(['daemon', 'start', '--json'], { env });
    if (r.code !== 0) throw new Error(`daemon start failed: ${r.stderr}\ndaemon.log ends:\n${this.logText().split('\n').slice(-15).join('\n')}`);
    return (JSON.parse(r.stdout) as { pid: number }).pid;
  }

  /** SIGKILL, as a crash would. Waits until the process is gone. */
  async killDaemon(): Promise<void> {
    const pid = this.daemonPid();
    if (!pid) return;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      return;
    }
    await waitForExit(pid);
  }

  async stopDaemon(): Promise<void> {
    await this.cli(['daemon', 'stop']);
  }

  /** A read-only connection to the SQLite file, for tests about SQLite itself; behaviour tests use `query`. */
  openDb(): Database.Database {
    return new Database(join(this.home, 'combine.db'), { readonly: true, fileMustExist: true });
  }

  logText(): string {
    try {
      return readFileSync(join(this.home, 'daemon.log'), 'utf8');
    } catch {
      return '';
    }
  }

  async cleanup(): Promise<void> {
    await this.killDaemon();
    await this.sim.close();
    await this.pool?.end();
    await this.database?.drop();
    const dialectErrors = this.database ? postgresStatementErrors(this.logText()) : [];
    rmSync(this.home, { recursive: true, force: true });
    // A statement Postgres refused as written (SQLSTATE class 42: syntax, an unknown or ambiguous name, a
    // parameter it cannot type; 0A: unsupported) is SQLite-only SQL that reached Postgres: a bug, even
    // where the engine retried around it and the test's assertions held.
    if (dialectErrors.length > 0) throw new Error(`the daemon ran SQL Postgres refuses:\n${dialectErrors.join('\n')}`);
  }
}

/** The distinct messages of Postgres errors of class 42 or 0A in a daemon log. */
function postgresStatementErrors(log: string): string[] {
  const found = new Set<string>();
  for (const m of log.matchAll(/"message":"((?:[^"\\]|\\.)*)"[^\n]*?"code":"(42\w{3}|0A\w{3})"/g)) found.add(`${m[2]}: ${m[1]}`);
  // An error that escaped to stderr (which is daemon.log too) is printed, not logged as JSON.
  for (const m of log.matchAll(/^combine: unexpected error: error: (.*)$/gm)) found.add(m[1]!);
  return [...found];
}

/** Polls a condition until it holds (for states with no event to follow, e.g. "the call has started"). */
export async function waitUntil<T>(
  fn: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  what: string,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as T;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Fast retries for tests: the schedule's shape is unit-tested; here only its outcome matters. */
export const FAST_RETRY = { retry: { base: '50ms', cap: '200ms' } };

export async function waitForExit(pid: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`process ${pid} did not exit within ${timeoutMs} ms`);
}
