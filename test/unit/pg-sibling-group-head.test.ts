/**
 * A claim round on Postgres takes its claimed group's next head from the candidate's read
 * (db/item-with-thread.ts `ClaimCandidate.nextHead`) instead of re-reading the project's heads. The
 * project's other priority groups keep the heads the round read, unless one is headed by an item of the
 * scope the claim just took: that head is stale (no longer claimable) and, aged, could rank the project in a
 * class it no longer has — the project's heads are read again then. Real Postgres, the real claim round.
 */
import { RoundAdmissions } from '../../src/daemon/engine/claim-admissions.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { loadConfig, operationSettingsOf } from '../../src/daemon/config/config.js';
import { flowControlOf } from '../../src/daemon/config/flow.js';
import { claimWorkItems } from '../../src/daemon/engine/producer.js';
import { createModelRouter } from '../../src/daemon/routing/wiring.js';
import { FairScheduler } from '../../src/domain/fair-scheduler.js';
import { insertThread } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { loadOperations } from '../../src/operations/loader.js';
import { openRaceDatabase, type RaceDatabase } from '../helpers/pg-race.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let db: RaceDatabase;
let home: string;
beforeEach(async () => {
  db = await openRaceDatabase();
  home = mkdtempSync(join(tmpdir(), 'cmb-sibling-head-'));
});
afterEach(async () => {
  rmSync(home, { recursive: true, force: true });
  await db?.drop();
});

it('a claim that takes the scope heading another group of its project: class order holds for the round’s next pick', async () => {
  const now = Date.now();
  const min = 60_000;
  const items = [
    // Project a: an interactive item and an aged bulk item on one scope `s`, and a fresh bulk item on `t`.
    { id: 'a0', project_id: 'a', priority: 0, lock_scope: 's', not_before: now - 20 * min },
    { id: 'a10', project_id: 'a', priority: 10, lock_scope: 's', not_before: now - 15 * min },
    { id: 'a10b', project_id: 'a', priority: 10, lock_scope: 't', not_before: now - 1_000 },
    // Project b: one interactive item.
    { id: 'b0', project_id: 'b', priority: 0, lock_scope: 'u', not_before: now - 1_000 },
  ];
  for (const i of items) {
    await insertThread(db.reader, { ...testThreadRow(i.id), space_id: i.project_id });
    await insertWorkItem(db.reader, testWorkItemRow(i.id, i));
  }
  const operations = await loadOperations(home, [], operationSettingsOf(loadConfig(home, {})));
  const config = loadConfig(home, { OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' });
  const flow = {
    ...flowControlOf(config.flow, operations, createModelRouter(config, undefined)),
    scheduler: new FairScheduler({ weights: { a: 3 }, defaultWeight: 1, agingStepMs: min }),
  };
  const round = await db.write((tx) => claimWorkItems(tx, flow, 'd1', 2, 60_000, new RoundAdmissions()));
  // Pick 1: a0 (a's turn; it takes `s`). Pick 2: with a's bulk head a10 (aged to class 0, but of `s`) still
  // in view, a would win again and its candidate read would claim a10b (class 10, not aged) ahead of b0.
  // Re-read, a's bulk group is headed by a10b at class 10: b0, the only class-0 item left, goes next.
  expect(round.claimed.map((c) => c.item.id)).toEqual(['a0', 'b0']);
});
