/**
 * `project_briefing` wired to storage: gather the project's state into facts, render the request, and
 * store a valid answer as the project's `briefing` document for the thread's date (created at version
 * 1, or the day's next version when the date already has one).
 */
import { newId } from '../../db/ids.js';
import { countProjectThreadsByStatus, listProjectThreadsWithStatus, type ThreadWithError } from '../../db/briefing-facts.js';
import type { Db } from '../../db/connection.js';
import { insertMutation } from '../../db/mutations.js';
import { getDocument, getKeyedDocument, getProject, insertDocument, updateDocumentContent } from '../../db/projects.js';
import type { ThreadRow, WorkItemRow } from '../../db/schema.js';
import { storyBacklogSchema } from '../../domain/backlog.js';
import { parseBriefingAnswer, type BriefingAnswer, type BriefingDocument, type ProjectFacts, type ThreadFact } from '../../domain/briefing.js';
import { BRIEFING, EPIC_ARCHITECTURE, STORY_BACKLOG, type TargetRef } from '../../domain/operations.js';
import { epicArchitectureSchema } from '../../domain/project.js';
import { renderBriefingPrompt, type ModelParams } from '../../domain/prompts.js';
import type { AppliedMutation, BuildResult, Operation } from './operation-registry.js';

/** How many failed and running threads a briefing names (the counts cover all of them). */
const LISTED_THREADS = 10;

function briefingTarget(thread: ThreadRow): { project_id: string; date: string } {
  const target = JSON.parse(thread.target_ref) as TargetRef;
  if (target.doc_type !== BRIEFING || !target.date) throw new Error(`thread ${thread.id} is not a briefing thread`);
  return { project_id: target.project_id, date: target.date };
}

function threadFact(t: ThreadWithError): ThreadFact {
  const target = JSON.parse(t.target_ref) as TargetRef;
  return {
    thread_id: t.id,
    kind: t.kind,
    target: target.epic_id ?? 'all epics',
    status: t.status,
    error_code: t.error_code,
    created_at: new Date(t.created_at).toISOString(),
  };
}

/** The project's state as the model is told it: epics with their story counts, thread outcomes. */
export function gatherProjectFacts(db: Db, projectId: string): ProjectFacts {
  const arch = getDocument(db, projectId, EPIC_ARCHITECTURE);
  const backlogDoc = getDocument(db, projectId, STORY_BACKLOG);
  const epics = arch ? epicArchitectureSchema.parse(JSON.parse(arch.content)).epics : [];
  const backlog = backlogDoc ? storyBacklogSchema.parse(JSON.parse(backlogDoc.content)) : { epics: [] };
  return {
    epics: epics.map((e) => ({
      epic_id: e.id,
      title: e.title,
      stories: backlog.epics.find((b) => b.epic_id === e.id)?.stories.length ?? 0,
    })),
    threads: Object.fromEntries(countProjectThreadsByStatus(db, projectId).map((c) => [c.status, c.n])),
    failed: listProjectThreadsWithStatus(db, projectId, ['failed'], LISTED_THREADS).map(threadFact),
    running: listProjectThreadsWithStatus(db, projectId, ['open', 'running'], LISTED_THREADS).map(threadFact),
  };
}

function buildBriefingRequest(db: Db, thread: ThreadRow, params: ModelParams): BuildResult {
  const target = briefingTarget(thread);
  const project = getProject(db, target.project_id);
  if (!project) {
    return { ok: false, error: { code: 'UNKNOWN', class: 'permanent', message: `project ${target.project_id} no longer exists` } };
  }
  return { ok: true, request: renderBriefingPrompt(project, target.date, gatherProjectFacts(db, project.id), params) };
}

/**
 * Stores the answer and its provenance. What the model was told is the thread's `prompt` ledger entry,
 * so the document does not keep a second, possibly newer, copy of the facts.
 */
function applyBriefingAnswer(db: Db, thread: ThreadRow, item: WorkItemRow, answer: BriefingAnswer, now: number): AppliedMutation {
  const target = briefingTarget(thread);
  const content: BriefingDocument = {
    project_id: target.project_id,
    date: target.date,
    briefing: answer,
    thread_id: thread.id,
    work_item_id: item.id,
    generated_at: now,
  };
  const existing = getKeyedDocument(db, target.project_id, BRIEFING, target.date);
  const documentId = existing?.id ?? newId();
  const fromVersion = existing?.version ?? 0;
  if (existing) {
    updateDocumentContent(db, { id: existing.id, from_version: existing.version, content: JSON.stringify(content), updated_at: now });
  } else {
    insertDocument(db, { id: documentId, project_id: target.project_id, doc_type: BRIEFING, doc_key: target.date, version: 1, content: JSON.stringify(content), updated_at: now });
  }
  const summary = { date: target.date, highlights: answer.highlights.length, risks: answer.risks.length, next_steps: answer.next_steps.length };
  const mutation: AppliedMutation = {
    mutation_id: newId(),
    document_id: documentId,
    doc_type: BRIEFING,
    from_version: fromVersion,
    to_version: fromVersion + 1,
    summary,
  };
  insertMutation(db, {
    id: mutation.mutation_id,
    work_item_id: item.id,
    thread_id: thread.id,
    document_id: documentId,
    from_version: fromVersion,
    to_version: fromVersion + 1,
    summary: JSON.stringify(summary),
    created_at: now,
  });
  return mutation;
}

export const briefingOperation: Operation<BriefingAnswer> = {
  buildRequest: buildBriefingRequest,
  parseAnswer: parseBriefingAnswer,
  countItems: (answer) => 1 + answer.highlights.length + answer.risks.length + answer.next_steps.length,
  applyAnswer: applyBriefingAnswer,
};
