/**
 * The ledger: the append-only, hash-chained record of every prompt, answer, check, change and error —
 * what was paid for and why. This file is its hash chain; the rest of src/ledger/ is the room around it.
 *
 * The chain's rules
 *   1. Entries are only appended, by `appendLedgerEntry` (store.ts), inside the writer's transaction,
 *      which reads the head: links can neither fork nor skip. Triggers refuse UPDATE and DELETE in the
 *      database itself (migrations 0001 and 0005).
 *   2. `seq` is global; each entry's `prev_hash` is the previous entry's `hash` (the first links to
 *      GENESIS_HASH). hash = sha256(prev_hash ‖ payload ‖ canonical metadata), where the payload is
 *      stored as its RFC 8785 bytes — exactly the bytes hashed. Changing, removing or reordering any
 *      entry breaks every later link.
 *   3. Secrets are cut out before anything is recorded or hashed (the executor's redaction).
 *   4. Only `combine prune` removes entries: whole runs of finished threads, each over a checkpoint that
 *      keeps the hashes on both sides of the cut (gaps.ts). Seqs are never reused.
 *   5. An imported entry takes a new place in this chain; its place and hash in the exporting home are
 *      kept, so its original hash can be recomputed (imports-verify.ts).
 *
 * The room: chain.ts, gaps.ts, completeness.ts and summary.ts are pure; store.ts and imports-store.ts
 * hold its SQL; verify.ts (+ completeness-check.ts, imports-verify.ts) is `ledger verify`;
 * export-format.ts and transfer.ts are `ledger export|import`; replay.ts is `combine replay`.
 */
import { createHash } from 'node:crypto';

export const GENESIS_HASH = '0'.repeat(64);

export interface HashedFields {
  seq: number;
  thread_id: string;
  work_item_id: string | null;
  entry_type: string;
  attempt: number | null;
  created_at: number;
  /** The canonical payload text exactly as stored. */
  payload: string;
  prev_hash: string;
}

/** sha256(prev_hash ‖ payload ‖ canonical metadata), hex. */
export function ledgerEntryHash(f: HashedFields): string {
  return createHash('sha256').update(f.prev_hash).update('\n').update(f.payload).update('\n').update(canonicalMetadata(f)).digest('hex');
}

/**
 * `canonicalJson` of the six metadata fields, written out: its keys in sorted order, each value as
 * JSON.stringify writes it (which is what canonical JSON does for a string, a number or null). The
 * generic serializer's key sort and string building, four times per item, showed in the engine's
 * allocation profile. test/unit/ledger-hash.test.ts checks it against `canonicalJson`.
 */
export function canonicalMetadata(f: Omit<HashedFields, 'payload' | 'prev_hash'>): string {
  return `${metadataBeforeSeq(f)}${JSON.stringify(f.seq)}${metadataAfterSeq(f)}`;
}

/**
 * The canonical metadata of an entry whose seq is not known yet, as the text before and after the seq's
 * digits (the database links it at the head: migrations/pg/0008). Keys are sorted: `seq` is the fourth.
 */
export function canonicalMetadataAroundSeq(f: Omit<HashedFields, 'payload' | 'prev_hash' | 'seq'>): [string, string] {
  return [metadataBeforeSeq(f), metadataAfterSeq(f)];
}

/** The canonical metadata's text up to the seq's digits: the keys that sort before `seq`, then `"seq":`. */
function metadataBeforeSeq(f: Omit<HashedFields, 'payload' | 'prev_hash' | 'seq'>): string {
  return `{"attempt":${JSON.stringify(f.attempt)},"created_at":${JSON.stringify(f.created_at)},"entry_type":${JSON.stringify(f.entry_type)},"seq":`;
}

/** The canonical metadata's text after the seq's digits: the keys that sort after `seq`. */
function metadataAfterSeq(f: Omit<HashedFields, 'payload' | 'prev_hash' | 'seq'>): string {
  return `,"thread_id":${JSON.stringify(f.thread_id)},"work_item_id":${JSON.stringify(f.work_item_id)}}`;
}

export interface ChainBreak {
  seq: number;
  reason: string;
}

/**
 * Checks a run of entries in seq order against the hash that precedes them. Returns the first break,
 * or null when every link holds.
 */
export function findChainBreak(entries: Iterable<HashedFields & { hash: string }>, startPrevHash: string): ChainBreak | null {
  let prev = startPrevHash;
  for (const e of entries) {
    if (e.prev_hash !== prev) return { seq: e.seq, reason: 'prev_hash does not match the previous entry' };
    if (ledgerEntryHash(e) !== e.hash) return { seq: e.seq, reason: 'hash does not match the entry contents' };
    prev = e.hash;
  }
  return null;
}
