/**
 * One engine-throughput run, in process: the real App (writer, engine, ledger, logger) on a real SQLite
 * file with synchronous=FULL, against a provider that answers at once without a network. What is
 * measured is our work per item: claim, prompt entry, call, response entry, validation, parse_report,
 * mutation of the backlog document, mutation_report, status changes and their events.
 */
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from '../../src/daemon/app.js';
import { loadConfig } from '../../src/daemon/config/config.js';
import { applyPgMigrations } from '../../src/db/pg/migrate.js';
import { createEventLog, createLogger } from '../../src/daemon/runtime/logger.js';
import { simulatedStories } from '../../src/operations/builtin/story_generate_epic/simulate.js';
import type { Db } from '../../src/db/connection.js';
import { projectFile } from './daemon.js';
import { bytesWrittenBySelf } from './proc.js';
import { startProfiler } from './profile.js';
import type { Provider, RawResponse } from '../../src/daemon/engine/provider.js';

/** A provider with zero latency: the same valid answer for every request, from memory. */
export function instantProvider(): Provider & { calls: number } {
  const stories = simulatedStories('E1', 'Checkout');
  const bodyText = JSON.stringify({
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: 0,
    model: 'bench',
    choices: [{ index: 0, message: { role: 'assistant', content: JSON.stringify({ stories }) }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 120, completion_tokens: 300, total_tokens: 420 },
  });
  let calls = 0;
  return {
    endpoint: 'in-process://bench',
    get calls() {
      return calls;
    },
    async send(): Promise<RawResponse> {
      calls++;
      return { httpStatus: 200, bodyText, requestId: `bench-${calls}`, rateLimit: {} };
    },
  };
}

export interface EngineRunOptions {
  projects: number;
  epicsPerProject: number;
  maxInFlight: number;
  /** Base URL of an OpenAI-compatible server; absent = the instant in-process provider. */
  baseURL?: string;
  /** A Postgres database (empty or migrated) for the state; absent = SQLite in the temporary home. */
  databaseUrl?: string;
  /** Diagnosis hook (bench/diag-pg.ts): called once the work is enqueued, before the measured run. */
  onSeeded?: () => Promise<void>;
  /** Counting hook (bench/count-statements.ts): called once the last item is applied, before the bench's own reads. */
  onApplied?: () => void;
}

export interface EngineRunResult {
  items: number;
  seconds: number;
  perSecond: number;
  /**
   * CPU time of this process (user + system, all threads) from engine start to the last applied item,
   * per item: less sensitive than items/s to other processes on a shared machine.
   */
  cpuMicrosPerItem: number;
  ledgerEntries: number;
  /** Database size over the number of threads (all closed by then), ledger included; NaN on Postgres. */
  bytesPerThread: number;
  /** Rows inserted, updated or deleted per item (SQLite `total_changes()` of the writer, triggers included); NaN on Postgres. */
  rowsChangedPerItem: number;
  /** Rows added per item: the rows of every table after the run less before it; NaN on Postgres. */
  rowsAddedPerItem: number;
  /** Bytes this process passed to write(2) per item (WAL frames, checkpoints, daemon.log); NaN on Postgres. */
  bytesWrittenPerItem: number;
  /** Of `bytesWrittenPerItem`, the lines appended to daemon.log; NaN on Postgres. */
  logBytesPerItem: number;
  /** Growth of the database file per item, after a full checkpoint; NaN on Postgres. */
  dbGrowthPerItem: number;
}

/** Enqueues the work with the engine stopped, then times a fresh App from start to the last applied item. */
export async function runEngineOnce(o: EngineRunOptions): Promise<EngineRunResult> {
  const home = mkdtempSync(join(tmpdir(), 'cmb-bench-engine-'));
  try {
    const env = { OPENAI_BASE_URL: o.baseURL ?? 'http://127.0.0.1:9/v1', OPENAI_API_KEY: 'bench', COMBINE_MODEL: 'bench' };
    const loaded = loadConfig(home, env);
    // Pressure off: on a shared machine other processes' CPU load would pause the bulk work measured here.
    const config = { ...loaded, maxInFlight: o.maxInFlight, databaseUrl: o.databaseUrl ?? null, pressure: { ...loaded.pressure, enabled: false } };
    if (o.databaseUrl) await applyPgMigrations(o.databaseUrl); // what `combine daemon run` does before its App
    // The daemon's own logger configuration: its synchronous log lines are part of the cost per item.
    const logger = createLogger(config.logPath, 'info');
    const provider = o.baseURL ? undefined : instantProvider();
    const seed = new App({ config, logger, eventLog: createEventLog(config.logPath, 'info'), ...(provider ? { provider } : {}) });
    await seed.engine.stop(0); // enqueue only: nothing is claimed while seeding
    for (let p = 0; p < o.projects; p++) {
      await seed.projects.import(projectFile(`p${p}`, o.epicsPerProject));
      await seed.threads.generateAll(`p${p}`, { force: false, deadlineMs: null, createdBy: 'bench' });
    }
    await seed.shutdown(0);
    await o.onSeeded?.();

    const items = o.projects * o.epicsPerProject;
    const app = new App({ config, logger, eventLog: createEventLog(config.logPath, 'info'), ...(provider ? { provider } : {}) });
    let applied = 0;
    const done = new Promise<void>((resolve, reject) => {
      app.bus.subscribe((e) => {
        if (e.type === 'work_item' && e.status === 'applied' && ++applied === items) resolve();
        if (e.type === 'work_item' && (e.status === 'dead_letter' || e.status === 'failed')) reject(new Error(`bench item ended ${e.status}: ${e.error_code}`));
      });
    });
    const before = o.databaseUrl ? null : writeCounters(app.db, config.dbPath, config.logPath);
    const profiler = await startProfiler();
    const started = performance.now();
    const cpuStarted = process.cpuUsage();
    await app.start();
    await done;
    o.onApplied?.();
    const seconds = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuStarted);
    const bytesWritten = bytesWrittenBySelf() - (before?.bytesWritten ?? Number.NaN);
    await profiler.stop('engine');
    const ledgerEntries = (await app.admin.stats()).ledger_entries;
    const threads = Object.values((await app.admin.stats()).threads).reduce((a, b) => a + b, 0);
    let dbBytes = Number.NaN;
    let after: WriteCounters | null = null;
    if (before) {
      app.db.pragma('wal_checkpoint(TRUNCATE)');
      after = writeCounters(app.db, config.dbPath, config.logPath);
      dbBytes = after.dbBytes;
    }
    await app.shutdown(0);
    // Every item's full record: prompt, response, parse_report, mutation_report.
    if (ledgerEntries !== items * 4) throw new Error(`expected ${items * 4} ledger entries, found ${ledgerEntries}`);
    return {
      items,
      seconds,
      perSecond: items / seconds,
      cpuMicrosPerItem: (cpu.user + cpu.system) / items,
      ledgerEntries,
      bytesPerThread: dbBytes / threads,
      rowsChangedPerItem: ((after?.changes ?? Number.NaN) - (before?.changes ?? Number.NaN)) / items,
      rowsAddedPerItem: ((after?.rows ?? Number.NaN) - (before?.rows ?? Number.NaN)) / items,
      bytesWrittenPerItem: bytesWritten / items,
      logBytesPerItem: ((after?.logBytes ?? Number.NaN) - (before?.logBytes ?? Number.NaN)) / items,
      dbGrowthPerItem: ((after?.dbBytes ?? Number.NaN) - (before?.dbBytes ?? Number.NaN)) / items,
    };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

interface WriteCounters {
  /** `total_changes()` of the writer's connection. */
  changes: number;
  /** Rows in every table. */
  rows: number;
  /** The database file and its WAL, in bytes. */
  dbBytes: number;
  bytesWritten: number;
  /** daemon.log's size. */
  logBytes: number;
}

/** The SQLite writer's counters, read in the bench process between the engine's phases. */
function writeCounters(db: Db, dbPath: string, logPath: string): WriteCounters {
  const tables = db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").pluck().all() as string[];
  const rows = tables.reduce((n, t) => n + (db.prepare(`SELECT count(*) FROM "${t}"`).pluck().get() as number), 0);
  const changes = db.prepare('SELECT total_changes()').pluck().get() as number;
  const wal = `${dbPath}-wal`;
  const dbBytes = statSync(dbPath).size + (existsSync(wal) ? statSync(wal).size : 0);
  return { changes, rows, dbBytes, bytesWritten: bytesWrittenBySelf(), logBytes: existsSync(logPath) ? statSync(logPath).size : 0 };
}

/** A provider whose calls never answer (until aborted): items stay in flight, so only claiming is timed. */
export function hangingProvider(): Provider {
  return {
    endpoint: 'in-process://hang',
    send: (_request, signal) => new Promise<RawResponse>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true })),
  };
}
