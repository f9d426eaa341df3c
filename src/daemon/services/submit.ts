/**
 * The one recipe every request of work goes through — `combine run`, the story shorthands, schedules
 * and an orchestration's children alike: input checked → key → existing thread → new thread → work
 * item (or children) → queue room. It runs inside one writer transaction: an acknowledged request is
 * on disk, a refused one stored nothing.
 *
 * Idempotency (ADR-035 §8): a request's key finds an open or running thread → that thread is returned
 * (`deduplicated: true`); a complete one → returned as is, no new work, unless `force`. A child of an
 * orchestration follows the same rule, so an epic already generated is not paid for again.
 */
import { lockKeyForTransaction } from '../../db/key-locks.js';
import { acquireLock, getLock, releaseLocksOwnedBy } from '../../db/locks.js';
import type { ThreadRow } from '../../db/schema.js';
import {
  adoptThreads,
  findActiveThreadByKey,
  findLatestCompleteThreadByKey,
  insertThreadUnlessActive,
  latestCompleteThreadsByKeys,
  listActiveThreadsByKeys,
} from '../../db/threads.js';
import { PRIORITY_OF } from '../../domain/operations.js';
import type { DocumentTarget, ProjectInfo } from '../../operations/api.js';
import type { Operation, OperationRegistry } from '../../operations/registry.js';
import { childInputs, idempotencyKey, identityOf, lockScopeOf, renderRequest, targetOf } from '../../operations/runtime.js';
import { assertQueueHasRoom, type CommandResult } from './commands.js';
import { documentsOf, projectInfo, promptContextFor, runReadingDocuments } from '../engine/operation-context.js';
import { runWithReads } from '../engine/read-ahead.js';
import { emitThread, emitWorkItem, moveThread, type Tx } from '../engine/tx.js';
import { enqueueWorkItem, queuedWorkItem } from '../engine/enqueue.js';
import { OperationCallError, CommandError, StaleStateError } from '../../core/errors.js';
import { insertThreadsUnlessActive, insertWorkItems } from '../../db/new-children.js';
import { newId } from '../../core/ids.js';
import { supersedableItem, supersedeThread } from './supersede.js';

/** The largest input a request may carry, as JSON. */
export const MAX_INPUT_BYTES = 256 * 1024;

export interface SubmitOptions {
  force: boolean;
  /** Backpressure: refuse (QUEUE_FULL) when the request would leave more than this many items queued. */
  maxQueued: number;
  /** Absolute time after which unstarted work fails with SKIPPED_DEADLINE. */
  deadlineAt: number | null;
  createdBy: string | null;
  /** Claim priority of the work items; defaults to the operation's (interactive, or bulk for children). */
  priority?: number;
  /** The command's W3C trace context: stored on the new thread (and an orchestration's children). */
  traceparent: string | null;
}

/** The operation named `name`, or a refusal a user can act on. */
export function requireOperation(ops: OperationRegistry, name: string): Operation {
  const op = ops.get(name);
  if (!op) throw new CommandError('NOT_FOUND', `no operation "${name}" (see \`combine operations\`)`);
  return op;
}

/** Refuses input its operation's schema rejects, naming each field; nothing is stored. */
export function checkInput(op: Operation, input: unknown, what = 'input'): void {
  const errors = op.checkInput(input);
  if (errors.length === 0) return;
  const lines = errors.map((e) => (e.startsWith('(root)') ? e.replace('(root)', what) : `${what}.${e}`));
  // Each line is `<field>: <message>` (json-schema.ts): the field is what precedes the first ": ".
  const fields = lines.map((l) => ({ field: l.slice(0, l.indexOf(': ')), message: l.slice(l.indexOf(': ') + 2) }));
  throw new CommandError('BAD_REQUEST', `invalid ${what} for ${op.name}:\n  ${lines.join('\n  ')}`, undefined, fields);
}

/** A definition's function refused the request (or failed): the user gets its message. */
export function refusal(err: unknown): never {
  if (err instanceof OperationCallError) throw new CommandError(err.notFound ? 'NOT_FOUND' : 'BAD_REQUEST', err.notFound ? err.reason : err.message);
  throw err;
}

