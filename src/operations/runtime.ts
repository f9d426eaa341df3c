/**
 * Calling an operation's functions: every result is checked before the engine uses it, and a throw
 * becomes an OperationCallError naming the operation and the function, so a user's module can fail
 * a request but never corrupt one. Pure: no storage here (the daemon passes documents in).
 */
import type { ChatMessage, SchemaChatRequest } from '../domain/prompts.js';
import type { DocumentParts, DocumentTarget, Documents, Identity, PromptContext, Provenance } from './api.js';
import { elementKey, keyIndex, splitDocument, type PartsLayout, type Split } from '../domain/document-parts.js';
import { storableMessage, findUnstorableText, mayHoldUnstorableText, textProblem, type UnstorableText } from '../domain/storable-text.js';
import type { Operation } from './registry.js';
import { NOT_LOADED_YET, OperationCallError } from '../core/errors.js';

/** Size limits on what a module returns: a request, a document, a mutation summary. */
export const LIMITS = { promptBytes: 1 << 20, contentBytes: 16 << 20, summaryBytes: 64 << 10, targetRefBytes: 4 << 10, children: 10_000, partChars: 200 };

export const contentTooLarge = () => `the content exceeds ${LIMITS.contentBytes} characters as JSON`;

function call<T>(op: Operation, fn: string, run: () => T): T {
  try {
    return run();
  } catch (err) {
    // A read-ahead miss is not the function's failure: the daemon loads the value and calls it again.
    if (err instanceof OperationCallError || err === NOT_LOADED_YET) throw err;
    const e = err as { message?: unknown; code?: unknown };
    // Kept as an item's error_message when it fails an answer (an apply echoing the answer): NUL escaped,
    // half a surrogate pair made U+FFFD (domain/storable-text.ts `storableMessage`).
    const message = storableMessage(typeof e?.message === 'string' ? e.message : String(err));
    throw new OperationCallError(op.name, fn, message, e?.code === 'NOT_FOUND');
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function part(op: Operation, fn: string, field: string, v: unknown, optional = false): string | undefined {
  if (optional && v === undefined) return undefined;
  if (typeof v !== 'string' || v === '' || v.length > LIMITS.partChars) {
    throw new OperationCallError(
      op.name,
      fn,
      `${field} must be a non-empty string of at most ${LIMITS.partChars} characters (got ${JSON.stringify(v) ?? 'nothing'})`,
    );
  }
  // A NUL or lone surrogate from the operation's own code (its input holds none: domain/storable-text.ts), refused on both backends alike.
  const problem = textProblem(v);
  if (problem !== null) throw new OperationCallError(op.name, fn, `${field} ${problem}`);
  return v;
}

export function identityOf(op: Operation, input: unknown): Identity {
  const id = call(op, 'identity', () => op.definition.identity(input));
  if (!isPlainObject(id)) throw new OperationCallError(op.name, 'identity', 'must return {space_type, space_id, target_doc_type, target_id}');
  return {
    space_type: part(op, 'identity', 'space_type', id.space_type)!,
    space_id: part(op, 'identity', 'space_id', id.space_id)!,
    target_doc_type: part(op, 'identity', 'target_doc_type', id.target_doc_type)!,
    target_id: part(op, 'identity', 'target_id', id.target_id)!,
  };
}

/** WS-ADR-035's key: `{operation}:{space_type}:{space_id}:{target_doc_type}:{target_id}`. */
export function idempotencyKey(op: Operation, identity: Identity): string {
  return `${op.name}:${identity.space_type}:${identity.space_id}:${identity.target_doc_type}:${identity.target_id}`;
}

export function lockScopeOf(op: Operation, input: unknown): string {
  return part(
    op,
    'lockScope',
    'the lock scope',
    call(op, 'lockScope', () => op.definition.lockScope(input)),
  )!;
}

/** The target, as stored in `target_ref`: doc_type and project_id first, then key and extra fields. */
export function targetOf(op: Operation, input: unknown): DocumentTarget {
  const t = call(op, 'target', () => op.definition.target(input));
  if (!isPlainObject(t)) throw new OperationCallError(op.name, 'target', 'must return {project_id, doc_type, key?}');
  const { doc_type, project_id, key, ...extra } = t;
  const target: DocumentTarget = {
    doc_type: part(op, 'target', 'doc_type', doc_type)!,
    project_id: part(op, 'target', 'project_id', project_id)!,
    ...(key !== undefined ? { key: part(op, 'target', 'key', key)! } : {}),
    ...extra,
  };
  if (JSON.stringify(target).length > LIMITS.targetRefBytes)
    throw new OperationCallError(op.name, 'target', `must be at most ${LIMITS.targetRefBytes} bytes as JSON`);
  return target;
}

export function childInputs(op: Operation, input: unknown, documents: Documents): unknown[] {
  const inputs = call(op, 'children', () => op.definition.children!(input, { documents }));
  if (!Array.isArray(inputs)) throw new OperationCallError(op.name, 'children', 'must return an array of inputs');
  if (inputs.length > LIMITS.children) throw new OperationCallError(op.name, 'children', `returned ${inputs.length} inputs; at most ${LIMITS.children}`);
  return inputs;
}

const ROLES = new Set(['system', 'user', 'assistant']);

/** The exact request the engine records and sends: the operation's messages, its model, its output schema. */
export function renderRequest(op: Operation, context: PromptContext<unknown>): SchemaChatRequest {
  const result = call(op, 'prompt', () => op.definition.prompt!(context));
  const raw = isPlainObject(result) ? result.messages : undefined;
  if (!Array.isArray(raw) || raw.length === 0)
    throw new OperationCallError(op.name, 'prompt', 'must return {messages: [{role, content}, …]} with at least one message');
  const messages: ChatMessage[] = raw.map((m, i) => {
    if (!isPlainObject(m) || !ROLES.has(m.role as string) || typeof m.content !== 'string') {
      throw new OperationCallError(op.name, 'prompt', `messages[${i}] must be {role: "system" | "user" | "assistant", content: string}`);
    }
    return { role: m.role as ChatMessage['role'], content: m.content };
  });
  if (messages.reduce((n, m) => n + m.content.length, 0) > LIMITS.promptBytes) {
    throw new OperationCallError(op.name, 'prompt', `the messages exceed ${LIMITS.promptBytes} characters`);
  }
  return {
    model: op.params.model,
    messages,
    response_format: { type: 'json_schema', json_schema: { name: op.name, strict: false, schema: op.definition.output as Record<string, unknown> } },
    temperature: op.params.temperature,
    max_tokens: op.params.maxTokens,
  };
}

export type AnswerCheck = { ok: true; value: unknown } | { ok: false; errors: string[] };

/**
 * The message content of an answer: JSON first, then the output schema and the rules. Errors name each
 * field. They are the answer's failure reason, stored as the item's `error_message`, so any U+0000 in them
 * is written `\u0000` and half a surrogate pair U+FFFD here, where every such reason is made: `JSON.parse`'s
 * message quotes the text around the error (a raw NUL in an answer that is not JSON), and `rules.check`
 * (user code) may echo the answer (domain/storable-text.ts `storableMessage`).
 */
export function checkAnswer(op: Operation, content: string | null | undefined): AnswerCheck {
  if (content === null || content === undefined || content.trim() === '') return { ok: false, errors: ['(root): the answer is empty'] };
  let value: unknown;
  try {
    value = JSON.parse(content);
  } catch (err) {
    return invalidAnswer([`(root): the answer is not JSON (${(err as Error).message})`]);
  }
  // A model's U+0000 or lone surrogate makes the answer invalid, like a schema failure (domain/storable-text.ts);
  // an answer whose text cannot hold one is not walked.
  const unstorable = mayHoldUnstorableText(content) ? findUnstorableText(value) : null;
  if (unstorable !== null) return { ok: false, errors: [`${unstorable.path}: ${unstorable.problem}`] };
  const errors = call(op, 'rules.check', () => op.checkAnswer(value));
  if (!Array.isArray(errors)) throw new OperationCallError(op.name, 'rules.check', 'must return an array of messages');
  return errors.length === 0 ? { ok: true, value } : invalidAnswer(errors.map(String));
}

function invalidAnswer(errors: string[]): AnswerCheck {
  return { ok: false, errors: errors.map(storableMessage) };
}

/**
 * What a `parse_report` counts: the entries of the answer's top-level arrays, named after the array
 * when the output schema has exactly one ("valid: 5 stories"), else "items".
 */
export function countAnswerItems(op: Operation, answer: unknown): { items: number; noun: string } {
  const items = isPlainObject(answer) ? Object.values(answer).reduce<number>((n, v) => n + (Array.isArray(v) ? v.length : 0), 0) : 0;
  return { items, noun: itemNoun(op) };
}

export function itemNoun(op: Operation): string {
  const properties = (op.definition.output?.properties ?? {}) as Record<string, { type?: unknown }>;
  const arrays = Object.entries(properties).filter(([, p]) => isPlainObject(p) && p.type === 'array');
  return arrays.length === 1 ? arrays[0]![0] : 'items';
}

export interface PlannedMutation {
  content: unknown;
  /** The content as stored: JSON text; null when it is stored in parts (`split`), written part by part. */
  text: string | null;
  /** The content split by the operation's `parts` (null: stored whole). */
  split: { layout: DocumentParts; next: NonNullable<ReturnType<typeof splitDocument>> } | null;
  summary: Record<string, unknown>;
}

/** A document's content as the JSON text stored whole; throws OperationCallError when it is not JSON or is too large. */
export function contentText(operation: string, content: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(content);
  } catch (err) {
    throw new OperationCallError(operation, 'apply', `must return JSON values (${(err as Error).message})`);
  }
  if (text === undefined) throw new OperationCallError(operation, 'apply', 'content must be a JSON value');
  if (text.length > LIMITS.contentBytes) throw new OperationCallError(operation, 'apply', contentTooLarge());
  return text;
}

/**
 * A U+0000 or lone surrogate that the operation's own code put in `apply`'s result (its answer and input
 * hold none: domain/storable-text.ts) is refused as an unusable result, the same on both backends: it would
 * be a document part's key or a value later ones are derived from, and neither backend stores it as given.
 * A result whose JSON text cannot hold one is not walked; content stored in parts (not made JSON whole:
 * `split` set) is walked only where it is new (unstorableInNewParts).
 */
function refuseUnstorableInResult(
  op: Operation,
  result: { content: unknown; text: string | null; split: { layout: PartsLayout; next: Split } | null; summary: unknown; summaryText: string },
  current: unknown,
): void {
  const { content, text, split, summary, summaryText } = result;
  const inContent = split
    ? unstorableInNewParts(split.next, current, split.layout)
    : text !== null && mayHoldUnstorableText(text)
      ? findUnstorableText(content)
      : null;
  const inSummary = inContent === null && mayHoldUnstorableText(summaryText) ? findUnstorableText(summary) : null;
  if (inContent !== null) throw new OperationCallError(op.name, 'apply', `content ${inContent.path} ${inContent.problem}`);
  if (inSummary !== null) throw new OperationCallError(op.name, 'apply', `summary ${inSummary.path} ${inSummary.problem}`);
}

/**
 * The first U+0000 or lone surrogate in content stored in parts, in its head and in the elements `apply` did not
 * keep from `current`: a kept element is the same (frozen) object, checked when it was planned (or stored
 * by a build before these checks, in a SQLite home: what it holds was stored already). Walking every
 * element would make each mutation cost grow with the document (issue 20 target 2), so this walks both
 * arrays as planParts does (by identity, then by key) and reads only the new, changed or moved elements'
 * values. The map of keys is made only when an element moved or was removed before the stored array's
 * end, never for elements appended after it (generate-all's case: each epic's stories are appended).
 */
function unstorableInNewParts(split: Split, current: unknown, layout: PartsLayout): UnstorableText | null {
  const inHead = findUnstorableText(split.head);
  if (inHead !== null) return inHead;
  const before = splitDocument(current, layout)?.elements ?? [];
  let index: Map<unknown, number> | null = null;
  for (let j = 0, i = 0; j < split.elements.length; j++) {
    const element = split.elements[j];
    if (i < before.length && element === before[i]) {
      i++;
      continue;
    }
    const key = elementKey(split.elements, layout.key, j);
    let at = i < before.length && elementKey(before, layout.key, i) === key ? i : undefined;
    if (at === undefined && key !== undefined && (index !== null || i < before.length)) {
      index ??= keyIndex(before, layout.key);
      at = index.get(key);
    }
    if (at !== undefined && at >= i) i = at + 1;
    if (at !== undefined && element === before[at]) continue;
    const found = findUnstorableText(element);
    if (found !== null) {
      const at = found.path;
      return { ...found, path: `${layout.field}[${j}]${at.startsWith('(root)') ? at.slice('(root)'.length) : at.startsWith('[') ? at : `.${at}`}` };
    }
  }
  return null;
}

/** Runs `apply` and checks its result; throws OperationCallError when it throws or returns something unusable. */
export function planMutation(
  op: Operation,
  context: { current: unknown; answer: unknown; input: unknown; documents: Documents; provenance: Provenance },
): PlannedMutation {
  const result = call(op, 'apply', () => op.definition.apply!(context));
  if (!isPlainObject(result) || result.content === undefined) throw new OperationCallError(op.name, 'apply', 'must return {content, summary}');
  if (!isPlainObject(result.summary)) throw new OperationCallError(op.name, 'apply', 'summary must be an object');
  const layout = op.definition.parts;
  const next = layout ? splitDocument(result.content, layout) : null;
  // In parts, each part is made JSON when written (the storage checks the size then).
  const text = next ? null : contentText(op.name, result.content);
  let summaryText: string;
  try {
    summaryText = JSON.stringify(result.summary);
  } catch (err) {
    throw new OperationCallError(op.name, 'apply', `must return JSON values (${(err as Error).message})`);
  }
  if (summaryText.length > LIMITS.summaryBytes) throw new OperationCallError(op.name, 'apply', `the summary exceeds ${LIMITS.summaryBytes} characters as JSON`);
  const split = layout && next ? { layout, next } : null;
  refuseUnstorableInResult(op, { content: result.content, text, split, summary: result.summary, summaryText }, context.current);
  // The summary as JSON reads it back (no undefined, no Date objects): what the ledger and the mutations row keep.
  return { content: result.content, text, split, summary: JSON.parse(summaryText) as Record<string, unknown> };
}
