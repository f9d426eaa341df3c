/**
 * Postgres: a claim round and the start of the items it claimed, in one transaction. The start (starts.ts:
 * the items and threads running, each item's `prompt` entry, committed before its call is sent) was a
 * transaction of its own after the claim's: a commit per round more, and at 3 daemons ~29 ms median
 * between an item's claim and its start (bench/README.md). Here the round's transaction runs, after its
 * last claim, the start of those of its items whose start sends a call (at most a start slice's), and the
 * round commits them `running` with their prompts: what the claim reserved and the call it admitted are
 * committed with the prompt, before any call is sent.
 *
 * Only an item whose start sends a call is started here; one whose start finds its thread canceled, its
 * answer already recorded (a replay), its request unbuildable or its answer in the cache is left claimed,
 * and starts as before, in a write of its own, after the round's commit: that start gives its reservation
 * back (the claim's reservations are inserted at this transaction's COMMIT, so a release here would find
 * none) under its budget lock (which this round, holding other rows, may not wait for), and the item's
 * admission goes back when no call follows (item-pipeline.ts).
 *
 * LOCK ORDER (engine/tx.ts): the round holds its items (1), its budget locks and scopes (2) when its start
 * reads them again (rows it holds: no wait) and then takes their threads and orchestrations in one statement
 * (4, starts.ts `startThreads`), after every claim of the round; its COMMIT's query queues the items'
 * `running` and the prompts' append behind the claims' reservations (5). A round of many items holds its
 * rows longer (other daemons' rounds pass over them: SKIP LOCKED), and its COMMIT now takes the ledger's
 * chain head.
 *
 * A round whose start fails other than by storage (a value refused, a guard still stale after the
 * writer's runs again) runs again as a claim alone: its items then start in writes of their own, where a
 * failing item fails alone, as before, instead of every round failing with it.
 */
import type { Clock } from '../../core/clock.js';
import { InfraError } from '../../core/errors.js';
import { lockWorkItemsWithThreads } from '../../db/item-with-thread.js';
import { claimInOwnWrite, type RoundAdmissions } from './claim-admissions.js';
import type { EngineContext } from './leased.js';
import type { ClaimRound } from './producer.js';
import { START_SLICE } from './start-slots.js';
import { decideStart, startPlanned, type CallStart, type StartPlan } from './starts.js';
import type { Tx, Write } from './tx.js';

/** A claim round, and the calls started in its transaction, by item id (the round's other items start on their own). */
export interface StartedRound {
  round: ClaimRound;
  calls: ReadonlyMap<string, CallStart>;
}

const NONE_STARTED: ReadonlyMap<string, CallStart> = new Map();

/**
 * `claim` (a claim round) in its own write (claim-admissions.ts `claimInOwnWrite`); on Postgres with, in
 * the same transaction, the start of its items that send a call (`startSendingItems`). There a failure of
 * the whole that is not storage's runs the round again without the start. SQLite starts none here: its one
 * writer holds no row lock across a round trip, and its group commit shares a commit between the writes of a turn.
 */
export async function claimRoundInOwnWrite(
  write: Write,
  clock: Clock,
  ctx: EngineContext,
  dialect: 'sqlite' | 'postgres',
  claim: (tx: Tx, admissions: RoundAdmissions) => Promise<ClaimRound>,
): Promise<StartedRound> {
  const claimAlone = async () => ({ round: await claimInOwnWrite(write, clock, claim), calls: NONE_STARTED });
  if (dialect !== 'postgres') return claimAlone();
  try {
    return await claimInOwnWrite(write, clock, async (tx, admissions) => {
      const round = await claim(tx, admissions);
      return { round, calls: await startSendingItems(tx, ctx, round) };
    });
  } catch (err) {
    if (err instanceof InfraError) throw err;
    return claimAlone();
  }
}

/**
 * The start, in the round's transaction, of the round's first `START_SLICE` items whose start sends a call:
 * their rows read again with what a start needs (its `start` read-ahead: the item's last entry), in one
 * statement, then decided as a start decides (starts.ts `decideStart`); those that send are started
 * (`startPlanned`), the others left for their own start.
 */
async function startSendingItems(tx: Tx, ctx: EngineContext, round: ClaimRound): Promise<ReadonlyMap<string, CallStart>> {
  const claimed = round.claimed.slice(0, START_SLICE);
  if (claimed.length === 0) return NONE_STARTED;
  const reads = await lockWorkItemsWithThreads(
    tx.sql,
    claimed.map((c) => c.item.id),
    'start',
  );
  const sending: StartPlan[] = [];
  for (const c of claimed) {
    const plan = await decideStart(tx, ctx, { itemId: c.item.id, claimed: c.request }, reads.get(c.item.id));
    if (plan.kind === 'send' && !plan.cached) sending.push(plan);
  }
  if (sending.length === 0) return NONE_STARTED;
  const results = await startPlanned(tx, ctx, sending);
  const started = new Map<string, CallStart>();
  for (const [at, plan] of sending.entries()) {
    const result = results[at];
    if (result?.kind === 'call') started.set(plan.item.id, result);
  }
  return started;
}
