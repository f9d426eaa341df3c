/**
 * A daemon on Postgres whose schema another connection changes while it runs (a newer daemon migrating the
 * shared database during a rolling upgrade): the statements it prepared before the change (`SELECT *` over
 * the changed tables) fail with 0A000 "cached plan must not change result type" on every connection that
 * prepared them. Its reads (a thread list, on its read pool; `ledger export`, on the control plane's worker
 * connection) and its writes answer as before. Always on Postgres, whatever the run's backend.
 */
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, project, type CommandJson, type ThreadJson } from '../helpers/harness.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';

let h: Harness;
let database: TestDatabase;
afterEach(async () => {
  await h?.cleanup();
  await database?.drop();
});

describe('a daemon on Postgres after another connection added columns', () => {
  it('lists threads, exports the ledger and runs new work as before', async () => {
    h = await Harness.start();
    database = await createTestDatabase();
    h.env.COMBINE_DATABASE_URL = database.url;
    await h.importProject(project('p', 2));
    const first = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    expect((await h.waitForEnd(first.thread_id)).status).toBe('complete');
    const listThreads = async () =>
      (await h.json<ThreadJson[]>(['threads', '--project', 'p'])).filter((t) => t.parent_thread_id === null).map((t) => [t.thread_id, t.status]);
    const exported = join(h.home, 'export.jsonl');
    const exportLedger = async () => {
      const r = await h.cli(['ledger', 'export', '--project', 'p', '--out', exported, '--force']);
      return r.code === 0 ? 0 : r;
    };
    // Each read prepares its statements on the connections it runs on.
    for (let i = 0; i < 3; i++) expect(await listThreads()).toEqual([[first.thread_id, 'complete']]);
    expect(await exportLedger()).toBe(0);

    const other = new pg.Client({ connectionString: database.url });
    await other.connect();
    try {
      for (const table of ['llm_threads', 'projects', 'llm_work_items', 'llm_ledger_entries']) {
        await other.query(`ALTER TABLE ${table} ADD COLUMN added_by_a_newer_daemon TEXT`);
      }
    } finally {
      await other.end();
    }

    for (let i = 0; i < 3; i++) expect(await listThreads()).toEqual([[first.thread_id, 'complete']]);
    expect(await exportLedger()).toBe(0);
    const second = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E2']);
    expect((await h.waitForEnd(second.thread_id)).status).toBe('complete');
    expect((await h.json(['ledger', 'verify'])).ok).toBe(true);
  });
});
