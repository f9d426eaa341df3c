/**
 * `story_generate_epic` wired to storage: build the request from the stored epic, and apply a valid
 * answer to the project's story backlog. The pure parts (prompt, schema, merge) live in src/domain.
 */
import { newId } from '../../db/ids.js';
import type { Db } from '../../db/connection.js';
import { insertMutation } from '../../db/mutations.js';
import { readParsedDocument, rememberDocument } from '../../db/document-cache.js';
import { getProject, updateDocumentContent } from '../../db/projects.js';
import type { ThreadRow, WorkItemRow } from '../../db/schema.js';
import { applyStoriesToBacklog, parseStoriesAnswer, parseStoryBacklog, type StoriesAnswer } from '../../domain/backlog.js';
import { checkAnswerRules, type AnswerRules } from '../../domain/answer-rules.js';
import { EPIC_ARCHITECTURE, STORY_BACKLOG, type TargetRef } from '../../domain/operations.js';
import { parseEpicArchitecture, type Epic, type ParseResult } from '../../domain/project.js';
import { renderStoryPrompt, type ModelParams } from '../../domain/prompts.js';
import type { AppliedMutation, BuildResult, Operation } from './operation-registry.js';

export function readTargetRef(thread: ThreadRow): TargetRef {
  return JSON.parse(thread.target_ref) as TargetRef;
}

/** Parsed once per document version (db/document-cache.ts): every claim and every start reads them. */
function loadEpics(db: Db, projectId: string): Epic[] {
  return readParsedDocument(db, projectId, EPIC_ARCHITECTURE, parseEpicArchitecture)?.value.epics ?? [];
}

/** The request for one epic, or a permanent error when the project or epic no longer exists. */
export function buildStoryRequest(
  db: Db,
  thread: ThreadRow,
  params: ModelParams,
): BuildResult {
  const target = readTargetRef(thread);
  const project = getProject(db, target.project_id);
  const epic = loadEpics(db, target.project_id).find((e) => e.id === target.epic_id);
  if (!project || !epic) {
    return {
      ok: false,
      error: {
        code: 'UNKNOWN',
        class: 'permanent',
        message: `epic ${target.epic_id} of project ${target.project_id} no longer exists`,
      },
    };
  }
  return { ok: true, request: renderStoryPrompt(project, epic, params) };
}

/** The answer schema, then the operator's acceptance rules; errors name each bad field. */
export function parseStoryAnswer(content: string | null, rules: AnswerRules): ParseResult<StoriesAnswer> {
  const parsed = parseStoriesAnswer(content);
  if (!parsed.ok) return parsed;
  const violations = checkAnswerRules(parsed.value, rules);
  return violations.length === 0 ? parsed : { ok: false, errors: violations };
}

/**
 * Writes the answer into the backlog as the document's next version and records the mutation row,
 * which is unique per work item: a second application of the same item fails instead of applying twice.
 */
export function applyStoryAnswer(
  db: Db,
  thread: ThreadRow,
  item: WorkItemRow,
  answer: StoriesAnswer,
  now: number,
): AppliedMutation {
  const target = readTargetRef(thread);
  const epics = loadEpics(db, target.project_id);
  const epic = epics.find((e) => e.id === target.epic_id);
  const doc = readParsedDocument(db, target.project_id, STORY_BACKLOG, parseStoryBacklog);
  if (!epic || !doc) throw new Error(`the backlog or epic ${target.epic_id} of ${target.project_id} is gone`);
  const change = applyStoriesToBacklog(
    doc.value,
    epic,
    epics.map((e) => e.id),
    answer.stories,
    { thread_id: thread.id, work_item_id: item.id, generated_at: now },
  );
  updateDocumentContent(db, { id: doc.id, from_version: doc.version, content: JSON.stringify(change.content), updated_at: now });
  // The stored JSON parses back to this same value (stories were validated and trimmed on the way in).
  rememberDocument(db, doc.id, doc.version + 1, parseStoryBacklog, change.content);
  const mutation = {
    mutation_id: newId(),
    document_id: doc.id,
    doc_type: STORY_BACKLOG,
    from_version: doc.version,
    to_version: doc.version + 1,
    summary: change.summary,
  };
  insertMutation(db, {
    id: mutation.mutation_id,
    work_item_id: item.id,
    thread_id: thread.id,
    document_id: doc.id,
    from_version: mutation.from_version,
    to_version: mutation.to_version,
    summary: JSON.stringify(change.summary),
    created_at: now,
  });
  return mutation;
}

export const storyOperation: Operation<StoriesAnswer> = {
  buildRequest: buildStoryRequest,
  parseAnswer: parseStoryAnswer,
  countItems: (answer) => answer.stories.length,
  applyAnswer: applyStoryAnswer,
};
