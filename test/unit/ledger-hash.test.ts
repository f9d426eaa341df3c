import { describe, expect, it } from 'vitest';
import { canonicalMetadata, findChainBreak, GENESIS_HASH, ledgerEntryHash } from '../../src/ledger/chain.js';
import { canonicalJson } from '../../src/domain/canonical-json.js';

function chain(n: number) {
  const out = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    const e = {
      seq,
      thread_id: 't',
      work_item_id: 'w',
      entry_type: 'prompt',
      attempt: 1,
      created_at: seq,
      payload: canonicalJson({ n: seq }),
      prev_hash: prev,
    };
    const hash = ledgerEntryHash(e);
    out.push({ ...e, hash });
    prev = hash;
  }
  return out;
}

describe('ledger hash chain', () => {
  it('canonical JSON does not depend on key order', () => {
    expect(canonicalJson({ b: 1, a: [2, { d: 3, c: 4 }] })).toBe(canonicalJson({ a: [2, { c: 4, d: 3 }], b: 1 }));
  });

  it('verifies an intact chain', () => {
    expect(findChainBreak(chain(5), GENESIS_HASH)).toBeNull();
  });

  it('names the entry whose payload changed', () => {
    const c = chain(5);
    c[2] = { ...c[2]!, payload: canonicalJson({ n: 999 }) };
    expect(findChainBreak(c, GENESIS_HASH)).toEqual({ seq: 3, reason: 'hash does not match the entry contents' });
  });

  it('detects a removed entry at the next link', () => {
    const c = chain(5);
    c.splice(1, 1);
    expect(findChainBreak(c, GENESIS_HASH)?.seq).toBe(3);
  });

  it('covers the metadata, not only the payload', () => {
    const c = chain(3);
    c[1] = { ...c[1]!, entry_type: 'response' };
    expect(findChainBreak(c, GENESIS_HASH)?.seq).toBe(2);
  });

  it('writes the metadata as canonical JSON of its six fields', () => {
    const entries = [
      { seq: 1, thread_id: 't', work_item_id: 'w', entry_type: 'prompt', attempt: 1, created_at: 1_795_000_000_000 },
      { seq: 9_007_199_254_740_991, thread_id: 'th_"quoted"\\', work_item_id: null, entry_type: 'error', attempt: null, created_at: 0 },
      { seq: 3, thread_id: 'ünïcode \u2028 \ud800', work_item_id: 'wi\n', entry_type: 'mutation_report', attempt: 12, created_at: -1 },
    ];
    for (const e of entries) expect(canonicalMetadata(e)).toBe(canonicalJson({ ...e }));
  });
});
