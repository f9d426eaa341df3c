/**
 * Which daemon owns which project, when several daemons share one Postgres database (issue 18, target 9).
 *
 * Ownership is a preference, never a lock: a daemon claims its own projects' items first and other
 * projects' items when its own have nothing it can claim (engine/producer.ts, fair-scheduler.ts `pick`).
 * Its purpose is locality: two daemons then rarely apply answers to one project at once, so a closure of
 * answers holds its own projects' document heads, not every project's (bench/README.md, issue 18 target 9).
 *
 * Every daemon computes the same assignment from what they all see — the live daemons (the registry,
 * `llm_daemons`, those that claim bulk work) and the projects with due queued work (a claim round's
 * heads) — with no coordination. Views that differ for a moment (a renewal not yet read; a project whose
 * due items are all in flight or backing off, or that drained, seen by one daemon's round and not by
 * another's) only make two daemons prefer one project, or neither, for a while: a cost in locality, not
 * in correctness, as every claim stays the same guarded statement. Many small projects claimed as they
 * arrive flicker so, and the assignment is then computed again more often.
 *
 * The assignment is rendezvous hashing with bounded loads: each project ranks the daemons by a hash of
 * (project, daemon) and goes to the first that has room — at most ⌈projects ÷ daemons⌉, and only as many
 * daemons at the ceiling as the division leaves over — the projects taken in the order of their own hash.
 * So it is balanced when projects are few (6 on 3 daemons: 2 each, where rendezvous hashing alone is often
 * 3/2/1; 7: 3/2/2), and mostly stable: in the sets the unit test pins, a project draining moves one or
 * two others and a daemon joining or leaving about its own share (a daemon's rank modulo the count would
 * move nearly all); with bounded loads a move can cascade, so these are typical figures, not bounds.
 */

/**
 * Each project's owner among `daemons` (empty when there is none). The result does not depend on the
 * order of either list; a project or daemon listed twice counts once.
 */
export function assignProjectOwners(projects: readonly string[], daemons: readonly string[]): Map<string, string> {
  const owners = new Map<string, string>();
  const ds = [...new Set(daemons)].map((id) => ({ id, hash: hashOf(id), load: 0 }));
  if (ds.length === 0) return owners;
  const ps = [...new Set(projects)].map((id) => ({ id, hash: hashOf(id) }));
  ps.sort((a, b) => a.hash - b.hash || compare(a.id, b.id));
  // Every daemon gets ⌊projects ÷ daemons⌋ or one more, and only `extras` of them one more: capping at
  // the ceiling alone would allow 3/3/1 for 7 projects.
  const floor = Math.floor(ps.length / ds.length);
  const extras = ps.length - floor * ds.length;
  let extrasTaken = 0;
  for (const p of ps) {
    let chosen: (typeof ds)[number] | undefined;
    let chosenScore = -1;
    for (const d of ds) {
      if (d.load > floor || (d.load === floor && extrasTaken === extras)) continue;
      const score = mix(p.hash ^ Math.imul(d.hash, 0x9e3779b1));
      if (score > chosenScore || (score === chosenScore && compare(d.id, chosen!.id) < 0)) {
        chosen = d;
        chosenScore = score;
      }
    }
    // Some daemon has room: the caps add up to the projects.
    if (chosen!.load === floor) extrasTaken++;
    chosen!.load++;
    owners.set(p.id, chosen!.id);
  }
  return owners;
}

/**
 * One daemon's own projects, kept between claim rounds: the assignment is computed again only when the
 * live daemons or the projects with queued work change (a claim round runs many times a second).
 */
export class OwnProjects {
  private daemons: readonly string[] = [];
  private projects: readonly string[] = [];
  private own: ReadonlySet<string> | null = null;

  constructor(private readonly self: string) {}

  /**
   * The live daemons that claim bulk work, as the registry last read them: this one only while it claims
   * (a paused or stopping daemon owns nothing, and then prefers nothing).
   */
  setDaemons(claiming: readonly string[]): void {
    const next = [...new Set(claiming)].sort(compare);
    if (sameList(next, this.daemons)) return;
    this.daemons = next;
    this.own = null;
  }

  /**
   * The projects this daemon owns among those of `heads` (a claim round's candidates, any order); null
   * when it is the only daemon claiming, or not one of them: then there is no preference at all, and it
   * claims as alone.
   */
  ownAmong(heads: readonly { project_id: string }[]): ReadonlySet<string> | null {
    if (this.daemons.length <= 1 || !this.daemons.includes(this.self)) return null;
    const projects = [...new Set(heads.map((h) => h.project_id))].sort(compare);
    if (this.own && sameList(projects, this.projects)) return this.own;
    this.projects = projects;
    const owners = assignProjectOwners(projects, this.daemons);
    this.own = new Set(projects.filter((p) => owners.get(p) === this.self));
    return this.own;
  }
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Code-unit order: the same on every daemon, whatever its locale. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** FNV-1a over the string's UTF-16 code units, mixed: 32 bits, the same on every daemon. */
function hashOf(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return mix(h);
}

/** MurmurHash3's finalizer: every input bit moves every output bit. Unsigned. */
function mix(x: number): number {
  let h = x >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}
