/**
 * bench/diag-pg.ts's call-slot occupancy: how many items each daemon held (claimed, not yet finished) over a measured run,
 * time-weighted, and how long a freed slot stayed empty — from the times the items' writes stamped (`started_at`: the
 * FIRST claim round's clock, which a requeued item keeps, so the figures hold for items run once: the count of items run
 * more than once is printed; `finished_at`: the finish's) and the claiming daemon, which the item's row forgets at its end
 * (`lease_owner` is cleared): a trigger the diag installs notes each claim's owner in a side table (`recordClaimOwners`).
 * Only with DIAG_SLOTS=1 (bench/diag-pg.ts): the trigger and the commit timestamps add to the server's work per item.
 */
import type pg from 'pg';
import { mean, quantile } from './stats.js';

/**
 * Notes each claim's owner (the `lease_owner` a claim sets) in an unlogged side table, one row per claim: one trigger
 * call and one insert per claim on the server (its CPU per item counts them). Run once the daemons have migrated.
 */
export async function recordClaimOwners(client: pg.Client): Promise<void> {
  await client.query(`
    CREATE UNLOGGED TABLE diag_claims (seq bigint GENERATED ALWAYS AS IDENTITY, item_id text NOT NULL, owner text NOT NULL);
    CREATE FUNCTION diag_note_claim() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO diag_claims (item_id, owner) VALUES (NEW.id, NEW.lease_owner);
      RETURN NULL;
    END $$;
    CREATE TRIGGER diag_note_claim AFTER UPDATE OF lease_owner ON llm_work_items FOR EACH ROW
      WHEN (NEW.status = 'claimed' AND NEW.lease_owner IS NOT NULL AND NEW.lease_owner IS DISTINCT FROM OLD.lease_owner)
      EXECUTE FUNCTION diag_note_claim();`);
}

interface Held {
  owner: string;
  claimed: number;
  /** The finish's clock reading when its closure ran (`finished_at`). */
  finished: number;
  /** When the finish committed (the server's commit timestamp of the row's last change), when the server tracks them. */
  committed: number | null;
  /** When its claim round committed (its side-table row's commit timestamp). */
  claimCommitted: number | null;
}

/**
 * Over the applied items of `projects`: the mean number of items each daemon held in the ramp-up (the first submit to 10 %
 * applied), the steady middle (10 % to 90 %) and the ramp-down (90 % to the last), of `slots`; each project's queueing and
 * each daemon's first claim and last finish; and the steady middle's gaps (`printSlotGaps`).
 */
export async function printSlotOccupancy(client: pg.Client, projects: readonly string[], startedWall: number, slots: number): Promise<void> {
  // An item's last claim is its side table's last row (`seq`): every claim of a requeued item has the same `started_at`.
  const { rows } = await client.query<{
    owner: string;
    attempt: number;
    claimed: string;
    finished: string;
    committed: string | null;
    claim_committed: string | null;
  }>(
    `SELECT DISTINCT ON (w.id) c.owner, w.attempt, w.started_at AS claimed, w.finished_at AS finished,
            (extract(epoch FROM pg_xact_commit_timestamp(w.xmin)) * 1000)::bigint AS committed,
            (extract(epoch FROM pg_xact_commit_timestamp(c.xmin)) * 1000)::bigint AS claim_committed
       FROM llm_work_items w JOIN diag_claims c ON c.item_id = w.id
      WHERE w.status = 'applied' AND w.project_id = ANY($1::text[])
      ORDER BY w.id, c.seq DESC`,
    [projects],
  );
  const held: Held[] = rows.map((r) => ({
    owner: r.owner,
    claimed: Number(r.claimed),
    finished: Number(r.finished),
    committed: r.committed === null ? null : Number(r.committed),
    claimCommitted: r.claim_committed === null ? null : Number(r.claim_committed),
  }));
  if (held.length === 0) return;
  const rerun = rows.filter((r) => r.attempt > 1).length;
  if (rerun > 0)
    console.log(
      `slot occupancy: ${rerun} of ${rows.length} items ran more than once (attempt > 1): their started_at is their first claim's, so their held time includes the backoff and the figures below are off`,
    );
  const ends = held.map((h) => h.finished).sort((a, b) => a - b);
  const windows: [string, number, number][] = [
    ['ramp-up', startedWall, quantile(ends, 0.1)],
    ['steady 10–90 %', quantile(ends, 0.1), quantile(ends, 0.9)],
    ['ramp-down', quantile(ends, 0.9), ends[ends.length - 1]!],
  ];
  const owners = [...new Set(held.map((h) => h.owner))].sort();
  const byOwner = owners.map((o) => held.filter((h) => h.owner === o));
  const occupancy = windows.map(([name, from, to]) => {
    const each = byOwner.map((items) => heldTime(items, from, to) / Math.max(to - from, 1));
    return `${name} (${((to - from) / 1000).toFixed(1)} s) ${each.map((v) => v.toFixed(1)).join(' + ')} (${((100 * mean(each)) / slots).toFixed(0)} %)`;
  });
  console.log(`slot occupancy, mean items held per daemon of ${slots}: ${occupancy.join('; ')}`);
  // The run's start: each project's items stamped by its generate-all (its closure's clock; they are claimable at its commit).
  const queued = await client.query<{ first: string; last: string }>(
    'SELECT min(created_at) AS first, max(created_at) AS last FROM llm_work_items WHERE project_id = ANY($1::text[]) GROUP BY project_id ORDER BY 1',
    [projects],
  );
  const s = (t: number) => ((t - startedWall) / 1000).toFixed(2);
  const firstClaims = byOwner.map((items) => Math.min(...items.map((h) => h.claimed)));
  const lastEnds = byOwner.map((items) => Math.max(...items.map((h) => h.finished)));
  console.log(
    `run's start and end (s from the first submit): each project's items stamped ${queued.rows.map((r) => `${s(Number(r.first))}–${s(Number(r.last))}`).join(', ')}; each daemon's first claim ${firstClaims.map(s).join(', ')}, last finish ${lastEnds.map(s).join(', ')}`,
  );
  printSlotGaps(owners, byOwner, windows[1]![1], windows[1]![2], slots);
}

