/**
 * The public operation API. An operation is one plain object: a module in `COMBINE_HOME/operations/`
 * default-exports it (no import needed); TypeScript users may wrap it in `defineOperation` for types.
 * The built-ins (`src/operations/builtin/`) are written the same way.
 *
 * The engine owns everything else: lease before pay, the prompt and the response recorded, validation
 * against `output`, the one mutation transaction under `lockScope`, budgets, retries, recovery and
 * the ledger. The functions below are called inside the daemon; they must be synchronous, must not
 * do I/O, and must return the same result for the same arguments.
 *
 * This file is self-contained (no imports): it is the source of the package's `.d.ts`.
 */

/** A JSON Schema (draft-07) object. */
export type JsonSchema = { [keyword: string]: unknown };

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/**
 * The semantic identity of a request. The idempotency key is
 * `{name}:{space_type}:{space_id}:{target_doc_type}:{target_id}`: while a thread with that key is open
 * or running it answers the same request again, and a complete one does unless `--force`.
 */
export interface Identity {
  space_type: string;
  space_id: string;
  target_doc_type: string;
  target_id: string;
}

/**
 * The one document the answer changes. `key` tells documents of one type apart within a project
 * (a briefing per date). Other fields are kept in the thread's `target_ref`, for people (e.g. `epic_id`).
 */
export interface DocumentTarget {
  project_id: string;
  doc_type: string;
  key?: string;
  [extra: string]: unknown;
}

/** Read-only access to the target project's current documents (parsed JSON, frozen), or null when absent. */
export interface Documents {
  get(docType: string, key?: string): unknown;
}

export interface ProjectInfo {
  id: string;
  name: string;
}

/** A thread of the project, as a prompt may report it. */
export interface ThreadFact {
  thread_id: string;
  kind: string;
  status: string;
  target_ref: { [field: string]: unknown };
  /** The error code of its latest work item (why it failed, or why it is waiting). */
  error_code: string | null;
  created_at: string;
}

/** Read-only facts about the target project's threads. */
export interface ProjectThreads {
  countByStatus(options?: { exclude_kinds?: string[] }): Record<string, number>;
  /** The newest threads in these statuses (at most `limit`, default 10, at most 100). */
  list(options: { statuses: string[]; limit?: number; exclude_kinds?: string[] }): ThreadFact[];
}

export interface PromptContext<I> {
  input: I;
  documents: Documents;
  project: ProjectInfo;
  threads: ProjectThreads;
}

/** Where a mutation comes from: stored by operations that keep provenance in their document. */
export interface Provenance {
  thread_id: string;
  work_item_id: string;
  /** The transaction's time, in milliseconds since the epoch. */
  at: number;
}

export interface ApplyContext<I, A, C> {
  /** The document's current content, or null when it does not exist yet. Frozen: build a new value. */
  current: C | null;
  /** The answer, valid against `output` and the rules. */
  answer: A;
  input: I;
  documents: Documents;
  provenance: Provenance;
}

export interface ApplyResult<C> {
  /** The document's next content (JSON). */
  content: C;
  /** A small summary for the `mutation_report` ledger entry. */
  summary: { [field: string]: unknown };
}

/** Claim order: interactive before bulk before scheduled (waiting work ages toward interactive). */
export type Priority = 'interactive' | 'bulk' | 'scheduled';

export interface RetryOptions {
  max_attempts?: number;
  /** Delay before the second attempt (milliseconds, or a duration such as "2s"); doubles each attempt. */
  base?: number | string;
  /** The longest delay between attempts. */
  cap?: number | string;
}

/**
 * Answer rules an operator may set in config (`operations.<name>.validation`), checked after the
 * schema: a violation is SCHEMA_INVALID and goes through repair like any schema error.
 */
export interface AnswerRules<A> {
  /** JSON Schema of what config may set. */
  schema: JsonSchema;
  /** The violations of a schema-valid answer, each naming the field (`check` gets {} when none are set). */
  check(answer: A, rules: { [rule: string]: any }): string[];
}

interface OperationBase<I> {
  /** snake_case, unique; it is the thread kind. */
  name: string;
  /** One line, shown by `combine operations`. */
  description: string;
  /** JSON Schema (type "object") of what `combine run <name> --input` accepts. */
  input: JsonSchema;
  identity(input: I): Identity;
  /** The lock the mutation runs under (an orchestration holds it while its children run). */
  lockScope(input: I): string;
  target(input: I): DocumentTarget;
  /** A logical model name (config `models`); default `default`, the configured model. */
  model?: string;
  priority?: Priority;
  retry?: RetryOptions;
}

/**
 * How the target document is stored: `content[field]` is an array of objects, each named by its string
 * field `key` (unique within the array), and each stored on its own — so a mutation that changes one
 * element writes that element, not the whole document. Readers still see one document, one version.
 * Keep the elements `apply` does not change as they are (the same objects from `current`), in their
 * order: that is how the engine sees what changed. Content of another shape is stored whole.
 */
export interface DocumentParts {
  field: string;
  key: string;
}

/** An operation that asks the model once and applies the answer to its target document. */
export interface CallOperation<I = any, A = any, C = any> extends OperationBase<I> {
  /** Store the target document in parts (for documents with many elements that mutations change one at a time). */
  parts?: DocumentParts;
  prompt(context: PromptContext<I>): { messages: ChatMessage[] };
  /** JSON Schema of the answer; sent as the `json_schema` response format and validated. */
  output: JsonSchema;
  /** Pure: the document's next content from its current content. */
  apply(context: ApplyContext<I, A, C>): ApplyResult<C>;
  rules?: AnswerRules<A>;
  children?: never;
  child?: never;
}

/**
 * An orchestration: a parent thread with one child thread of operation `child` per input that
 * `children` returns. Children run independently (continue_on_error); the parent completes when all
 * did, else fails, and reports `child_summary`. It makes no call of its own.
 */
export interface FanOutOperation<I = any> extends OperationBase<I> {
  children(input: I, context: { documents: Documents }): unknown[];
  child: string;
  parts?: never;
  prompt?: never;
  output?: never;
  apply?: never;
  rules?: never;
}

export type OperationDefinition<I = any, A = any, C = any> = CallOperation<I, A, C> | FanOutOperation<I>;

/** Returns its argument: only there to give TypeScript users the types. */
export function defineOperation<I = any, A = any, C = any>(definition: CallOperation<I, A, C>): CallOperation<I, A, C>;
export function defineOperation<I = any>(definition: FanOutOperation<I>): FanOutOperation<I>;
export function defineOperation(definition: OperationDefinition): OperationDefinition {
  return definition;
}
