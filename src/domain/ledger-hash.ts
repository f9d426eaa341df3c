/**
 * The ledger's hash chain. Each entry's hash covers the previous entry's hash, the canonical payload
 * bytes and the entry's metadata, so changing, removing or reordering any entry breaks every later link.
 */
import { createHash } from 'node:crypto';
import canonicalizeModule from 'canonicalize';

// The package is CommonJS (`module.exports = fn`) but its types declare an ES default export.
const canonicalize = canonicalizeModule as unknown as (value: unknown) => string | undefined;

export const GENESIS_HASH = '0'.repeat(64);

/** RFC 8785 canonical JSON: the same value always serializes to the same bytes. */
export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new TypeError('value cannot be represented as canonical JSON');
  return text;
}

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
  const metadata = canonicalJson({
    seq: f.seq,
    thread_id: f.thread_id,
    work_item_id: f.work_item_id,
    entry_type: f.entry_type,
    attempt: f.attempt,
    created_at: f.created_at,
  });
  return createHash('sha256').update(f.prev_hash).update('\n').update(f.payload).update('\n').update(metadata).digest('hex');
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
