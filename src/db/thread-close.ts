/**
 * An orchestration's close check (engine/tx.ts `closeParentIfDone`): its row locked, and whether a child
 * of it is still open or running — alone, or right after a child's end, in the end's round trip.
 */
import { StaleStateError } from '../core/errors.js';
import type { Sql } from '../core/sql.js';
import { releaseHeldLock, type HeldLock } from './locks.js';
import type { ThreadStatus } from '../domain/states.js';
import { assertThreadTransition } from '../domain/states.js';
import type { ThreadRow } from './schema.js';
import { transitionParams, transitionThreadIfStill, type ReadThread } from './threads.js';

/**
 * An orchestration locked for closing, and whether a child of it is still open or running. The lock
 * comes first: of two last children ending at once, the second counts after the first committed.
 * SQLite's writer is the lock, so the row and the answer come in one statement (one statement per ended
 * child less); Postgres locks the row, then asks in a statement of its own — both inside one function
 * call (migrations/pg/0012), one round trip.
 * The question reads idx_threads_parent_status (parent, status): it goes straight to the parent's active
 * children, the first entry answers it, and the ended children are never read — one index step on both
 * backends however many children the orchestration has, where a walk of every child at every child's end
 * costs O(children), O(n²) over a generate-all of n epics. (No ORDER BY: on that index SQLite would sort
 * every active child to find the newest, when any one answers.)
 */
export async function lockThreadForClose(sql: Sql, id: string): Promise<LockedForClose | undefined> {
  if (sql.dialect === 'postgres') return lockedForClose((await sql.get<{ locked: LockedJson | null }>(LOCK_FOR_CLOSE_PG, [id]))?.locked ?? null);
  const row = await sql.get<ThreadRow & { active_child: number | null }>(LOCK_FOR_CLOSE_SQLITE, [id]);
  if (!row) return undefined;
  const { active_child, ...thread } = row;
  return { thread, activeChild: active_child !== null };
}

const LOCK_FOR_CLOSE_PG = 'SELECT combine_lock_thread_for_close(?) AS locked';

/** `lockThreadForClose`'s answer: the orchestration's row, locked, and whether a child of it is still open or running. */
export interface LockedForClose {
  thread: ThreadRow;
  activeChild: boolean;
}

type LockedJson = ThreadRow & { active_child: boolean };

function lockedForClose(locked: LockedJson | null): LockedForClose | undefined {
  if (!locked) return undefined;
  const { active_child, ...thread } = locked;
  return { thread, activeChild: active_child };
}

/**
 * `transitionThreadIfStill` of a child to an end, then, when it moved, `lockThreadForClose` of its parent
 * (the parent it was read with), in that order: on Postgres in one round trip (migrations/pg/0018: every
 * item's end ran the two). `parent` undefined: the child did not move (`moved`), or the parent is gone.
 * `release`: a lock row deleted first, in the same round trip on Postgres (migrations/pg/0019: every answer
 * applied and every item failed released its scope's row at once, before its thread, then ended it);
 * StaleStateError, and nothing else done, when the row is not held any more.
 */
export async function endChildLockingParent(
  sql: Sql,
  thread: ReadThread & { parent_thread_id: string },
  from: ThreadStatus,
  to: ThreadStatus,
  now: number,
  release?: HeldLock,
): Promise<{ moved: boolean; parent: LockedForClose | undefined }> {
  if (sql.dialect !== 'postgres') {
    if (release) await releaseHeldLock(sql, release);
    const moved = await transitionThreadIfStill(sql, thread, from, to, now);
    return { moved, parent: moved ? await lockThreadForClose(sql, thread.parent_thread_id) : undefined };
  }
  assertThreadTransition(from, to);
  const p = transitionParams(thread, from, to, now);
  const args = [p.id, p.from, p.to, p.closed_at, p.parent];
  const [text, params] = release ? [RELEASE_END_CHILD_LOCKING_PARENT_PG, [release.scope, release.owner, ...args]] : [END_CHILD_LOCKING_PARENT_PG, args];
  const { ended } = (await sql.get<{ ended: EndedJson }>(text, params))!;
  if (release && ended.released !== 1) throw new StaleStateError(release.lost);
  return { moved: ended.changed === 1, parent: lockedForClose(ended.parent ?? null) };
}

