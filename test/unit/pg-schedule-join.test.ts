/**
 * A schedule run that joins a thread already calling for its request (ADR-0023 on several daemons, issue
 * 18), while another daemon's transaction ends that thread. The end finalizes the runs linked to the
 * thread; a run whose link was not committed yet is not among them, so the run's start must see the end
 * itself. Before the fix the start read the thread as `running` (the end not committed), linked the run
 * and committed: the run stayed `pending` beside a complete thread until the stale re-claim, minutes
 * later. Real Postgres, the real scheduler step; the interleaving is pinned with a gate, no timing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { claimSchedulePeriod, finalizeScheduleRunOfThread, getScheduleRun } from '../../src/db/schedules.js';
import { getThread, insertThread, transitionThread } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { loadConfig, operationSettingsOf } from '../../src/daemon/config/config.js';
import { scheduledRequest } from '../../src/daemon/scheduler/request.js';
import { startScheduledRun } from '../../src/daemon/scheduler/start-run.js';
import { requireOperation } from '../../src/daemon/services/submit.js';
import { loadOperations } from '../../src/operations/loader.js';
import type { OperationRegistry } from '../../src/operations/registry.js';
import { idempotencyKey, identityOf } from '../../src/operations/runtime.js';
import { waitUntil } from '../helpers/harness.js';
import { aWriteWaitsForALock, backendPid, openRaceDatabase, pausedWriteBy, type RaceDatabase, settled } from '../helpers/pg-race.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let db: RaceDatabase;
let home: string;
let operations: OperationRegistry;

beforeEach(async () => {
  db = await openRaceDatabase();
  home = mkdtempSync(join(tmpdir(), 'cmb-schedule-join-'));
  operations = await loadOperations(home, [], operationSettingsOf(loadConfig(home, {})));
});
afterEach(async () => {
  await db?.drop();
  rmSync(home, { recursive: true, force: true });
});

const PERIOD = Date.parse('2026-03-01T09:00:00Z');

it('a run joining a running thread whose end is committing sees the end: the run is finalized, not left pending', async () => {
  const { reader, write } = db;
  await reader.run("INSERT INTO projects (id, name, created_at) VALUES ('p', 'P', 0)");
  const schedule = { operation: 'briefing', input: '{}', project_id: 'p', timezone: 'UTC' };
  await reader.run(
    `INSERT INTO schedules (id, project_id, operation, cron, timezone, catch_up, status, active_from, created_at, updated_at)
     VALUES ('s1', 'p', 'briefing', '0 9 * * *', 'UTC', 'latest', 'active', 0, 0, 0)`,
  );
  // The briefing this period asks for is already being answered: its thread runs, its call started.
  const request = scheduledRequest(schedule, PERIOD);
  const op = requireOperation(operations, request.operation);
  const key = idempotencyKey(op, identityOf(op, request.input));
  await insertThread(reader, { ...testThreadRow('a'), kind: op.name, idempotency_key: key, status: 'running' });
  await insertWorkItem(reader, testWorkItemRow('a', { status: 'running', started_at: 2 }));
  const run = (await claimSchedulePeriod(reader, { id: 'r1', schedule_id: 's1', period_key: 'k', period_at: PERIOD, owner: 'd1', now: 10 }))!;

  // Another daemon ends the thread: its end and its finalize of the thread's runs (none linked yet) ran,
  // its COMMIT has not.
  const end = pausedWriteBy(
    write,
    async (tx) => {
      await transitionThread(tx.sql, { id: 't-a', parent_thread_id: null }, 'running', 'complete', tx.now);
      expect(await finalizeScheduleRunOfThread(tx.sql, { thread_id: 't-a', to: 'complete', now: tx.now, error_message: null })).toEqual([]);
      return backendPid(tx.sql);
    },
    async () => {},
  );
  const endPid = await end.reached;
  const start = write((tx) => startScheduledRun(tx, { operations, maxQueued: 100 }, run));
  const started = settled(start);
  // The start waits for the end's row lock on the thread (before the fix it committed its link at once).
  await waitUntil(async () => started() || (await aWriteWaitsForALock(reader, endPid)), 'the start to wait for the end (or commit)');
  end.go();
  await end.done;
  expect(await start).toBe('finalized');
  expect((await getThread(reader, 't-a'))?.status).toBe('complete');
  expect(await getScheduleRun(reader, 'r1')).toMatchObject({ status: 'complete', thread_id: 't-a' });
});
