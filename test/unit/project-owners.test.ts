/**
 * Which daemon owns which project (domain/project-owners.ts): balanced when projects are few, stable when a
 * project drains or a daemon joins or leaves, the same whatever order the lists come in; and one daemon's
 * view kept between claim rounds.
 */
import { describe, expect, it } from 'vitest';
import { assignProjectOwners, OwnProjects } from '../../src/domain/project-owners.js';

/** Owner ids as the daemons make them: a home id, then a random UUID (runtime/owner.ts). */
const daemons = (n: number, from = 0) =>
  Array.from(
    { length: n },
    (_, i) => `${(0x1f3a5b7c9d + (from + i) * 7919).toString(16).padStart(16, '0')}:6f1c2d3e-4a5b-4c6d-8e7f-${String(from + i).padStart(12, '0')}`,
  );
const projects = (n: number) => Array.from({ length: n }, (_, i) => `project-${i}`);

function loads(owners: Map<string, string>): number[] {
  const by = new Map<string, number>();
  for (const d of owners.values()) by.set(d, (by.get(d) ?? 0) + 1);
  return [...by.values()].sort((a, b) => a - b);
}

/** Projects of both assignments whose owner differs. */
function moved(before: Map<string, string>, after: Map<string, string>): number {
  let n = 0;
  for (const [p, d] of after) if (before.has(p) && before.get(p) !== d) n++;
  return n;
}

describe('project owners', () => {
  it('shares projects out evenly: ⌊P ÷ D⌋ or one more each, however few', () => {
    for (const [p, d, expected] of [
      [6, 3, [2, 2, 2]],
      [7, 3, [2, 2, 3]],
      [5, 3, [1, 2, 2]],
      [2, 3, [1, 1]],
      [1, 2, [1]],
      [61, 4, [15, 15, 15, 16]],
    ] as const) {
      expect(loads(assignProjectOwners(projects(p), daemons(d))), `${p} projects on ${d} daemons`).toEqual(expected);
    }
    // Any set of daemon ids, not only these: 200 random draws of 6 projects on 3 daemons are all 2/2/2.
    for (let i = 0; i < 200; i++) {
      const ds = Array.from({ length: 3 }, () => crypto.randomUUID());
      expect(loads(assignProjectOwners(projects(6), ds))).toEqual([2, 2, 2]);
    }
    expect(assignProjectOwners(projects(3), []).size).toBe(0);
  });

  it('is the same on every daemon: the order of either list and repeated ids do not matter', () => {
    const ps = projects(9);
    const ds = daemons(3);
    const one = assignProjectOwners(ps, ds);
    const other = assignProjectOwners([...ps].reverse().concat(ps[0]!), [ds[2]!, ds[0]!, ds[1]!, ds[0]!]);
    expect([...other].sort()).toEqual([...one].sort());
  });

  it('moves few projects when one drains (at most 2 of 60), where a rank modulo the count moves most', () => {
    const ds = daemons(3);
    for (const count of [6, 7, 60]) {
      const all = projects(count);
      const before = assignProjectOwners(all, ds);
      let worst = 0;
      for (const gone of all)
        worst = Math.max(
          worst,
          moved(
            before,
            assignProjectOwners(
              all.filter((p) => p !== gone),
              ds,
            ),
          ),
        );
      expect(worst, `${count} projects`).toBeLessThanOrEqual(2);
    }
    // The scheme it replaces for comparison: the i-th project (in id order) to daemon i mod 3.
    const byRank = (ps: string[]) => new Map([...ps].sort().map((p, i) => [p, ds[i % 3]!] as const));
    const all = projects(60).sort();
    expect(moved(byRank(all), byRank(all.slice(1)))).toBeGreaterThan(30);
  });

  it('moves about what it must when a daemon joins or leaves: the newcomer takes its share, the leaver gives its own', () => {
    const ps = projects(60);
    const three = assignProjectOwners(ps, daemons(3));
    const four = assignProjectOwners(ps, daemons(4));
    // The fourth daemon's 15 projects must move; a few more may, to keep the loads even.
    expect(moved(three, four)).toBeLessThanOrEqual(18);
    const two = assignProjectOwners(ps, daemons(3).slice(1));
    // The leaver's 20 must move.
    expect(moved(three, two)).toBeLessThanOrEqual(23);
    expect(loads(two)).toEqual([30, 30]);
  });

  it("one daemon's view: no preference alone or while not claiming; its share of the heads' projects, recomputed when daemons or projects change", () => {
    const [a, b] = daemons(2) as [string, string];
    const view = new OwnProjects(a);
    const heads = projects(4).flatMap((p) => [{ project_id: p }, { project_id: p }]);
    expect(view.ownAmong(heads)).toBeNull();
    view.setDaemons([a]);
    expect(view.ownAmong(heads)).toBeNull();
    // Another daemon claims, and this one does not (paused, stopping): it owns nothing and prefers nothing.
    view.setDaemons([b]);
    expect(view.ownAmong(heads)).toBeNull();
    view.setDaemons([b, a]);
    const mine = view.ownAmong(heads);
    const owners = assignProjectOwners(projects(4), [a, b]);
    expect([...mine!].sort()).toEqual(projects(4).filter((p) => owners.get(p) === a));
    expect(mine!.size).toBe(2);
    // The same projects in another order: the same set, not computed again.
    expect(view.ownAmong([...heads].reverse())).toBe(mine);
    // A project drains: recomputed over the three left.
    const left = heads.filter((h) => h.project_id !== 'project-0');
    const three = assignProjectOwners(projects(4).slice(1), [a, b]);
    expect([...view.ownAmong(left)!].sort()).toEqual(
      projects(4)
        .slice(1)
        .filter((p) => three.get(p) === a),
    );
    view.setDaemons([a]);
    expect(view.ownAmong(left)).toBeNull();
  });
});
