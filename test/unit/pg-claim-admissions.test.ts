/**
 * A half-open breaker's probe and the rate limiter's request and tokens are taken in memory by the claim
 * round that admits a call (engine/claim-admissions.ts). A run of the round that does not commit gives them
 * back: when the writer runs the round again (a guard that raced another daemon), and when the write fails;
 * so does a claim lost after its admission, in a round that commits.
 * A probe kept would hold the endpoint half-open with no call to free it: nothing through that endpoint
 * would start again until a restart; tokens kept would hold the next calls back for up to a minute.
 * Real Postgres, the real writer (which runs a closure again after a concurrent change).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { StaleStateError } from '../../src/core/errors.js';
import { type DaemonConfig, loadConfig, operationSettingsOf } from '../../src/daemon/config/config.js';
import { flowControlOf } from '../../src/daemon/config/flow.js';
import { claimInOwnWrite } from '../../src/daemon/engine/claim-admissions.js';
import { claimWorkItems, type FlowControl } from '../../src/daemon/engine/producer.js';
import type { Write } from '../../src/daemon/engine/tx.js';
import { createModelRouter } from '../../src/daemon/routing/wiring.js';
import { insertThread } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { loadOperations } from '../../src/operations/loader.js';
import { NO_HOOKS, oneAttemptWrite, openRaceDatabase, type RaceDatabase } from '../helpers/pg-race.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let db: RaceDatabase;
let home: string;
let flow: FlowControl;
/** This daemon's flow control; `env` adds to its environment (a rate limit), `edit` changes its config (a budget). */
async function flowOf(env: NodeJS.ProcessEnv = {}, edit: (config: DaemonConfig) => void = () => {}): Promise<FlowControl> {
  const config = loadConfig(home, { OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model', ...env });
  edit(config);
  return flowControlOf(config.flow, await loadOperations(home, [], operationSettingsOf(config)), createModelRouter(config, undefined));
}
beforeEach(async () => {
  db = await openRaceDatabase();
  home = mkdtempSync(join(tmpdir(), 'cmb-claim-admissions-'));
  flow = await flowOf();
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

/** One claim round of one item through `write`, in its own write (claim-admissions.ts). */
const claimRound = (write: Write = db.write) => claimInOwnWrite(write, systemClock, (tx, admissions) => claimWorkItems(tx, flow, 'd1', 1, 60_000, admissions));

/** A round whose first run met a guard another daemon's write had raced: the writer ran it again. */
async function roundRunTwice() {
  let runs = 0;
  const round = await claimInOwnWrite(db.write, systemClock, async (tx, admissions) => {
    const claimed = await claimWorkItems(tx, flow, 'd1', 1, 60_000, admissions);
    if (++runs === 1) throw new StaleStateError('a raced guard');
    return claimed;
  });
  expect(runs).toBe(2);
  return round;
}

/** A round whose write failed after its claim. */
async function roundThatFails() {
  await expect(
    claimInOwnWrite(db.write, systemClock, async (tx, admissions) => {
      await claimWorkItems(tx, flow, 'd1', 1, 60_000, admissions);
      throw new Error('the round failed after its claim');
    }),
  ).rejects.toThrow('the round failed after its claim');
}

describe("a claim round's half-open probe", () => {
  it('taken by a run the writer runs again is free for the next run, which claims the item with it', async () => {
    const breaker = halfOpenBreaker();
    const round = await roundRunTwice();
    expect(round.breakerHeld).toBe(false);
    expect(round.claimed.map((c) => c.item.id)).toEqual(['a1']);
    // The committed run's probe is held by its call.
    expect(breaker.probing).toBe(true);
  });

  it('taken by a write that fails is free again: the next round claims the item', async () => {
    const breaker = halfOpenBreaker();
    await roundThatFails();
    expect(breaker.probing).toBe(false);
    expect((await claimRound()).claimed.map((c) => c.item.id)).toEqual(['a1']);
  });
});

describe("a claim round's rate-limit admission", () => {
  // One request a minute: an admission that is not given back holds the next call back for a minute.
  beforeEach(async () => {
    flow = await flowOf({ COMBINE_REQUESTS_PER_MINUTE: '1' });
  });

  it('taken by a run the writer runs again is free for the next run, which claims the item with it', async () => {
    const round = await roundRunTwice();
    expect(round.limitedUntil).toBeNull();
    expect(round.claimed.map((c) => c.item.id)).toEqual(['a1']);
  });

  it('taken by a write that fails is free again: the next round claims the item at once', async () => {
    await roundThatFails();
    expect((await claimRound()).claimed.map((c) => c.item.id)).toEqual(['a1']);
    // The committed round's call holds the minute's request: the next call waits.
    expect(flow.limiter.admit(flow.router.defaultRoute.key, 1, Date.now()).ok).toBe(false);
  });

  it('taken for a claim then lost (its scope taken by another daemon) is free again for the next round', async () => {
    // A budgeted project: the round admits the call before it claims the item (producer.ts `admitThenClaim`).
    flow = await flowOf({ COMBINE_REQUESTS_PER_MINUTE: '1' }, (config) => {
      config.flow.budgets.projects.a = { total_tokens: 1_000_000_000 };
    });
    const budgeted = oneAttemptWrite(db.pool, { ...NO_HOOKS, budgeted: () => true });
    const other = await db.pool.connect();
    try {
      // Another daemon's transaction is taking the item's scope right now: the claim passes it over.
      await other.query('BEGIN');
      await other.query("SELECT pg_advisory_xact_lock(hashtextextended('lock:' || $1, 0))", ['p:a1']);
      const lost = await claimRound(budgeted);
      expect(lost.claimed).toEqual([]);
      await other.query('ROLLBACK');
    } finally {
      other.release();
    }
    const next = await claimRound(budgeted);
    expect(next.limitedUntil).toBeNull();
    expect(next.claimed.map((c) => c.item.id)).toEqual(['a1']);
  });
});