interface Planned {
  key: string;
  target: DocumentTarget;
  lockScope: string;
  spaceType: string;
  spaceId: string;
}

function plan(op: Operation, input: unknown): Planned {
  try {
    const identity = identityOf(op, input);
    return {
      key: idempotencyKey(op, identity),
      target: targetOf(op, input),
      lockScope: lockScopeOf(op, input),
      spaceType: identity.space_type,
      spaceId: identity.space_id,
    };
  } catch (err) {
    return refusal(err);
  }
}

/** Submits one request of `name`: the thread that answers it, new or found. */
export async function submitOperation(tx: Tx, ops: OperationRegistry, name: string, input: unknown, o: SubmitOptions): Promise<CommandResult> {
  if (JSON.stringify(input ?? null).length > MAX_INPUT_BYTES)
    throw new CommandError('BAD_REQUEST', `the input is larger than ${MAX_INPUT_BYTES} bytes as JSON`);
  const op = requireOperation(ops, name);
  checkInput(op, input);
  const result = await submit(tx, ops, op, input, o);
  // After the inserts, so a whole orchestration is refused as one: the savepoint rolls all of it back.
  await assertQueueHasRoom(tx, o.maxQueued);
  return result;
}

/**
 * What an orchestration looked up once for all its children, instead of three reads per child: the
 * threads already answering their keys, and the projects they target.
 */
interface ChildLookups {
  active: Map<string, ThreadRow>;
  /** Absent under `force` (a complete thread does not answer a forced request). */
  complete: Map<string, ThreadRow> | null;
  projects: Map<string, ProjectInfo | null>;
  /** The runs in progress the orchestration adopts, all in one statement once its children are submitted (`adoptThreads`). */
  adopted: Set<string>;
}

async function lookUpChildren(tx: Tx, keys: readonly string[], force: boolean): Promise<ChildLookups> {
  const active = new Map((await listActiveThreadsByKeys(tx.sql, keys)).map((t) => [t.idempotency_key, t]));
  const complete = force ? null : await latestCompleteThreadsByKeys(tx.sql, keys);
  return { active, complete, projects: new Map(), adopted: new Set() };
}

async function cachedProjectInfo(tx: Tx, projectId: string, lookups: ChildLookups): Promise<ProjectInfo | null> {
  if (!lookups.projects.has(projectId)) lookups.projects.set(projectId, await projectInfo(tx.sql, projectId));
  return lookups.projects.get(projectId)!;
}

/** A request (not an orchestration's child: `submitChildren`). */
async function submit(tx: Tx, ops: OperationRegistry, op: Operation, input: unknown, o: SubmitOptions): Promise<CommandResult> {
  const p = plan(op, input);
  // Requests for one key decide one after another (deduplicate, supersede, insert). Children are not
  // locked one by one: a child racing a request of its own key in another transaction is answered by
  // that request's thread once the insert finds it on the unique index (`submitChildren`).
  await lockKeyForTransaction(tx.sql, `submit:${p.key}`);
  const active = await findActiveThreadByKey(tx.sql, p.key);
  const id = newId(tx.now);
  let superseded: string | undefined;
  if (active) {
    if (o.force && (await supersedableItem(tx, active))) {
      // Its call has not started: the forced request replaces it rather than queueing behind it.
      await supersedeThread(tx, active, id);
      superseded = active.id;
    } else return { thread: active, deduplicated: true };
  }
  const complete = o.force ? undefined : await findLatestCompleteThreadByKey(tx.sql, p.key);
  if (complete) return { thread: complete, deduplicated: true };
  const project = await projectInfo(tx.sql, p.target.project_id);
  if (!project) throw new CommandError('NOT_FOUND', `no project "${p.target.project_id}" (see \`combine project list\`)`);
  if (op.fansOut) return await orchestrate(tx, ops, op, input, p, o);
  await checkPrompt(tx, op, project, input);
  const thread = await newThread(tx, op, input, p, { id, role: 'work', parent: null, createdBy: o.createdBy, traceparent: o.traceparent });
  // Not expected (the request's key is locked since its lookup), but the index has the last word.
  if (!thread) return { thread: (await findActiveThreadByKey(tx.sql, p.key))!, deduplicated: true };
  await enqueueWorkItem(tx, thread, { sequence: 1, lockScope: p.lockScope, priority: priorityOf(op, o), policy: op.policy, deadlineAt: o.deadlineAt });
  return { thread, deduplicated: false, ...(superseded ? { superseded } : {}) };
}

