/**
 * The operations the engine can run, by thread kind. The completer asks the registry for the thread's
 * operation and never branches on kinds itself: adding an operation is adding an entry here.
 */
import type { Db } from '../../db/connection.js';
import type { ThreadRow, WorkItemRow } from '../../db/schema.js';
import type { AnswerRules } from '../../domain/answer-rules.js';
import type { ClassifiedError } from '../../domain/errors.js';
import { PROJECT_BRIEFING, STORY_GENERATE_EPIC } from '../../domain/operations.js';
import type { ParseResult } from '../../domain/project.js';
import type { ChatRequest, ModelParams } from '../../domain/prompts.js';
import { briefingOperation } from './briefing-operation.js';
import { storyOperation } from './story-operation.js';

export type BuildResult = { ok: true; request: ChatRequest } | { ok: false; error: ClassifiedError };

export interface AppliedMutation {
  mutation_id: string;
  document_id: string;
  doc_type: string;
  from_version: number;
  to_version: number;
  summary: Record<string, unknown>;
}

/** One operation's storage-facing steps; the pure parts (prompt, schema, merge) live in src/domain. */
export interface Operation<A> {
  /** The request for this thread's work item, or a permanent error when its target no longer exists. */
  buildRequest(db: Db, thread: ThreadRow, params: ModelParams): BuildResult;
  /** Validates the answer's message content against the operation's schema and the operator's rules. */
  parseAnswer(content: string | null, rules: AnswerRules): ParseResult<A>;
  /** How many things the answer holds (for the `parse_report` entry). */
  countItems(answer: A): number;
  /** Applies a valid answer as the target document's next version, with its mutation row. */
  applyAnswer(db: Db, thread: ThreadRow, item: WorkItemRow, answer: A, now: number): AppliedMutation;
}

const OPERATIONS: Record<string, Operation<unknown>> = {
  [STORY_GENERATE_EPIC]: storyOperation as Operation<unknown>,
  [PROJECT_BRIEFING]: briefingOperation as Operation<unknown>,
};

/** The operation that runs work items of threads of this kind; throws for a kind with no work items. */
export function operationFor(kind: string): Operation<unknown> {
  const op = OPERATIONS[kind];
  if (!op) throw new Error(`no operation runs work items of thread kind "${kind}"`);
  return op;
}
