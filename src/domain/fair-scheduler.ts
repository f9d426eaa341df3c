/**
 * The fair scheduler: which due item to claim next (ADR-002 §5-1).
 *
 * 1. Class first: the lowest effective priority wins (interactive 0 < generate-all children 10 <
 *    scheduled 20). Waiting ages an item: every `agingStepMs` it has been due lowers its effective
 *    priority by one, down to 0, so bulk and scheduled work eventually compete as equals and never starve.
 * 2. Within a class, projects take turns by smooth weighted round robin (the nginx algorithm): each
 *    competing project gains its weight, the richest is chosen and pays the sum of the weights. With
 *    weights 3 and 1, the rotation is A A B A A A B A … without bursts, and a project that appears
 *    starts competing at once instead of waiting for another project's backlog to drain.
 * 3. Several daemons on one database (Postgres): each prefers its own projects (domain/project-owners.ts).
 *    Within the winning class, only the daemon's own projects compete when it has any there; the others
 *    compete only when none of its own is a candidate — once its own have nothing it can claim this round
 *    (claimed, held back, or taken by other daemons), or when another project's item is of a more urgent
 *    class or has aged into one. So class and aging hold across all projects as before, and weights hold
 *    among the projects a daemon picks from; across daemons a project is served by its owner first and
 *    by the others when they have free slots their own projects cannot fill. Only daemons that claim bulk
 *    work own projects (runtime/daemon-registry.ts): one paused by pressure or storage, or stopping, owns
 *    none from the others' next renewal on (2 s), so its projects compete in their rounds like their own.
 *    An owner killed without a goodbye owns its projects until it misses renewals for LIVE_MS (15 s); an
 *    owner that is slow, or whose route is held (breaker, rate limit), keeps its projects, which then get
 *    only the others' spare slots: they may be none while the others' own backlogs last.
 *    One daemon alone has no preference: it picks exactly as without this rule.
 *
 * Pure and in memory: the rotation state matters for fairness only, never for correctness, so a
 * restart simply starts a new rotation.
 */

export interface Candidate {
  id: string;
  project_id: string;
  priority: number;
  /** When the item became due (its `not_before`): waiting starts here. */
  not_before: number;
}

export interface FairSchedulerOptions {
  /** Weight per project id; absent projects weigh `defaultWeight`. */
  weights: Readonly<Record<string, number>>;
  defaultWeight: number;
  agingStepMs: number;
}

/** A project's place in the rotation, and its best candidate of the pick under way. */
interface ProjectTurn {
  readonly weight: number;
  credit: number;
  /** The pick that last saw the project competing: it gains its weight once per pick. */
  pick: number;
  /** Its oldest candidate of the winning class in that pick. */
  oldest: Candidate;
}

export class FairScheduler {
  private readonly turns = new Map<string, ProjectTurn>();
  private picks = 0;

  constructor(private readonly o: FairSchedulerOptions) {}

  weightOf(projectId: string): number {
    return this.o.weights[projectId] ?? this.o.defaultWeight;
  }

  /** The priority an item competes with now: its own, lowered by one per aging step waited, not below 0. */
  effectivePriority(c: Candidate, now: number): number {
    const steps = this.o.agingStepMs > 0 ? Math.floor(Math.max(0, now - c.not_before) / this.o.agingStepMs) : 0;
    return Math.max(0, c.priority - steps);
  }

  /**
   * Picks the next item among `candidates` and advances the rotation. Candidates may hold several
   * items per project; a project's oldest item of the winning class is the one returned. Among projects
   * with equal credit the smallest project id wins, so the rotation does not depend on the candidates' order.
   * Two passes over the candidates and no allocation once every project has been seen: it runs once per
   * claim, over every project's heads (a sort, a ranked copy and a map per pick showed in the engine's
   * CPU and allocation profiles).
   * `own`: the projects this daemon prefers (rule 3; null: none, as alone), found in the first pass.
   */
  pick(candidates: readonly Candidate[], now: number, own: ReadonlySet<string> | null = null): Candidate | null {
    if (candidates.length === 0) return null;
    let best = Number.POSITIVE_INFINITY;
    let bestOwn = Number.POSITIVE_INFINITY;
    for (const c of candidates) {
      const priority = this.effectivePriority(c, now);
      best = Math.min(best, priority);
      if (own?.has(c.project_id)) bestOwn = Math.min(bestOwn, priority);
    }
    // Rule 3: an own project has a candidate of the winning class.
    const onlyOwn = own !== null && bestOwn === best;
    const pick = ++this.picks;
    let chosen: ProjectTurn | undefined;
    let chosenId = '';
    let total = 0;
    for (const c of candidates) {
      if (this.effectivePriority(c, now) !== best || (onlyOwn && !own.has(c.project_id))) continue;
      const turn = this.turnOf(c);
      if (turn.pick === pick) {
        if (c.not_before < turn.oldest.not_before) turn.oldest = c;
        continue;
      }
      // The project's first candidate in this pick: it competes, and gains its weight once.
      turn.pick = pick;
      turn.oldest = c;
      turn.credit += turn.weight;
      total += turn.weight;
      if (!chosen || turn.credit > chosen.credit || (turn.credit === chosen.credit && c.project_id < chosenId)) {
        chosen = turn;
        chosenId = c.project_id;
      }
    }
    chosen!.credit -= total;
    return chosen!.oldest;
  }

  private turnOf(c: Candidate): ProjectTurn {
    let turn = this.turns.get(c.project_id);
    if (!turn) {
      turn = { weight: this.weightOf(c.project_id), credit: 0, pick: 0, oldest: c };
      this.turns.set(c.project_id, turn);
    }
    return turn;
  }
}
