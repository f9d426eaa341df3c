/**
 * Step 2 of lease-then-LLM: the holder of a run's lease starts its work as an ordinary thread (the
 * engine then leases, pays for and applies it with all its guarantees). One transaction: the thread,
 * its work items and the run's link to the thread commit together, so a run never has two threads.
 */
import type { ScheduleRunRow } from '../../db/schema-schedules.js';
import { getSchedule, getScheduleRun, linkScheduleRunThread } from '../../db/schedules.js';
import { getThread, lockThreadAgainstMoves } from '../../db/threads.js';
import { PRIORITY_SCHEDULED } from '../../domain/operations.js';
import { isTerminalThread } from '../../domain/states.js';
import type { OperationRegistry } from '../../operations/registry.js';
import type { Tx } from '../engine/tx.js';
import { submitOperation } from '../services/submit.js';
import { childContext, formatTraceparent } from '../../core/trace-context.js';
import { finalizeRunOfThread } from './finalize.js';
import { scheduledRequest } from './request.js';
import { CommandError, StaleStateError } from '../../core/errors.js';

/**
 * `started`: a thread now does the run's work. `in_progress`: a re-claimed run whose thread is still
 * running (the engine's recovery owns it). `finalized`: its thread had already ended. `lost`: the
 * lease was re-claimed by someone else since this claimer read it; it must do nothing.
 */
export type StartOutcome = 'started' | 'in_progress' | 'finalized' | 'lost';

/** What starting a run needs from the daemon. */
export interface RunStartOptions {
  operations: OperationRegistry;
  /** Backpressure: a run that would overfill the queue fails with QUEUE_FULL, like a command would. */
  maxQueued: number;
}

/**
 * Starts the work of a run this claimer holds (the stamp in `run` is the one it wrote). Throws
 * CommandError when the operation cannot start (the caller records the run as failed).
 */
export async function startScheduledRun(tx: Tx, o: RunStartOptions, run: ScheduleRunRow): Promise<StartOutcome> {
  const current = await getScheduleRun(tx.sql, run.id);
  if (current?.status !== 'pending' || current.claim_owner !== run.claim_owner || current.claimed_at !== run.claimed_at) {
    return 'lost';
  }
  if (current.thread_id) {
    const thread = await getThread(tx.sql, current.thread_id);
    if (!thread || !isTerminalThread(thread.status)) return 'in_progress';
    await finalizeRunOfThread(tx, thread, thread.status as 'complete' | 'failed' | 'canceled');
    return 'finalized';
  }
  const schedule = await getSchedule(tx.sql, run.schedule_id);
  if (!schedule) throw new CommandError('NOT_FOUND', `schedule ${run.schedule_id} of run ${run.id} does not exist`);
  const request = scheduledRequest(schedule, current.period_at);
  // force: a schedule runs again every period; a thread already calling for the request is joined
  // instead, and one whose call has not started is superseded by this period's (supersede.ts).
  const submitted = await submitOperation(tx, o.operations, request.operation, request.input, {
    force: true,
    maxQueued: o.maxQueued,
    deadlineAt: null,
    createdBy: `schedule:${schedule.id}`,
    priority: PRIORITY_SCHEDULED,
    // Each period's run is a trace of its own.
    traceparent: formatTraceparent(childContext(null)),
  });
  // A thread joined (already calling for the request) may be ending in another daemon's transaction,
  // whose finalize found no run linked to it: its end is read here, after it committed, and it cannot
  // end until this link has (LOCK ORDER: the thread's row before the run's, as an end takes them).
  const thread = submitted.deduplicated ? await lockThreadAgainstMoves(tx.sql, submitted.thread.id) : submitted.thread;
  if (!thread) throw new StaleStateError(`thread ${submitted.thread.id} joined by schedule run ${run.id} no longer exists`);
  await linkScheduleRunThread(tx.sql, { id: run.id, owner: run.claim_owner, claimed_at: run.claimed_at, thread_id: thread.id });
  // A thread that ended at once (a project with no epics), or a joined one that ended meanwhile, ended
  // before the link existed.
  if (isTerminalThread(thread.status)) {
    await finalizeRunOfThread(tx, thread, thread.status as 'complete' | 'failed' | 'canceled');
    return 'finalized';
  }
  return 'started';
}
