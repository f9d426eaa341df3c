/**
 * Several answers applied in one Postgres transaction (engine/shared-writes.ts; issue 18 target 9): a
 * shared closure of answers locks its items, then its target documents' heads in id order, then applies
 * the answers by thread. Pinned here, on real Postgres with the real shared closures (`itemWrites`), the
 * real writer (a rollback forgets the documents cache, as the daemon's does) and the built-in
 * `story_generate_epic`, whose backlog is stored in parts:
 * - two answers to one document in one closure apply in order, with consecutive versions, the second
 *   planned from the first (its parts and its version queued for the COMMIT, the second planned from the
 *   head the closure holds and the parts it queued); an apply that reads another document of its project
 *   finds what an earlier answer of the closure wrote to it;
 * - two daemons' closures over two documents of a project (the example operation's release notes, one
 *   per version), each asked in an order that takes them crossing, both commit (the heads taken in the
 *   answers' order deadlocked); gated on `pg_stat_activity`, no timing;
 * - two daemons' closures that each create the same two documents (a keyed tally), asked in crossing
 *   orders, both commit (a document not created yet has no head: its key is locked first);
 * - a step of a closure that fails (its lease lost) loses none of the others' answers: the closure rolls
 *   back and each answer is applied again alone.
 * Each writer makes one attempt, so a deadlock is a failed write, and every failed write is counted.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { writeTx } from '../../src/core/tx.js';
import { forgetDocuments } from '../../src/db/document-cache.js';
import { readWholeDocument } from '../../src/db/document-parts.js';
import { acquireLock, acquireLockUnlessBusy, getLock } from '../../src/db/locks.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { insertDocument, lockDocumentHead } from '../../src/db/projects.js';
import type { LedgerRow } from '../../src/db/schema.js';
import { getThread, insertThread, lockThread } from '../../src/db/threads.js';
import { getWorkItem, insertWorkItem } from '../../src/db/work-items.js';
import { recordResponse } from '../../src/daemon/engine/completer.js';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import { itemWrites } from '../../src/daemon/engine/item-pipeline.js';
import type { EngineContext } from '../../src/daemon/engine/leased.js';
import { importProject } from '../../src/daemon/services/commands.js';
import { endThread, type Write } from '../../src/daemon/engine/tx.js';
import { simulatedStories } from '../../src/operations/builtin/story_generate_epic/simulate.js';
import { project, waitUntil } from '../helpers/harness.js';
import { EXAMPLE_OPERATION, PARAMS } from '../helpers/operations.js';
import { DEFAULT_RETRY_POLICY } from '../../src/domain/retry.js';
import { builtinDefinitions, loadOperationModule } from '../../src/operations/loader.js';
import { OperationRegistry } from '../../src/operations/registry.js';
import {
  backendPid,
  holderThenTwoWrites,
  NO_HOOKS,
  openRaceDatabase,
  paidAnswerOf,
  pausedWriteBy,
  type RaceDatabase,
  writesWaitingFor,
  testEngineContext,
} from '../helpers/pg-race.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let db: RaceDatabase;
let failed: string[] = [];
let writer: Write;
beforeEach(async () => {
  db = await openRaceDatabase();
  // One attempt (a deadlock fails the write); a rollback forgets the documents cache, as in the daemon (storage.ts).
  const pg = new PgWriter<EngineEvent>(db.pool, { conflictAttempts: 1, raceAttempts: 1, onRollback: (connection) => forgetDocuments({ connection }) });
  writer = writeTx(pg, systemClock, NO_HOOKS);
  failed = [];
  for (const id of ['p', 'q']) await writer((tx) => importProject(tx, project(id, 4)));
});
afterEach(() => db?.drop());
const reader = () => db.reader;
const write: Write = (fn) =>
  writer(fn).catch((err: unknown) => {
    failed.push(String((err as { cause?: unknown }).cause ?? err));
    throw err;
  });

/** An operation whose apply reads another document of its project: it counts the epics of the story backlog. */
const backlogCountModule = `export default {
  name: 'backlog_count',
  description: 'Counts the epics of the story backlog',
  input: { type: 'object', properties: { project_id: { type: 'string' } }, required: ['project_id'] },
  identity: (i) => ({ space_type: 'project', space_id: i.project_id, target_doc_type: 'backlog_count', target_id: 'count' }),
  lockScope: (i) => 'backlog_count:' + i.project_id,
  target: (i) => ({ project_id: i.project_id, doc_type: 'backlog_count' }),
  prompt: () => ({ messages: [{ role: 'user', content: 'Count' }] }),
  output: { type: 'object' },
  apply: ({ documents }) => ({ content: { epics: documents.get('story_backlog').epics.length }, summary: {} }),
};`;
/** An operation whose lock scope is finer than its target document: a keyed tally, one document per key, created by its first answer. */
const tallyModule = `export default {
  name: 'tally',
  description: 'A keyed tally',
  input: { type: 'object', properties: { project_id: { type: 'string' }, key: { type: 'string' }, n: { type: 'string' } }, required: ['project_id', 'key', 'n'] },
  identity: (i) => ({ space_type: 'project', space_id: i.project_id, target_doc_type: 'tally', target_id: i.n }),
  lockScope: (i) => 'tally:' + i.n,
  target: (i) => ({ project_id: i.project_id, doc_type: 'tally', key: i.key }),
  prompt: () => ({ messages: [{ role: 'user', content: 'Tally' }] }),
  output: { type: 'object' },
  apply: ({ current, input }) => ({ content: { n: [...((current && current.n) || []), input.n] }, summary: {} }),
};`;
const moduleDir = mkdtempSync(join(tmpdir(), 'cmb-pg-finishes-'));
writeFileSync(join(moduleDir, 'backlog_count.mjs'), backlogCountModule);
writeFileSync(join(moduleDir, 'tally.mjs'), tallyModule);
afterAll(() => rmSync(moduleDir, { recursive: true, force: true }));