/** A request's work item's priority: the caller's, else its operation's. */
function priorityOf(op: Operation, o: SubmitOptions): number {
  return o.priority ?? PRIORITY_OF[op.priority ?? 'interactive'];
}

/** Refuses a request that cannot be built now (e.g. its epic does not exist), rather than failing it later. */
async function checkPrompt(tx: Tx, op: Operation, project: ProjectInfo, input: unknown): Promise<void> {
  try {
    await runReadingDocuments(tx.sql, project.id, { op, fn: 'prompt' }, (reads) => renderRequest(op, promptContextFor(tx.sql, reads, project, input)));
  } catch (err) {
    refusal(err);
  }
}

/** A child request is answered by `active`, already open or running: an orchestration adopts the run in progress instead of paying twice. */
function adoptUnlessChild(active: ThreadRow, lookups: ChildLookups): void {
  if (active.parent_thread_id === null) lookups.adopted.add(active.id);
}

/** A parent holding the operation's lock, and one child request per input its `children` returns. */
async function orchestrate(tx: Tx, ops: OperationRegistry, op: Operation, input: unknown, p: Planned, o: SubmitOptions): Promise<CommandResult> {
  const parent = await newThread(tx, op, input, p, {
    id: newId(tx.now),
    role: 'orchestration',
    parent: null,
    createdBy: o.createdBy,
    traceparent: o.traceparent,
  });
  // Not expected (the request's key is locked since its lookup), but the index has the last word.
  if (!parent) return { thread: (await findActiveThreadByKey(tx.sql, p.key))!, deduplicated: true };
  // Lock order: the orchestration's lock is taken here, while this transaction holds no item lock.
  if (!(await acquireLock(tx.sql, { scope: p.lockScope, owner: parent.id, now: tx.now, expires_at: null }))) {
    throw new CommandError('CONFLICT', `${p.lockScope} is locked by thread ${(await getLock(tx.sql, p.lockScope))?.owner}`, 'LOCKED');
  }
  const child = requireOperation(ops, op.definition.child!);
  let inputs: unknown[];
  try {
    inputs = await runWithReads((reads) => childInputs(op, input, documentsOf(tx.sql, reads, p.target.project_id)));
  } catch (err) {
    return refusal(err);
  }
  const childOptions = { ...o, priority: o.priority ?? PRIORITY_OF[op.priority ?? 'bulk'] };
  const keys = inputs.map((childInput, i) => {
    checkInput(child, childInput, `children[${i}]`);
    const planned = plan(child, childInput);
    // The parent holds its scope until every child ended: a child needing it would wait forever.
    if (planned.lockScope === p.lockScope) {
      throw new CommandError(
        'BAD_REQUEST',
        `${op.name}: children[${i}] would lock ${p.lockScope}, which the orchestration itself holds until its children end`,
      );
    }
    return planned.key;
  });
  const lookups = await lookUpChildren(tx, keys, o.force);
  const created = await submitChildren(tx, child, inputs, childOptions, parent, lookups);
  // In id order, in one statement: one at a time in the epics' order crossed a start of two of them (engine/tx.ts LOCK ORDER).
  await adoptThreads(tx.sql, [...lookups.adopted], parent.id);
  // Its children are the threads created for it and those it adopted (every one, or adoptThreads threw).
  if (created + lookups.adopted.size === 0) {
    // Nothing to wait for (no inputs, or every child's request was already complete).
    const completed = await moveThread(tx, parent, 'complete');
    await releaseLocksOwnedBy(tx.sql, parent.id);
    return { thread: completed, deduplicated: false };
  }
  return { thread: parent, deduplicated: false };
}

