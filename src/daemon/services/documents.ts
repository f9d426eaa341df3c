/**
 * Reading a project's documents (`combine doc`, and the `briefing` shorthand). A document still being
 * generated — a thread or a pending scheduled run targets it — is reported as not ready (exit 1), never
 * shown half-made or reported missing.
 */
import type { Sql } from '../../core/sql.js';
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
async function inProgress(sql: Sql, ops: OperationRegistry, q: DocumentQuery): Promise<string | null> {
  if (q.key !== null) {
    const thread = (await listActiveThreadsForDocument(sql, { project_id: q.projectId, doc_type: q.docType, key: q.key }))[0];
    if (thread) return `thread ${thread.id} is ${thread.status}`;
  }
  for (const run of await listPendingRunsForProject(sql, q.projectId)) {
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

export async function readDocument(sql: Sql, ops: OperationRegistry, q: DocumentQuery): Promise<DocumentRow> {
  if (!(await getProject(sql, q.projectId))) throw new CommandError('NOT_FOUND', `no project "${q.projectId}" (see \`combine project list\`)`);
  const doc =
    q.key !== null
      ? await getKeyedDocument(sql, q.projectId, q.docType, q.key)
      : ((await getKeyedDocument(sql, q.projectId, q.docType, '')) ?? (await getLatestKeyedDocument(sql, q.projectId, q.docType)));
  if (doc) return doc;
  const what = `the ${q.docType} of "${q.projectId}"${q.key !== null ? ` for ${q.key}` : ''}`;
  const busy = await inProgress(sql, ops, q);
  if (busy) throw new CommandError('CONFLICT', `${what} is not ready yet: ${busy}`, 'NOT_READY');
  throw new CommandError('NOT_FOUND', `project "${q.projectId}" has no ${q.docType}${q.key !== null ? ` for ${q.key}` : ''}${q.hint ? ` (${q.hint})` : ''}`);
}

/** `combine briefing`: a project's briefing for a date (the newest when null), in its own shape. */
export async function readBriefing(sql: Sql, ops: OperationRegistry, projectId: string, date: string | null) {
  if (date !== null && !isCalendarDate(date)) throw new CommandError('BAD_REQUEST', `--date: "${date}" is not a date (YYYY-MM-DD)`);
  const hint = `schedule one: combine schedule add --project ${projectId} --operation briefing --cron "0 8 * * *"`;
  return SHORTHANDS.briefing.view(await readDocument(sql, ops, { projectId, docType: SHORTHANDS.briefing.docType, key: date, hint }));
}
