/**
 * Step 2 of lease-then-LLM: the holder of a run's lease starts its work as an ordinary thread (the
 * engine then leases, pays for and applies it with all its guarantees). One transaction: the thread,
 * its work items and the run's link to the thread commit together, so a run never has two threads.
 */
import { newId } from '../../db/ids.js';
import { getProject } from '../../db/projects.js';
import type { ScheduleRow, ScheduleRunRow, ThreadRow } from '../../db/schema.js';
import { getSchedule, getScheduleRun, linkScheduleRunThread } from '../../db/schedules.js';
import { findActiveThreadByKey, getThread } from '../../db/threads.js';
import { BRIEFING, PRIORITY_SCHEDULED, PROJECT_BRIEFING, briefingKey, briefingLockScope } from '../../domain/operations.js';
import type { RetryPolicy } from '../../domain/retry.js';
import { localDate } from '../../domain/schedule.js';
import { isTerminalThread } from '../../domain/states.js';
import { CommandError, assertQueueHasRoom, enqueueWorkItem, generateAll, newThread } from '../commands.js';
import type { Tx } from '../engine/tx.js';
import { finalizeRunOfThread } from './finalize.js';

/**
 * `started`: a thread now does the run's work. `in_progress`: a re-claimed run whose thread is still
 * running (the engine's recovery owns it). `finalized`: its thread had already ended. `lost`: the
 * lease was re-claimed by someone else since this claimer read it; it must do nothing.
 */
export type StartOutcome = 'started' | 'in_progress' | 'finalized' | 'lost';

/** What starting a run needs from the daemon's configuration. */
export interface RunStartOptions {
  policyFor(kind: string): RetryPolicy;
  /** Backpressure: a run that would overfill the queue fails with QUEUE_FULL, like a command would. */
  maxQueued: number;
}

/** The briefing thread for (project, date): the active one if any, else a new one (briefings are regenerated on every run). */
export function enqueueBriefing(tx: Tx, policy: RetryPolicy, projectId: string, date: string, createdBy: string | null, maxQueued: number): ThreadRow {
  if (!getProject(tx.db, projectId)) throw new CommandError('NOT_FOUND', `no project "${projectId}"`);
  const key = briefingKey(projectId, date);
  const active = findActiveThreadByKey(tx.db, key);
  if (active) return active;
  const thread = newThread(tx, {
    kind: PROJECT_BRIEFING,
    projectId,
    target: { doc_type: BRIEFING, project_id: projectId, date },
    key,
    parentId: null,
    createdBy,
  });
  enqueueWorkItem(tx, thread, { sequence: 1, lockScope: briefingLockScope(projectId, date), priority: PRIORITY_SCHEDULED, policy, deadlineAt: null });
  assertQueueHasRoom(tx, maxQueued);
  return thread;
}

function startOperation(tx: Tx, o: RunStartOptions, schedule: ScheduleRow, run: ScheduleRunRow): ThreadRow {
  const createdBy = `schedule:${schedule.id}`;
  if (schedule.operation === 'briefing') {
    return enqueueBriefing(tx, o.policyFor(PROJECT_BRIEFING), schedule.project_id, localDate(run.period_at, schedule.timezone), createdBy, o.maxQueued);
  }
  if (schedule.operation === 'generate-all') {
    // force: a schedule regenerates on every period; an orchestration already running is joined instead.
    const r = generateAll(tx, o.policyFor('story_generate_epic'), schedule.project_id, {
      force: true,
      maxQueued: o.maxQueued,
      deadlineAt: null,
      createdBy,
      priority: PRIORITY_SCHEDULED,
    });
    return r.thread;
  }
  throw new CommandError('BAD_REQUEST', `schedule ${schedule.id} has an unknown operation "${schedule.operation}"`);
}

/**
 * Starts the work of a run this claimer holds (the stamp in `run` is the one it wrote). Throws
 * CommandError when the operation cannot start (the caller records the run as failed).
 */
export function startScheduledRun(tx: Tx, o: RunStartOptions, run: ScheduleRunRow): StartOutcome {
  const current = getScheduleRun(tx.db, run.id);
  if (!current || current.status !== 'pending' || current.claim_owner !== run.claim_owner || current.claimed_at !== run.claimed_at) {
    return 'lost';
  }
  if (current.thread_id) {
    const thread = getThread(tx.db, current.thread_id);
    if (!thread || !isTerminalThread(thread.status)) return 'in_progress';
    finalizeRunOfThread(tx, thread, thread.status as 'complete' | 'failed' | 'canceled');
    return 'finalized';
  }
  const schedule = getSchedule(tx.db, run.schedule_id);
  if (!schedule) throw new CommandError('NOT_FOUND', `schedule ${run.schedule_id} of run ${run.id} does not exist`);
  const thread = startOperation(tx, o, schedule, current);
  linkScheduleRunThread(tx.db, { id: run.id, owner: run.claim_owner, claimed_at: run.claimed_at, thread_id: thread.id });
  // A thread that ended at once (a project with no epics) ended before the link existed.
  if (isTerminalThread(thread.status)) {
    finalizeRunOfThread(tx, thread, thread.status as 'complete' | 'failed' | 'canceled');
    return 'finalized';
  }
  return 'started';
}

export function newRunId(): string {
  return newId();
}
