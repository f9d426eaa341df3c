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

export class FairScheduler {
  private readonly credit = new Map<string, number>();

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
   * Linear in the candidates, with one map of the winning class's projects: it runs once per claim, over
   * every project's heads (a sort and a ranked copy per pick showed in the engine's CPU profile).
   */
  pick(candidates: readonly Candidate[], now: number): Candidate | null {
    if (candidates.length === 0) return null;
    let best = Number.POSITIVE_INFINITY;
    for (const c of candidates) best = Math.min(best, this.effectivePriority(c, now));
    const byProject = new Map<string, Candidate>();
    for (const c of candidates) {
      if (this.effectivePriority(c, now) !== best) continue;
      const seen = byProject.get(c.project_id);
      if (!seen || c.not_before < seen.not_before) byProject.set(c.project_id, c);
    }
    let chosen = '';
    let chosenCredit = Number.NEGATIVE_INFINITY;
    let total = 0;
    for (const project of byProject.keys()) {
      const w = this.weightOf(project);
      total += w;
      const credit = (this.credit.get(project) ?? 0) + w;
      this.credit.set(project, credit);
      if (credit > chosenCredit || (credit === chosenCredit && project < chosen)) {
        chosen = project;
        chosenCredit = credit;
      }
    }
    this.credit.set(chosen, chosenCredit - total);
    return byProject.get(chosen)!;
  }
}
