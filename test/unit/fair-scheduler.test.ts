/** The fair scheduler's decisions under a fake clock: class order, aging, weighted round robin. */
import { describe, expect, it } from 'vitest';
import { FairScheduler, type Candidate } from '../../src/domain/fair-scheduler.js';
import { PRIORITY_BULK, PRIORITY_INTERACTIVE, PRIORITY_SCHEDULED } from '../../src/domain/operations.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const item = (id: string, project_id: string, priority: number, not_before = T0): Candidate => ({ id, project_id, priority, not_before });

/** Runs `n` picks where every project always has work at `priority`; returns the project sequence. */
function rotation(s: FairScheduler, projects: string[], n: number, now = T0): string {
  return Array.from(
    { length: n },
    () =>
      s.pick(
        projects.map((p) => item(`${p}-next`, p, PRIORITY_BULK, now)),
        now,
      )!.project_id,
  ).join('');
}

describe('fair scheduler', () => {
  it('an interactive item outranks bulk and scheduled items, whatever their project or age', () => {
    const s = new FairScheduler({ weights: {}, defaultWeight: 1, agingStepMs: 60_000 });
    const pick = s.pick([item('a1', 'A', PRIORITY_BULK), item('s1', 'S', PRIORITY_SCHEDULED), item('b1', 'B', PRIORITY_INTERACTIVE)], T0 + 1000);
    expect(pick!.id).toBe('b1');
    expect(s.pick([item('a1', 'A', PRIORITY_BULK), item('s1', 'S', PRIORITY_SCHEDULED)], T0)!.id).toBe('a1');
  });

  it('equal weights alternate projects; weights 3:1 give three claims to one', () => {
    expect(rotation(new FairScheduler({ weights: {}, defaultWeight: 1, agingStepMs: 0 }), ['A', 'B'], 6)).toBe('ABABAB');
    const weighted = rotation(new FairScheduler({ weights: { A: 3 }, defaultWeight: 1, agingStepMs: 0 }), ['A', 'B'], 8);
    expect(weighted).toBe('AABAAABA'); // smooth: no long burst, exactly 6 of 8
  });

  it('a project that appears competes at once instead of waiting for a long backlog to drain', () => {
    const s = new FairScheduler({ weights: {}, defaultWeight: 1, agingStepMs: 0 });
    expect(rotation(s, ['A'], 50)).toBe('A'.repeat(50));
    expect(rotation(s, ['A', 'B'], 4)).toMatch(/^(AB|BA){2}$/);
  });

  it('waiting ages an item one class step per aging step, down to interactive level, so nothing starves', () => {
    const s = new FairScheduler({ weights: {}, defaultWeight: 1, agingStepMs: 60_000 });
    const old = item('old', 'A', PRIORITY_SCHEDULED, T0);
    expect(s.effectivePriority(old, T0 + 59_999)).toBe(20);
    expect(s.effectivePriority(old, T0 + 5 * 60_000)).toBe(15);
    expect(s.effectivePriority(old, T0 + 60 * 60_000)).toBe(0);
    // Fresh bulk work no longer outranks scheduled work that has waited 11 steps.
    const fresh = item('fresh', 'B', PRIORITY_BULK, T0 + 11 * 60_000);
    expect(s.pick([old, fresh], T0 + 11 * 60_000)!.id).toBe('old');
  });

  it('picks a project’s oldest item of the winning class', () => {
    const s = new FairScheduler({ weights: {}, defaultWeight: 1, agingStepMs: 0 });
    expect(s.pick([item('new', 'A', PRIORITY_BULK, T0 + 5), item('old', 'A', PRIORITY_BULK, T0)], T0 + 10)!.id).toBe('old');
    expect(s.pick([], T0)).toBeNull();
  });

  it("a daemon's own projects compete alone within the winning class; the others when it has none there", () => {
    const s = new FairScheduler({ weights: { A: 3 }, defaultWeight: 1, agingStepMs: 60_000 });
    const own = new Set(['A', 'B']);
    const bulk = (p: string) => item(`${p}-next`, p, PRIORITY_BULK);
    // Own projects only, in their weighted rotation (3:1), while C and D have items of the same class.
    const picks = Array.from({ length: 8 }, () => s.pick(['A', 'B', 'C', 'D'].map(bulk), T0, own)!.project_id).join('');
    expect(picks).toBe('AABAAABA');
    // None of its own is a candidate: the others take turns.
    expect([s.pick(['C', 'D'].map(bulk), T0, own)!.project_id, s.pick(['C', 'D'].map(bulk), T0, own)!.project_id].sort()).toEqual(['C', 'D']);
    // Class first: another project's interactive item, or one aged into a more urgent class, outranks its own bulk.
    expect(s.pick([bulk('A'), item('c1', 'C', PRIORITY_INTERACTIVE)], T0, own)!.id).toBe('c1');
    expect(s.pick([item('a1', 'A', PRIORITY_SCHEDULED, T0 + 11 * 60_000), item('c-old', 'C', PRIORITY_SCHEDULED, T0)], T0 + 11 * 60_000, own)!.id).toBe(
      'c-old',
    );
  });
});