/**
 * An orchestration's child requests, each decided as `submit` decides one (its key's active or complete
 * thread answers it, its project must exist, its prompt must build), then the new threads and their work
 * items inserted together (db/new-children.ts: on Postgres a statement per table and chunk, not per
 * child), their events in the children's order. Returns how many threads it created. A child key that
 * another transaction's thread took after the lookup is answered by that thread, as in `submit`; a key
 * twice among the children, by the first one's thread. (A child never fans out itself: operations/registry.ts.)
 */
async function submitChildren(
  tx: Tx,
  child: Operation,
  inputs: readonly unknown[],
  o: SubmitOptions,
  parent: ThreadRow,
  lookups: ChildLookups,
): Promise<number> {
  const fresh: { thread: ThreadRow; lockScope: string }[] = [];
  const keys = new Set<string>();
  const traceparent = parent.traceparent ?? o.traceparent;
  for (const input of inputs) {
    const p = plan(child, input);
    if (keys.has(p.key)) continue;
    const active = lookups.active.get(p.key);
    if (active) {
      adoptUnlessChild(active, lookups);
      continue;
    }
    if (!o.force && lookups.complete?.get(p.key)) continue;
    const project = await cachedProjectInfo(tx, p.target.project_id, lookups);
    if (!project) throw new CommandError('NOT_FOUND', `no project "${p.target.project_id}" (see \`combine project list\`)`);
    await checkPrompt(tx, child, project, input);
    keys.add(p.key);
    fresh.push({
      thread: threadRow(tx, child, input, p, { id: newId(tx.now), role: 'work', parent, createdBy: o.createdBy, traceparent }),
      lockScope: p.lockScope,
    });
  }
  const inserted = await insertThreadsUnlessActive(
    tx.sql,
    fresh.map((f) => f.thread),
  );
  const raced = fresh.filter((f) => !inserted.has(f.thread.id)).map((f) => f.thread.idempotency_key);
  if (raced.length > 0) {
    const found = await listActiveThreadsByKeys(tx.sql, raced);
    // Ended already, between the insert that found it and this read: rare; the request is decided again.
    if (found.length !== raced.length) throw new StaleStateError(`child threads of ${raced.join(', ')} ended while ${parent.id} was submitted`);
    for (const thread of found) adoptUnlessChild(thread, lookups);
  }
  const created = fresh.filter((f) => inserted.has(f.thread.id));
  const priority = priorityOf(child, o);
  const items = created.map((f) =>
    queuedWorkItem(tx, f.thread, { sequence: 1, lockScope: f.lockScope, priority, policy: child.policy, deadlineAt: o.deadlineAt }),
  );
  await insertWorkItems(tx.sql, items);
  created.forEach((f, i) => {
    emitThread(tx, f.thread);
    emitWorkItem(tx, f.thread, items[i]!);
  });
  return created.length;
}

interface NewThread {
  id: string;
  role: 'work' | 'orchestration';
  parent: ThreadRow | null;
  createdBy: string | null;
  traceparent: string | null;
}

/** Inserts the thread; null when an active thread of the same key exists (nothing inserted). */
async function newThread(tx: Tx, op: Operation, input: unknown, p: Planned, n: NewThread): Promise<ThreadRow | null> {
  const row = threadRow(tx, op, input, p, n);
  if (!(await insertThreadUnlessActive(tx.sql, row))) return null;
  emitThread(tx, row);
  return row;
}

/** A new thread's row (open, created now). */
function threadRow(tx: Tx, op: Operation, input: unknown, p: Planned, n: NewThread): ThreadRow {
  const { role, parent, createdBy } = n;
  return {
    id: n.id,
    kind: op.name,
    space_type: p.spaceType,
    space_id: p.spaceId,
    target_ref: JSON.stringify(p.target),
    status: 'open',
    parent_thread_id: parent?.id ?? null,
    idempotency_key: p.key,
    role,
    input: JSON.stringify(input),
    created_by: createdBy,
    traceparent: n.traceparent,
    created_at: tx.now,
    closed_at: null,
  };
}