/**
 * What the Postgres end functions answer: `released`, the lock rows deleted (the release-and-end function
 * only: 0 when the row is gone, and then nothing else was done), `changed`, the child's rows moved, and the
 * parent's row, locked, with whether a child of it is still active.
 */
type EndedJson = { released?: number; changed?: number; parent?: LockedJson | null };

const END_CHILD_LOCKING_PARENT_PG = 'SELECT combine_end_thread_lock_parent(?, ?, ?, ?, ?) AS ended';
const RELEASE_END_CHILD_LOCKING_PARENT_PG = 'SELECT combine_release_end_thread_lock_parent(?, ?, ?, ?, ?, ?, ?) AS ended';

const LOCK_FOR_CLOSE_SQLITE = `SELECT p.*, (SELECT 1 FROM llm_threads c WHERE c.parent_thread_id = p.id AND c.status IN ('open', 'running')
    LIMIT 1) AS active_child
  FROM llm_threads p WHERE p.id = ?`;

/** One child's end in `endChildrenLockingParents`: its lock row to release, and its move (none: release alone, it has ended already). */
export interface ChildEnd {
  release: HeldLock | undefined;
  move: { thread: ReadThread; from: ThreadStatus; to: ThreadStatus } | undefined;
}

/**
 * Postgres: `endChildLockingParent` of several children in one round trip (migrations/pg/0020), in
 * engine/tx.ts LOCK ORDER: every child's lock row released (3), then each child's guarded move in the
 * order given (id order: 4), then each of `parentIds` (id order) locked for its close check after all of
 * them; each orchestration's row as its close check needs it. StaleStateError when a lock row is not held
 * any more (no thread touched) or a child's status or parent changed since it was read (it stopped there:
 * no orchestration locked): the caller's transaction rolls back whole.
 */
export async function endChildrenLockingParents(
  sql: Sql,
  ends: readonly ChildEnd[],
  parentIds: readonly string[],
  now: number,
): Promise<Map<string, LockedForClose | undefined>> {
  const rows = ends.map(({ release, move }) => {
    if (move) assertThreadTransition(move.from, move.to);
    const p = move && transitionParams(move.thread, move.from, move.to, now);
    return {
      scope: release?.scope ?? null,
      owner: release?.owner ?? null,
      id: p?.id ?? null,
      from: p?.from ?? null,
      to: p?.to ?? null,
      closed_at: p?.closed_at ?? null,
      parent: p?.parent ?? null,
    };
  });
  const { ended } = (await sql.get<{ ended: EndsJson }>(END_CHILDREN_LOCKING_PARENTS_PG, [JSON.stringify(rows), JSON.stringify(parentIds)]))!;
  if (ended.lost !== undefined) throw new StaleStateError(ends.find((e) => e.release?.owner === ended.lost)!.release!.lost);
  if (ended.stale !== undefined) throw new StaleStateError(`thread ${ended.stale} moved since this closure of answers read it`);
  return new Map(parentIds.map((id) => [id, lockedForClose(ended.parents?.[id] ?? null)]));
}

/**
 * What `combine_release_end_threads_lock_parents` answers: `lost`, the owner of a lock row gone; `stale`, the
 * first child whose guarded move changed no row; else `parents`, each orchestration locked.
 */
type EndsJson = { lost?: string; stale?: string; parents?: Record<string, LockedJson | null> };

const END_CHILDREN_LOCKING_PARENTS_PG = 'SELECT combine_release_end_threads_lock_parents(CAST(? AS jsonb), CAST(? AS jsonb)) AS ended';
