/**
 * A half-open breaker's probe is taken in memory by the claim round that admits its call (engine/claim-probes.ts).
 * A run of the round that does not commit gives it back: when the writer runs the round again (a guard that
 * raced another daemon), and when the write fails. Kept, it would hold the endpoint half-open with its probe
 * taken and no call to free it: nothing through that endpoint would start again until a restart.
 * Real Postgres, the real writer (which runs a closure again after a concurrent change).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StaleStateError } from '../../src/core/errors.js';
import { loadConfig, operationSettingsOf } from '../../src/daemon/config/config.js';
import { flowControlOf } from '../../src/daemon/config/flow.js';
import { claimInOwnWrite } from '../../src/daemon/engine/claim-probes.js';
import { claimWorkItems, type FlowControl } from '../../src/daemon/engine/producer.js';
import { createModelRouter } from '../../src/daemon/routing/wiring.js';
import { insertThread } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { loadOperations } from '../../src/operations/loader.js';
import { openRaceDatabase, type RaceDatabase } from '../helpers/pg-race.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let db: RaceDatabase;
let home: string;
let flow: FlowControl;
beforeEach(async () => {
  db = await openRaceDatabase();
  home = mkdtempSync(join(tmpdir(), 'cmb-claim-probes-'));
  const config = loadConfig(home, { OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' });
  flow = flowControlOf(config.flow, await loadOperations(home, [], operationSettingsOf(config)), createModelRouter(config, undefined));
  await insertThread(db.reader, { ...testThreadRow('a1'), space_id: 'a' });
  await insertWorkItem(db.reader, testWorkItemRow('a1', { project_id: 'a', not_before: 1 }));
});
afterEach(async () => {
  rmSync(home, { recursive: true, force: true });
  await db?.drop();
});

/** The default route's breaker, opened by five failures an hour ago: half-open now, its probe free. */
function halfOpenBreaker() {
  const breaker = flow.router.breaker(flow.router.defaultRoute);
  for (let i = 0; i < 5; i++) breaker.onTransientFailure(Date.now() - 3_600_000);
  expect(breaker.canAdmit(Date.now())).toBe(true);
  expect(breaker.snapshot().state).toBe('half_open');
  return breaker;
}

describe("a claim round's half-open probe", () => {
  it('taken by a run the writer runs again is free for the next run, which claims the item with it', async () => {
    const breaker = halfOpenBreaker();
    let runs = 0;
    const round = await claimInOwnWrite(db.write, async (tx, probes) => {
      const claimed = await claimWorkItems(tx, flow, 'd1', 1, 60_000, probes);
      // The first run took the probe, then met a guard another daemon's write had raced: the writer runs it again.
      if (++runs === 1) throw new StaleStateError('a raced guard');
      return claimed;
    });
    expect(runs).toBe(2);
    expect(round.breakerHeld).toBe(false);
    expect(round.claimed.map((c) => c.item.id)).toEqual(['a1']);
    // The committed run's probe is held by its call.
    expect(breaker.probing).toBe(true);
  });

  it('taken by a write that fails is free again: the next round claims the item', async () => {
    const breaker = halfOpenBreaker();
    await expect(
      claimInOwnWrite(db.write, async (tx, probes) => {
        await claimWorkItems(tx, flow, 'd1', 1, 60_000, probes);
        throw new Error('the round failed after its claim');
      }),
    ).rejects.toThrow('the round failed after its claim');
    expect(breaker.probing).toBe(false);
    const next = await claimInOwnWrite(db.write, (tx, probes) => claimWorkItems(tx, flow, 'd1', 1, 60_000, probes));
    expect(next.claimed.map((c) => c.item.id)).toEqual(['a1']);
  });
});
