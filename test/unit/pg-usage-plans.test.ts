/**
 * A thread's usage and a scheduled run's usage on Postgres are read through the threads' index, at any
 * table size: `sumThreadUsage` (the thread view: `combine threads show`, `GET /threads/{id}`) over
 * llm_charges, and the finalizing statement's `runUsage` over llm_ledger_entries (every ending thread that
 * belongs to a run). Each names the thread and its children as one `IN` list; the earlier
 * `thread_id = @id OR thread_id IN (children)` had no index path, so Postgres read the whole table for it —
 * at 1,000,000 closed threads, every read. On a connection with sequential scans disabled, the statements'
 * plans must still reach those tables by index (a plan with no other path falls back to a disabled Seq Scan).
 * The finalizing statements are checked in both forms: one run's thread (a parameter) and the runs of the
 * threads a closure of answers ends together (`schedule_runs.thread_id`, the updated row's column).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { sumThreadUsage } from '../../src/db/charges.js';
import { finalizeCompletedScheduleRunsAtCommit, finalizeScheduleRunOfThread } from '../../src/db/schedules.js';
import { preparedPlansOf } from '../helpers/pg-prepared-plans.js';
import { useTestWriter } from '../helpers/postgres.js';

/** One connection, sequential scans off: the statements' prepared plans are read back on it. */
const db = useTestWriter(1);
beforeAll(() => db.reader.run('SET enable_seqscan = off'));

/** The plan of this connection's prepared statement whose text has `marker`, for `args`. */
const planOf = async (marker: string, args: string) => (await preparedPlansOf(db.reader, marker, args)).plan;

describe('usage reads on Postgres go through the index at any size', () => {
  it("a thread's usage (the thread view) reads llm_charges by thread, not the whole table", async () => {
    expect((await sumThreadUsage(db.reader, 't-none')).calls).toBe(0);
    const plan = await planOf('unpriced_in_doubt_calls', "'t-none'");
    expect(plan).toContain('idx_charges_thread');
    expect(plan).not.toMatch(/Seq Scan on llm_charges/);
  });

  it("a scheduled run's usage, set as its thread ends, reads llm_ledger_entries by thread, not the whole table", async () => {
    expect(await finalizeScheduleRunOfThread(db.reader, { thread_id: 't-none', to: 'complete', now: 1, error_message: null })).toEqual([]);
    // Its parameters in the order the text names them: to, now, error_message, thread_id.
    const plan = await planOf('RETURNING *', "'complete', 1, NULL, 't-none'");
    expect(plan).toContain('idx_ledger_thread');
    expect(plan).not.toMatch(/Seq Scan on llm_ledger_entries/);
  });

  it('the runs of threads that completed together, finalized in one statement, read llm_ledger_entries by thread', async () => {
    // A plain handle (no COMMIT's query): the statement runs now.
    await finalizeCompletedScheduleRunsAtCommit(db.reader, { thread_ids: ['t-none'], now: 1 });
    // Its parameters in the order the text names them: now, ids.
    const plan = await planOf('schedule_runs.thread_id', `1, '["t-none"]'`);
    expect(plan).toContain('idx_ledger_thread');
    expect(plan).not.toMatch(/Seq Scan on llm_ledger_entries/);
  });
});