/** The built-ins, the example operation (release notes: a document per version of a project), `backlog_count` and `tally`. */
const operations = new OperationRegistry(
  [
    ...builtinDefinitions(),
    await loadOperationModule(EXAMPLE_OPERATION),
    await loadOperationModule(join(moduleDir, 'backlog_count.mjs')),
    await loadOperationModule(join(moduleDir, 'tally.mjs')),
  ],
  {
    retry: DEFAULT_RETRY_POLICY,
    params: PARAMS,
    models: {},
    operations: {},
    configSource: 'test',
  },
);
const ctxOf = (owner: string): EngineContext => testEngineContext(owner, operations);

/** Item `id` of thread `t-<id>` (of `kind`, with `input` and `target`), running under `owner`: `answer` recorded as its response. */
async function answeredItem(id: string, owner: string, kind: string, input: object, target: object, answer: unknown): Promise<LedgerRow> {
  const projectId = (input as { project_id: string }).project_id;
  await insertThread(reader(), { ...testThreadRow(id), kind, status: 'running', input: JSON.stringify(input), target_ref: JSON.stringify(target) });
  const item = testWorkItemRow(id, { status: 'running', project_id: projectId, lease_owner: owner, lease_expires_at: Date.now() + 60_000 });
  await insertWorkItem(reader(), item);
  await acquireLock(reader(), { scope: item.lock_scope, owner: id, now: 1, expires_at: null });
  return (await write((tx) => recordResponse(tx, ctxOf(owner), id, paidAnswerOf(answer)))).row;
}

/** `answeredItem` of the built-in story_generate_epic for epic `E<epic>` of `project(projectId, 4)`, with the simulator's stories. */
const storiesAnswered = (id: string, projectId: string, epic: number, owner: string) =>
  answeredItem(
    id,
    owner,
    'story_generate_epic',
    { project_id: projectId, epic_id: `E${epic}` },
    { project_id: projectId, doc_type: 'story_backlog', epic_id: `E${epic}` },
    { stories: simulatedStories(`E${epic}`, `Epic number ${epic}`) },
  );