/**
 * Between `from` and `to`, over each daemon's items (`byOwner`), a slot's cycle in four parts, the means added up: the
 * refill gap (a finish's COMMIT → the claim that refilled that slot, the daemon's finish commits and claims matched in
 * order: its first `slots` claims filled empty slots), the claim round's run (the item's claim stamp → its round's
 * COMMIT, per item: it starts after that), the item's work (its round's COMMIT → its finish's stamp) and the finish's
 * own run (its stamp → its COMMIT: the engine holds the slot until then). The refill gap and the round's run are the
 * producer's. Also a finish's COMMIT → the daemon's next claim round, and the rounds' sizes (a round's items share
 * `started_at`). Gaps are kept signed (negative: the two stamps' clocks apart). A daemon (`owners`, in `byOwner`'s order)
 * with an item lacking a commit time (not tracked) is left out of all but the round sizes, and the line names it. The
 * p50s and p90s are by nearest rank (stats.ts `quantile`: of an even count, the lower middle).
 */
function printSlotGaps(owners: readonly string[], byOwner: readonly Held[][], from: number, to: number, slots: number): void {
  const refill: number[] = [];
  const roundRun: number[] = [];
  const work: number[] = [];
  const finishRun: number[] = [];
  const nextRound: number[] = [];
  const roundSizes: number[] = [];
  const dropped: string[] = [];
  byOwner.forEach((items, d) => {
    const claims = items.map((h) => h.claimed).sort((a, b) => a - b);
    const rounds = [...new Set(claims)];
    for (const r of rounds) if (r >= from && r < to) roundSizes.push(claims.filter((c) => c === r).length);
    const untracked = items.filter((h) => h.committed === null || h.claimCommitted === null).length;
    if (untracked > 0) {
      dropped.push(`${owners[d]}'s (${untracked} of ${items.length} items without a commit time)`);
      return;
    }
    const commits = items.map((h) => h.committed!).sort((a, b) => a - b);
    for (let i = slots; i < claims.length; i++) {
      const freed = commits[i - slots]!;
      if (freed >= from && freed < to) refill.push(claims[i]! - freed);
    }
    let k = 0;
    for (const c of commits) {
      if (c < from || c >= to) continue;
      while (k < rounds.length && rounds[k]! < c) k++;
      if (k < rounds.length) nextRound.push(rounds[k]! - c);
    }
    for (const h of items) {
      if (h.finished < from || h.finished >= to) continue;
      roundRun.push(h.claimCommitted! - h.claimed);
      work.push(h.finished - h.claimCommitted!);
      finishRun.push(h.committed! - h.finished);
    }
  });
  const parts = [refill, roundRun, work, finishRun].map(mean);
  const cycle = parts.reduce((a, b) => a + b, 0);
  const ms = (v: readonly number[]) => `p50 ${quantile(v, 0.5)}, p90 ${quantile(v, 0.9)}, mean ${mean(v).toFixed(1)}`;
  console.log(
    `steady 10–90 %, ms: finish COMMIT → the claim that refilled its slot ${ms(refill)}; claim stamp → its round's COMMIT ${ms(roundRun)}; round's COMMIT → finish stamp ${ms(work)}; finish stamp → its COMMIT ${ms(finishRun)}; finish COMMIT → the daemon's next claim round ${ms(nextRound)}${dropped.length > 0 ? `; left out: ${dropped.join(', ')}` : ''}`,
  );
  console.log(
    `steady 10–90 %: a slot's cycle, means, ms: refill ${parts[0]!.toFixed(1)} + round's run ${parts[1]!.toFixed(1)} + work ${parts[2]!.toFixed(1)} + finish's run ${parts[3]!.toFixed(1)} = ${cycle.toFixed(1)}; the producer's (refill + round's run) ${((100 * (parts[0]! + parts[1]!)) / Math.max(cycle, 1)).toFixed(1)} %; claim rounds ${roundSizes.length}, items per round: p50 ${quantile(roundSizes, 0.5)}, mean ${mean(roundSizes).toFixed(1)}, p90 ${quantile(roundSizes, 0.9)}`,
  );
}

/** Item-ms held between `from` and `to`. */
function heldTime(items: readonly Held[], from: number, to: number): number {
  let sum = 0;
  for (const h of items) sum += Math.max(0, Math.min(h.finished, to) - Math.max(h.claimed, from));
  return sum;
}
