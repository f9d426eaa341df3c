/**
 * What the tests of a Postgres shared closure of answers share (pg-ends-together, pg-apply-round-trips):
 * per describe, a fresh migrated database with project p imported, the real writer making one attempt
 * (a deadlock or a stale guard fails the closure instead of running it again), the engine's context of
 * daemon d1 with the built-ins, the text of every query the pool's connections send, and the items whose
 * stories answers such a closure then finishes (`answered`).
 */
import type pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { writeTx } from '../../src/core/tx.js';
import { forgetDocuments } from '../../src/db/document-cache.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import type { LedgerRow } from '../../src/db/schema.js';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import type { EngineContext } from '../../src/daemon/engine/leased.js';
import type { EngineHooks, Write } from '../../src/daemon/engine/tx.js';
import { importProject } from '../../src/daemon/services/commands.js';
import { project } from './harness.js';
import { builtinRegistry } from './operations.js';
import { openRaceDatabase, type RaceDatabase, storiesAnswered, testEngineContext } from './pg-race.js';

export class AnswerClosures {
  db!: RaceDatabase;
  /** Writes with the describe's hooks, one attempt each. */
  write!: Write;
  /** Daemon d1's engine context: the built-ins, one route, nothing priced. */
  readonly ctx: EngineContext = testEngineContext('d1', builtinRegistry());
  /** The text of every query sent since `record()` (a COMMIT's query is one text), until `stop()`. */
  readonly sent: string[] = [];
  private recording = false;

  /** Starts recording the queries sent, from none. */
  record(): void {
    this.sent.length = 0;
    this.recording = true;
  }

  stop(): void {
    this.recording = false;
  }

  /** How many of the recorded queries match `pattern`. */
  count(pattern: RegExp): number {
    return this.sent.filter((text) => pattern.test(text)).length;
  }

  /** `storiesAnswered` on this database, of project p under orchestration t-o unless `of` says otherwise, by `ctx` (d1) unless given. */
  answered(id: string, epic: number, of: { project?: string; parent?: string } = {}, ctx = this.ctx): Promise<LedgerRow> {
    return storiesAnswered(this.db.reader, this.write, ctx, id, epic, of);
  }

  /** A fresh migrated database, its queries recorded, its writer's hooks `hooks`, project p imported. */
  async open(hooks: EngineHooks): Promise<void> {
    this.db = await openRaceDatabase();
    this.recordQueries(this.db.pool);
    const pgWriter = new PgWriter<EngineEvent>(this.db.pool, {
      conflictAttempts: 1,
      raceAttempts: 1,
      onRollback: (connection) => forgetDocuments({ connection }),
    });
    this.write = writeTx(pgWriter, systemClock, hooks);
    await this.write((tx) => importProject(tx, project('p', 4)));
  }

  /** Records the queries of each connection the pool hands out (the `pg` client's own `query`, not ours). */
  private recordQueries(pool: pg.Pool): void {
    const wrapped = new WeakSet<object>();
    pool.on('acquire', (client) => {
      if (wrapped.has(client)) return;
      wrapped.add(client);
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (config: unknown, ...rest: unknown[]) => {
        if (this.recording) this.sent.push(typeof config === 'string' ? config : (config as { text: string }).text);
        return query(config, ...rest);
      };
    });
  }
}

/** An `AnswerClosures` for the cases of one describe: its database opened before them (project p imported, `hooks` the writer's), dropped after. */
export function useAnswerClosures(hooks: EngineHooks): AnswerClosures {
  const c = new AnswerClosures();
  beforeAll(() => c.open(hooks));
  afterAll(() => c.db?.drop());
  return c;
}