const backlogOf = async (projectId: string) => {
  const id = (await reader().get<{ id: string }>("SELECT id FROM documents WHERE project_id = ? AND doc_type = 'story_backlog'", [projectId]))!.id;
  const doc = (await readWholeDocument(reader(), id))!;
  return { id, version: doc.version, epics: (JSON.parse(doc.content) as { epics: { epic_id: string }[] }).epics.map((e) => e.epic_id) };
};

const mutationsOf = (documentId: string) =>
  reader().all<{ work_item_id: string; from_version: number; to_version: number }>(
    'SELECT work_item_id, from_version, to_version FROM mutations WHERE document_id = ? ORDER BY from_version',
    [documentId],
  );

describe('a shared closure of two answers to one document', () => {
  it('applies them in thread order, with consecutive versions, the second planned from the first', async () => {
    const responses = [await storiesAnswered('a', 'p', 1, 'd1'), await storiesAnswered('b', 'p', 2, 'd1')];
    const d1 = itemWrites(write, ctxOf('d1'), 'postgres');
    // Asked in one turn: one closure (b asked first: the closure runs a, then b).
    const outcomes = await Promise.all([1, 0].map((i) => d1.finish({ itemId: ['a', 'b'][i]!, response: responses[i]!, resumed: false, sent: undefined })));
    expect(outcomes).toEqual(['applied', 'applied']);
    // Not one write per answer after a failed closure: the closure committed both.
    expect(failed).toEqual([]);
    const backlog = await backlogOf('p');
    expect(backlog.version).toBe(3);
    expect(backlog.epics).toEqual(['E1', 'E2']);
    expect((await mutationsOf(backlog.id)).map((m) => [m.work_item_id, m.from_version, m.to_version])).toEqual([
      ['a', 1, 2],
      ['b', 2, 3],
    ]);
  });
});

describe('a shared closure of an answer to a document and an answer whose apply reads it', () => {
  it('the second apply reads what the first wrote in the transaction: one closure commits both', async () => {
    const written = await storiesAnswered('a', 'p', 1, 'd1');
    const reading = await answeredItem('c', 'd1', 'backlog_count', { project_id: 'p' }, { project_id: 'p', doc_type: 'backlog_count' }, {});
    const d1 = itemWrites(write, ctxOf('d1'), 'postgres');
    const outcomes = await Promise.all([
      d1.finish({ itemId: 'a', response: written, resumed: false, sent: undefined }),
      d1.finish({ itemId: 'c', response: reading, resumed: false, sent: undefined }),
    ]);
    expect(outcomes).toEqual(['applied', 'applied']);
    // Its documents' writes are queued for the COMMIT (two answers of one project): the read is served from
    // the closure's own writes (the documents cache), never from the table, which it refuses while a write is queued.
    expect(failed).toEqual([]);
    const count = await reader().get<{ content: string }>("SELECT content FROM documents WHERE project_id = 'p' AND doc_type = 'backlog_count'");
    expect(JSON.parse(count!.content)).toEqual({ epics: 1 });
  });
});

