/** Retention gaps: runs of removed entries, and crossing them only over checkpoints that link. */
import { describe, expect, it } from 'vitest';
import { GapBridge, splitIntoRuns } from '../../src/ledger/gaps.js';

const e = (seq: number) => ({ seq, prev_hash: `h${seq - 1}`, hash: `h${seq}` });

describe('splitIntoRuns', () => {
  it('groups consecutive seqs and keeps the hashes at both ends of each run', () => {
    expect(splitIntoRuns([e(7), e(2), e(3), e(5), e(6)])).toEqual([
      { from_seq: 2, to_seq: 3, hash_before: 'h1', hash_after: 'h3' },
      { from_seq: 5, to_seq: 7, hash_before: 'h4', hash_after: 'h7' },
    ]);
  });
});

describe('GapBridge', () => {
  const runs = [
    { from_seq: 2, to_seq: 3, hash_before: 'h1', hash_after: 'h3' },
    { from_seq: 4, to_seq: 4, hash_before: 'h3', hash_after: 'h4' },
    { from_seq: 9, to_seq: 10, hash_before: 'h8', hash_after: 'h10' },
  ];

  it('crosses a gap tiled by adjacent checkpoints, and a gap at the head', () => {
    const b = new GapBridge(runs);
    expect(b.cross(2, 5, 'h1')).toEqual({ ok: true, hash: 'h4', removed: 3 });
    expect(b.cross(9, null, 'h8')).toEqual({ ok: true, hash: 'h10', removed: 2 });
    expect(b.unused).toBe(0);
    expect(b.removed).toBe(5);
  });

  it('refuses a gap no checkpoint covers, a checkpoint that does not link, and one over live entries', () => {
    expect(new GapBridge(runs).cross(5, 7, 'h4')).toMatchObject({ ok: false, reason: expect.stringContaining('entries 5–6 are missing') });
    expect(new GapBridge(runs).cross(2, 5, 'tampered')).toMatchObject({ ok: false, reason: expect.stringContaining('does not link') });
    expect(new GapBridge(runs).cross(2, 3, 'h1')).toMatchObject({ ok: false, reason: expect.stringContaining('still exist') });
  });

  it('reports checkpoints never used (they claim entries that are still there)', () => {
    const b = new GapBridge(runs);
    b.cross(2, 5, 'h1');
    expect(b.unused).toBe(1);
  });
});
