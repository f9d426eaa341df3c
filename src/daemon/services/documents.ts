/**
 * Reading a project's documents (`combine doc`, and the `briefing` shorthand). A document still being
 * generated — a thread or a pending scheduled run targets it — is reported as not ready (exit 1), never
 * shown half-made or reported missing.
 */
import type { Db } from '../../db/connection.js';
import { getKeyedDocument, getLatestKeyedDocument, getProject } from '../../db/projects.js';
import type { DocumentRow } from '../../db/schema.js';
import { listPendingRunsForProject } from '../../db/schedules.js';
import { listActiveThreadsForDocument } from '../../db/threads.js';
import { isCalendarDate } from '../../domain/schedule.js';
import { SHORTHANDS } from '../../operations/builtin/index.js';
import type { OperationRegistry } from '../../operations/registry.js';
import { targetOf } from '../../operations/runtime.js';
import { scheduledRequest } from '../scheduler/request.js';
import { CommandError } from '../../core/errors.js';

export interface DocumentQuery {
  projectId: string;
  docType: string;
  /** null: the type's one document, else the newest keyed one (for dates: the latest). */
  key: string | null;
  /** Appended to the not-found message (e.g. how to schedule the document). */
  hint?: string;
}

/** What is working on the document now: an active thread's id, or a pending run's. */
function inProgress(db: Db, ops: OperationRegistry, q: DocumentQuery): string | null {
  if (q.key !== null) {
    const thread = listActiveThreadsForDocument(db, { project_id: q.projectId, doc_type: q.docType, key: q.key })[0];
    if (thread) return `thread ${thread.id} is ${thread.status}`;
  }
  for (const run of listPendingRunsForProject(db, q.projectId)) {
    const request = scheduledRequest(run, run.period_at);
    const op = ops.get(request.operation);
    if (!op) continue;
    try {
      const target = targetOf(op, request.input);
      if (target.project_id === q.projectId && target.doc_type === q.docType && (q.key === null || (target.key ?? '') === q.key))
        return `run ${run.id} is pending`;
    } catch {
      // An input the operation cannot target does not make anything pending.
    }
  }
  return null;
}

export function readDocument(db: Db, ops: OperationRegistry, q: DocumentQuery): DocumentRow {
  if (!getProject(db, q.projectId)) throw new CommandError('NOT_FOUND', `no project "${q.projectId}" (see \`combine project list\`)`);
  const doc =
    q.key !== null
      ? getKeyedDocument(db, q.projectId, q.docType, q.key)
      : (getKeyedDocument(db, q.projectId, q.docType, '') ?? getLatestKeyedDocument(db, q.projectId, q.docType));
  if (doc) return doc;
  const what = `the ${q.docType} of "${q.projectId}"${q.key !== null ? ` for ${q.key}` : ''}`;
  const busy = inProgress(db, ops, q);
  if (busy) throw new CommandError('CONFLICT', `${what} is not ready yet: ${busy}`, 'NOT_READY');
  throw new CommandError('NOT_FOUND', `project "${q.projectId}" has no ${q.docType}${q.key !== null ? ` for ${q.key}` : ''}${q.hint ? ` (${q.hint})` : ''}`);
}

/** `combine briefing`: a project's briefing for a date (the newest when null), in its own shape. */
export function readBriefing(db: Db, ops: OperationRegistry, projectId: string, date: string | null) {
  if (date !== null && !isCalendarDate(date)) throw new CommandError('BAD_REQUEST', `--date: "${date}" is not a date (YYYY-MM-DD)`);
  const hint = `schedule one: combine schedule add --project ${projectId} --operation briefing --cron "0 8 * * *"`;
  return SHORTHANDS.briefing.view(readDocument(db, ops, { projectId, docType: SHORTHANDS.briefing.docType, key: date, hint }));
}