describe("two daemons' closures of answers to two documents of a project, asked in crossing orders", () => {
  it('each takes both heads in id order before its first apply: both commit', async () => {
    // The example operation's release notes, a document per version: doc-x (1.0) sorts before doc-y (2.0).
    for (const [id, version] of [
      ['doc-x', '1.0'],
      ['doc-y', '2.0'],
    ] as const)
      await insertDocument(reader(), { id, project_id: 'p', doc_type: 'release_notes', doc_key: version, version: 1, content: '{}', updated_at: 1 });
    // d1's threads answer 1.0, then 2.0; d2's 2.0, then 1.0 (each closure applies by thread id).
    const asked = [
      { owner: 'd1', id: 'i1', version: '1.0' },
      { owner: 'd1', id: 'i2', version: '2.0' },
      { owner: 'd2', id: 'i3', version: '2.0' },
      { owner: 'd2', id: 'i4', version: '1.0' },
    ];
    const responses = new Map<string, LedgerRow>();
    for (const a of asked) {
      const input = { project_id: 'p', version: a.version, changes: [`change of ${a.id}`] };
      const notes = { headline: a.id, sections: [{ title: 'Fixed', items: [a.id] }] };
      responses.set(a.id, await answeredItem(a.id, a.owner, 'release_notes', input, { project_id: 'p', doc_type: 'release_notes', key: a.version }, notes));
    }
    const closureOf = (owner: string) => {
      const finishes = itemWrites(write, ctxOf(owner), 'postgres');
      return () =>
        Promise.all(
          asked.filter((a) => a.owner === owner).map((a) => finishes.finish({ itemId: a.id, response: responses.get(a.id)!, resumed: false, sent: undefined })),
        );
    };
    // d1's closure waits for doc-x, held. In its answers' order, d2's would then take doc-y and wait for
    // doc-x behind d1, which, once the holder commits, applies to doc-x and waits for doc-y: a deadlock.
    await holderThenTwoWrites(write, reader(), (tx) => lockDocumentHead(tx.sql, 'p', 'release_notes', '1.0'), closureOf('d1'), closureOf('d2'));
    expect(failed).toEqual([]);
    // d1 committed first: each document's version 2 is d1's answer, version 3 d2's.
    expect((await mutationsOf('doc-x')).map((m) => [m.work_item_id, m.from_version, m.to_version])).toEqual([
      ['i1', 1, 2],
      ['i4', 2, 3],
    ]);
    expect((await mutationsOf('doc-y')).map((m) => [m.work_item_id, m.from_version, m.to_version])).toEqual([
      ['i2', 1, 2],
      ['i3', 2, 3],
    ]);
  });
});

describe("two daemons' closures of answers that each create the same two documents, asked in crossing orders", () => {
  it("each takes its targets' keys in key order first (a document not created yet has no head): both commit", async () => {
    const asked = [
      { owner: 'd1', id: 'i1', key: 'A' },
      { owner: 'd1', id: 'i2', key: 'B' },
      { owner: 'd2', id: 'i3', key: 'B' },
      { owner: 'd2', id: 'i4', key: 'A' },
    ];
    const responses = new Map<string, LedgerRow>();
    for (const a of asked)
      responses.set(
        a.id,
        await answeredItem(a.id, a.owner, 'tally', { project_id: 'p', key: a.key, n: a.id }, { project_id: 'p', doc_type: 'tally', key: a.key }, {}),
      );
    const closureOf = (owner: string) => {
      const finishes = itemWrites(write, ctxOf(owner), 'postgres');
      const done = Promise.all(
        asked.filter((a) => a.owner === owner).map((a) => finishes.finish({ itemId: a.id, response: responses.get(a.id)!, resumed: false, sent: undefined })),
      );
      done.catch(() => {});
      return done;
    };
    // A holder inserts document A and rolls back once both closures wait: d1 waits at its first answer (A).
    // Without the keys, d2 then created B and waited at A behind d1, which, once the holder is gone,
    // created A and waited for d2's B: a deadlock.
    const hold = pausedWriteBy(
      write,
      async (tx) => {
        await insertDocument(tx.sql, { id: 'held-a', project_id: 'p', doc_type: 'tally', doc_key: 'A', version: 1, content: '{}', updated_at: 1 });
        return backendPid(tx.sql);
      },
      async () => {
        throw new Error('the holder rolls back');
      },
    );
    const holderPid = await hold.reached;
    const d1 = closureOf('d1');
    await waitUntil(async () => (await writesWaitingFor(reader(), holderPid)) === 1, 'd1 to wait for the holder');
    const d2 = closureOf('d2');
    await waitUntil(async () => (await writesWaitingFor(reader())) === 2, 'd2 to wait too');
    hold.go();
    await hold.done.catch(() => {});
    expect((await Promise.allSettled([d1, d2])).map((r) => r.status)).toEqual(['fulfilled', 'fulfilled']);
    expect(failed).toEqual(['Error: the holder rolls back']);
    const tallies = await reader().all<{ doc_key: string; content: string }>(
      "SELECT doc_key, content FROM documents WHERE doc_type = 'tally' ORDER BY doc_key",
    );
    expect(tallies.map((t) => [t.doc_key, (JSON.parse(t.content) as { n: string[] }).n])).toEqual([
      ['A', ['i1', 'i4']],
      ['B', ['i2', 'i3']],
    ]);
  });
});

