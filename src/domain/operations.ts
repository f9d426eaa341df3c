/**
 * What every operation's threads share, whatever the operation: claim priorities and the shape of a
 * thread's `target_ref`. Operations themselves are definitions in src/operations/.
 */
/** What a thread works on; stored as JSON in `llm_threads.target_ref` (the operation's `target`). */
export interface TargetRef {
  doc_type: string;
  project_id: string;
  /** Set for documents that exist once per key in a project (a briefing per date). */
  key?: string;
  /** Extra fields the operation adds for people (e.g. `epic_id`, `date`). */
  [field: string]: unknown;
}

/**
 * Claim order: lower runs first. Interactive commands outrank an orchestration's children (bulk),
 * which outrank scheduled work, so a user's single request is not stuck behind a bulk run. Waiting
 * items age toward PRIORITY_INTERACTIVE (see domain/fair-scheduler.ts), so no class starves.
 */
export const PRIORITY_INTERACTIVE = 0;
export const PRIORITY_BULK = 10;
/** Work started by a schedule waits behind everything a person asked for, bulk runs included. */
export const PRIORITY_SCHEDULED = 20;

/** The priority classes an operation may name (`priority` in its definition). */
export type PriorityName = 'interactive' | 'bulk' | 'scheduled';

export const PRIORITY_OF: Readonly<Record<PriorityName, number>> = {
  interactive: PRIORITY_INTERACTIVE,
  bulk: PRIORITY_BULK,
  scheduled: PRIORITY_SCHEDULED,
};
