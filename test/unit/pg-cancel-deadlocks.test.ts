/**
 * A generate-all canceled from one daemon while another daemon's engine ends its children (issue 18),
 * several times, on one Postgres: the server detects no deadlock (pg_stat_database.deadlocks stays 0).
 * Before the lock order of engine/tx.ts the cancel locked the orchestration, then its children, while an
 * ending child holds its row and then locks the orchestration: 13 deadlocks in 15 such cancels (each a
 * transaction aborted after `deadlock_timeout`, 1 s, and run again); and a start moved its thread before
 * its item, which the cancel may hold (about one round in 30). The count is the server's own,
 * read once every backend of the database has exited (a backend reports its counts as it exits). Real
 * Postgres, two in-process daemons, the real simulator over HTTP; no timing asserted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { App } from '../../src/daemon/app.js';
import { loadConfig, operationSettingsOf } from '../../src/daemon/config/config.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { loadOperations } from '../../src/operations/loader.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { project, waitUntil } from '../helpers/harness.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';

const ROUNDS = 5;
// Enough children, answered slowly enough, that the cancel (sent once 5 have completed) always lands while
// the others are still ending: with 40 answered in 5 ms, all could complete before it (CONFLICT: already complete).
const EPICS = 120;

let sim: Simulator;
beforeAll(async () => {
  sim = await createSimulator({ latencyMs: 20 });
});
afterAll(() => sim?.close());

async function daemon(database: TestDatabase, dirs: string[]): Promise<App> {
  const dir = mkdtempSync(join(tmpdir(), 'cmb-pg-cancel-'));
  dirs.push(dir);
  const config = loadConfig(dir, { OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'k', COMBINE_DATABASE_URL: database.url, COMBINE_MAX_IN_FLIGHT: '16' });
  const operations = await loadOperations(dir, [], operationSettingsOf(config));
  return new App({ config, logger: createLogger(null, 'silent'), random: () => 0.5, operations });
}

/** The deadlocks Postgres detected in `database`, once no other session of it is left. */
async function deadlocksOf(database: TestDatabase): Promise<number> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    const others = async () =>
      (await client.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()')).rows[0].n;
    await waitUntil(async () => (await others()) === 0, "the daemons' sessions to exit");
    return (await client.query('SELECT deadlocks::int AS n FROM pg_stat_database WHERE datname = current_database()')).rows[0].n as number;
  } finally {
    await client.end();
  }
}

describe('a generate-all canceled by one daemon while the other ends its children', () => {
  it(`deadlocks never (${ROUNDS} cancels); every child ends, and the orchestration ends canceled`, async () => {
    const found: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const database = await createTestDatabase({ migrated: true });
      const dirs: string[] = [];
      try {
        const running = await daemon(database, dirs);
        const canceling = await daemon(database, dirs);
        await running.start();
        await canceling.start();
        await running.projects.import(project('p', EPICS));
        const parent = (await running.threads.run('story_generate_all', { project_id: 'p' }, { force: false, deadlineMs: null, createdBy: null })).thread_id;
        const completed = async () =>
          (await running.reader.get<{ n: number }>("SELECT count(*)::int AS n FROM llm_threads WHERE parent_thread_id = ? AND status = 'complete'", [parent]))!
            .n;
        await waitUntil(async () => (await completed()) >= 5, 'the first children to complete', 60_000);
        await canceling.threads.cancel(parent);
        const active = async () =>
          (await running.reader.get<{ n: number }>("SELECT count(*)::int AS n FROM llm_threads WHERE status IN ('open', 'running')"))!.n;
        await waitUntil(async () => (await active()) === 0, 'every thread to end', 60_000);
        expect((await running.reader.get<{ status: string }>('SELECT status FROM llm_threads WHERE id = ?', [parent]))!.status).toBe('canceled');
        await running.shutdown(0);
        await canceling.shutdown(0);
        found.push(await deadlocksOf(database));
      } finally {
        await database.drop();
        for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
      }
    }
    expect(found).toEqual(Array(ROUNDS).fill(0));
  }, 300_000);
});
