/**
 * bench/diag-pg.ts's call-slot occupancy: how many items each daemon held (claimed, not yet finished) over a measured run,
 * time-weighted, and how long a freed slot stayed empty — from the times the items' writes stamped (`started_at`: the
 * claim round's clock, `finished_at`: the finish's) and the claiming daemon, which the item's row forgets at its end
 * (`lease_owner` is cleared): a trigger the diag installs notes each claim's owner in a side table (`recordClaimOwners`).
 */
import type pg from 'pg';
import { quantile } from './stats.js';

/**
 * Notes each claim's owner (the `lease_owner` a claim sets) in an unlogged side table, one row per claim: one trigger
 * call and one insert per claim on the server (its CPU per item counts them). Run once the daemons have migrated.
 */
export async function recordClaimOwners(client: pg.Client): Promise<void> {
  await client.query(`
    CREATE UNLOGGED TABLE diag_claims (item_id text NOT NULL, owner text NOT NULL, claimed_at bigint);
    CREATE FUNCTION diag_note_claim() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO diag_claims VALUES (NEW.id, NEW.lease_owner, NEW.started_at);
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
  const { rows } = await client.query<{ owner: string; claimed: string; finished: string; committed: string | null; claim_committed: string | null }>(
    `SELECT DISTINCT ON (w.id) c.owner, w.started_at AS claimed, w.finished_at AS finished,
            (extract(epoch FROM pg_xact_commit_timestamp(w.xmin)) * 1000)::bigint AS committed,
            (extract(epoch FROM pg_xact_commit_timestamp(c.xmin)) * 1000)::bigint AS claim_committed
       FROM llm_work_items w JOIN diag_claims c ON c.item_id = w.id
      WHERE w.status = 'applied' AND w.project_id = ANY($1::text[])
      ORDER BY w.id, c.claimed_at DESC`,
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
  const ends = held.map((h) => h.finished).sort((a, b) => a - b);
  const at = (share: number) => ends[Math.ceil(share * ends.length) - 1]!;
  const windows: [string, number, number][] = [
    ['ramp-up', startedWall, at(0.1)],
    ['steady 10–90 %', at(0.1), at(0.9)],
    ['ramp-down', at(0.9), ends[ends.length - 1]!],
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
  printSlotGaps(byOwner, windows[1]![1], windows[1]![2], slots);
}

/**
 * Between `from` and `to`, over each daemon's items (`byOwner`): the finish's own run (its stamp → its COMMIT, the engine
 * holding the slot), the producer's delay (a finish's COMMIT → the claim that refilled that slot: the daemon's finishes
 * and claims matched in order), the claim round's run (its stamp → its COMMIT, per item), a finish → the daemon's next
 * round, a finish's stamp → the refilling claim, and the rounds' sizes (a round's items share its `started_at`).
 */
function printSlotGaps(byOwner: readonly Held[][], from: number, to: number, slots: number): void {
  const nextRound: number[] = [];
  const refill: number[] = [];
  const finishRun: number[] = [];
  const freedToClaim: number[] = [];
  const roundRun: number[] = [];
  const roundSizes: number[] = [];
  for (const items of byOwner) {
    const claims = items.map((h) => h.claimed).sort((a, b) => a - b);
    const finishes = items.map((h) => h.finished).sort((a, b) => a - b);
    const rounds = [...new Set(claims)];
    for (const r of rounds) if (r >= from && r < to) roundSizes.push(claims.filter((c) => c === r).length);
    let k = 0;
    for (const f of finishes) {
      if (f < from || f >= to) continue;
      while (k < rounds.length && rounds[k]! < f) k++;
      if (k < rounds.length) nextRound.push(rounds[k]! - f);
    }
    // The daemon's slots: its first `slots` claims filled empty slots; each later claim fills the slot the
    // earliest unmatched finish freed.
    for (let i = slots; i < claims.length; i++) {
      const freed = finishes[i - slots]!;
      if (freed >= from && freed < to) refill.push(Math.max(0, claims[i]! - freed));
    }
    // The same from the finish's commit (its slot is freed after it): the finish's own run apart from the empty slot's wait.
    const commits = items
      .map((h) => h.committed)
      .filter((c): c is number => c !== null)
      .sort((a, b) => a - b);
    if (commits.length !== items.length) continue;
    for (let i = slots; i < claims.length; i++) {
      const freed = commits[i - slots]!;
      if (freed >= from && freed < to) freedToClaim.push(claims[i]! - freed);
    }
    for (const h of items) if (h.finished >= from && h.finished < to) finishRun.push(h.committed! - h.finished);
    for (const h of items) if (h.claimed >= from && h.claimed < to && h.claimCommitted !== null) roundRun.push(h.claimCommitted - h.claimed);
  }
  console.log(
    `steady 10–90 %: finish stamp → its commit, ms: median ${quantile(finishRun, 0.5)}, p90 ${quantile(finishRun, 0.9)}; finish's commit → the claim that refilled its slot (negative: claimed before the commit, clocks apart), ms: median ${quantile(freedToClaim, 0.5)}, p90 ${quantile(freedToClaim, 0.9)}, mean ${mean(freedToClaim).toFixed(1)}; claim round stamp → its commit (per item), ms: median ${quantile(roundRun, 0.5)}, p90 ${quantile(roundRun, 0.9)}`,
  );
  console.log(
    `steady 10–90 %: finish → the daemon's next claim round, ms: median ${quantile(nextRound, 0.5)}, p90 ${quantile(nextRound, 0.9)}; freed slot → its refill, ms: median ${quantile(refill, 0.5)}, p90 ${quantile(refill, 0.9)}, mean ${mean(refill).toFixed(1)}; claim rounds ${roundSizes.length}, items per round: median ${quantile(roundSizes, 0.5)}, mean ${mean(roundSizes).toFixed(1)}, p90 ${quantile(roundSizes, 0.9)}`,
  );
}

/** Item-ms held between `from` and `to`. */
function heldTime(items: readonly Held[], from: number, to: number): number {
  let sum = 0;
  for (const h of items) sum += Math.max(0, Math.min(h.finished, to) - Math.max(h.claimed, from));
  return sum;
}

function mean(values: readonly number[]): number {
  return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
}
