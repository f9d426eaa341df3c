/**
 * The operations combine runs, their semantic identities (idempotency keys) and lock scopes.
 * Key format (WS-ADR-035): `{operation}:{space_type}:{space_id}:{target_doc_type}:{target_id}`.
 */

export const STORY_GENERATE_EPIC = 'story_generate_epic';
export const STORY_GENERATE_ALL = 'story_generate_all';
export type OperationKind = typeof STORY_GENERATE_EPIC | typeof STORY_GENERATE_ALL;

export const EPIC_ARCHITECTURE = 'epic_architecture';
export const STORY_BACKLOG = 'story_backlog';

/** What a thread works on; stored as JSON in `llm_threads.target_ref`. */
export interface TargetRef {
  doc_type: typeof STORY_BACKLOG;
  project_id: string;
  epic_id?: string;
}

export function idempotencyKey(
  operation: OperationKind,
  spaceType: string,
  spaceId: string,
  targetDocType: string,
  targetId: string,
): string {
  return `${operation}:${spaceType}:${spaceId}:${targetDocType}:${targetId}`;
}

/** The key of "generate the stories of epic E of project P", shared by single runs and generate-all children. */
export function epicStoriesKey(projectId: string, epicId: string): string {
  return idempotencyKey(STORY_GENERATE_EPIC, 'project', projectId, STORY_BACKLOG, epicId);
}

export function allStoriesKey(projectId: string): string {
  return idempotencyKey(STORY_GENERATE_ALL, 'project', projectId, STORY_BACKLOG, 'all');
}

/** Epic ids are unique within a project only, so the epic scope names both. */
export function epicLockScope(projectId: string, epicId: string): string {
  return `epic:${projectId}:${epicId}`;
}

export function projectLockScope(projectId: string): string {
  return `project:${projectId}`;
}

/**
 * Claim order: lower runs first. Interactive commands outrank generate-all children, which outrank
 * scheduled work, so a user's single request is not stuck behind a bulk run. Waiting items age toward
 * PRIORITY_INTERACTIVE (see domain/fair-scheduler.ts), so no class starves.
 */
export const PRIORITY_INTERACTIVE = 0;
export const PRIORITY_BULK = 10;
/** Work enqueued by a schedule (not by a person waiting for it): below generate-all children. */
export const PRIORITY_SCHEDULED = 20;
