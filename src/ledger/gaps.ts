/**
 * Gaps in the ledger chain left by retention. `combine prune` removes runs of consecutive entries and
 * records, for each run, the chain hash before and after it (a checkpoint). Verification walks the
 * remaining entries and crosses each gap only over checkpoints that tile it exactly and link by hash.
 */

export interface LedgerRun {
  from_seq: number;
  to_seq: number;
  /** prev_hash of the first entry of the run. */
  hash_before: string;
  /** hash of the last entry of the run. */
  hash_after: string;
}

/**
 * Splits entries about to be removed (any order) into runs of consecutive seqs. A run never spans a
 * missing seq, so runs of different prunes never overlap.
 */
export function splitIntoRuns(entries: readonly { seq: number; prev_hash: string; hash: string }[]): LedgerRun[] {
  const sorted = [...entries].sort((a, b) => a.seq - b.seq);
  const runs: LedgerRun[] = [];
  for (const e of sorted) {
    const last = runs[runs.length - 1];
    if (last && e.seq === last.to_seq + 1) {
      last.to_seq = e.seq;
      last.hash_after = e.hash;
    } else {
      runs.push({ from_seq: e.seq, to_seq: e.seq, hash_before: e.prev_hash, hash_after: e.hash });
    }
  }
  return runs;
}

export type BridgeResult = { ok: true; hash: string; removed: number } | { ok: false; reason: string };

/** Crosses gaps in the chain using checkpoints; remembers which it used. */
export class GapBridge {
  private readonly byStart = new Map<number, LedgerRun>();
  private used = 0;
  removed = 0;

  constructor(runs: Iterable<LedgerRun>) {
    for (const r of runs) this.byStart.set(r.from_seq, r);
  }

  /**
   * Crosses from `fromSeq` (the first missing seq) up to `untilSeq` (the next present entry, exclusive;
   * null at the head of the chain: cross every checkpoint that continues it). `hash` is the chain hash
   * before the gap; the result is the chain hash after it.
   */
  cross(fromSeq: number, untilSeq: number | null, hash: string): BridgeResult {
    let seq = fromSeq;
    let removed = 0;
    while (untilSeq === null || seq < untilSeq) {
      const run = this.byStart.get(seq);
      if (!run) {
        if (untilSeq === null) break;
        const what = seq === untilSeq - 1 ? `entry ${seq} is missing` : `entries ${seq}–${untilSeq - 1} are missing`;
        return { ok: false, reason: `${what} and no checkpoint covers it` };
      }
      if (run.hash_before !== hash)
        return { ok: false, reason: `the checkpoint of entries ${run.from_seq}–${run.to_seq} does not link to the chain before it` };
      if (untilSeq !== null && run.to_seq >= untilSeq)
        return { ok: false, reason: `the checkpoint of entries ${run.from_seq}–${run.to_seq} covers entries that still exist` };
      hash = run.hash_after;
      removed += run.to_seq - run.from_seq + 1;
      seq = run.to_seq + 1;
      this.used++;
    }
    this.removed += removed;
    return { ok: true, hash, removed };
  }

  /** Checkpoints no gap needed: they claim removals of entries that are still there. */
  get unused(): number {
    return this.byStart.size - this.used;
  }
}