describe('a shared closure of answers whose second step fails (its lease was lost)', () => {
  it("rolls back, then applies each answer alone: the first one's answer is kept", async () => {
    const responses = [await storiesAnswered('a', 'p', 1, 'd1'), await storiesAnswered('b', 'p', 2, 'd1')];
    const d1 = itemWrites(write, ctxOf('d1'), 'postgres');
    // b's lease went to another daemon after the closure was asked: its step fails after a's applied.
    await reader().run("UPDATE llm_work_items SET lease_owner = 'd2' WHERE id = 'b'");
    const outcomes = await Promise.allSettled(
      [0, 1].map((i) => d1.finish({ itemId: ['a', 'b'][i]!, response: responses[i]!, resumed: false, sent: undefined })),
    );
    expect(outcomes[0]).toEqual({ status: 'fulfilled', value: 'applied' });
    expect(outcomes[1]?.status).toBe('rejected');
    expect(String((outcomes[1] as PromiseRejectedResult).reason)).toMatch(/work item b is not running under d1/);
    // The closure's failure, then b's alone.
    expect(failed).toHaveLength(2);
    const backlog = await backlogOf('p');
    expect(backlog.version).toBe(2);
    expect(backlog.epics).toEqual(['E1']);
    expect((await mutationsOf(backlog.id)).map((m) => [m.work_item_id, m.from_version, m.to_version])).toEqual([['a', 1, 2]]);
    // The next answer plans from what committed: the rolled-back closure's cached version 2 was forgotten.
    await reader().run("UPDATE llm_work_items SET lease_owner = 'd1' WHERE id = 'b'");
    expect(await d1.finish({ itemId: 'b', response: responses[1]!, resumed: false, sent: undefined })).toBe('applied');
    expect((await backlogOf('p')).epics).toEqual(['E1', 'E2']);
  });
});

describe("an answer's finish and a recovery scan taking over the item's expired scope lock for another item", () => {
  it('both commit: the finish releases the lock row at once, before it locks the orchestration', async () => {
    // Children X and W of orchestration P, one lock scope; X holds it, its row expired (the scan may take it over for W).
    await insertThread(reader(), { ...testThreadRow('P'), role: 'orchestration', status: 'running' });
    const response = await storiesAnswered('X', 'p', 1, 'd1');
    const scope = (await getWorkItem(reader(), 'X'))!.lock_scope;
    await reader().run("UPDATE llm_threads SET parent_thread_id = 't-P' WHERE id = 't-X'");
    await reader().run("UPDATE locks SET expires_at = 1 WHERE owner = 'X'");
    await insertThread(reader(), { ...testThreadRow('W'), status: 'running', parent_thread_id: 't-P' });
    await insertWorkItem(reader(), testWorkItemRow('W', { status: 'running', project_id: 'p', lease_owner: 'd2', lease_expires_at: 1, lock_scope: scope }));
    const d1 = itemWrites(write, ctxOf('d1'), 'postgres');
    // The recovery scan's order (rescuer.ts): the rescued item's scope taken unless busy, then its attempt ends its thread.
    const rescue = () =>
      write(async (tx) => {
        await acquireLockUnlessBusy(tx.sql, { scope, owner: 'W', now: tx.now, expires_at: tx.now + 60_000 });
        await endThread(tx, (await getThread(tx.sql, 't-W'))!, 'failed');
      });
    // The finish waits for P (its close check) with the lock row released; the scan waits for that row, then P.
    // Released only in the COMMIT's query, the scan took the untouched row over and both waited for each other.
    await holderThenTwoWrites(
      write,
      reader(),
      (tx) => lockThread(tx.sql, 't-P'),
      () => d1.finish({ itemId: 'X', response, resumed: false, sent: undefined }),
      rescue,
    );
    expect(failed).toEqual([]);
    expect((await getWorkItem(reader(), 'X'))?.status).toBe('applied');
    expect((await getThread(reader(), 't-W'))?.status).toBe('failed');
    expect((await getLock(reader(), scope))?.owner).toBe('W');
  });
});
