/**
 * Several answers applied in one Postgres transaction (engine/shared-writes.ts; issue 18 target 9): a
 * shared closure of answers locks its items, then its target documents' heads in id order, then applies
 * the answers by thread. Pinned here, on real Postgres with the real shared closures (`itemWrites`), the
 * real writer (a rollback forgets the documents cache, as the daemon's does) and the built-in
 * `story_generate_epic`, whose backlog is stored in parts:
 * - two answers to one document in one closure apply in order, with consecutive versions, the second
 *   planned from the first (its parts and its version written at once, not at COMMIT);
 * - two daemons' closures over two documents, each asked in an order that takes them crossing, both
 *   commit (the heads taken in the answers' order deadlocked); gated on `pg_stat_activity`, no timing;
 * - a step of a closure that fails (its lease lost) loses none of the others' answers: the closure rolls
 *   back and each answer is applied again alone.
 * Each writer makes one attempt, so a deadlock is a failed write, and every failed write is counted.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { neverCrash } from '../../src/core/crash.js';
import { writeTx } from '../../src/core/tx.js';
import { forgetDocuments } from '../../src/db/document-cache.js';
import { readWholeDocument } from '../../src/db/document-parts.js';
import { acquireLock } from '../../src/db/locks.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { lockDocumentHead } from '../../src/db/projects.js';
import type { LedgerRow } from '../../src/db/schema.js';
import { insertThread } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { recordResponse } from '../../src/daemon/engine/completer.js';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import { itemWrites } from '../../src/daemon/engine/item-pipeline.js';
import type { EngineContext } from '../../src/daemon/engine/leased.js';
import { importProject } from '../../src/daemon/services/commands.js';
import type { Tx, Write } from '../../src/daemon/engine/tx.js';
import type { ModelRoute } from '../../src/daemon/routing/router.js';
import { simulatedStories } from '../../src/operations/builtin/story_generate_epic/simulate.js';
import { project, waitUntil } from '../helpers/harness.js';
import { builtinRegistry } from '../helpers/operations.js';
import { backendPid, NO_HOOKS, openRaceDatabase, pausedWriteBy, type RaceDatabase, writesWaitingFor } from '../helpers/pg-race.js';
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

const operations = builtinRegistry();
const ctxOf = (owner: string): EngineContext => ({
  owner,
  routeOf: (logical) => ({ logical, model: 'test-model', endpoint: { label: 'test' } }) as unknown as ModelRoute,
  operations,
  cache: false,
  random: () => 0.5,
  priceOf: () => undefined,
  crashAt: neverCrash,
});

/** The simulator's answer for epic `E<n>` of `project(…, 4)`. */
const answerTo = (epic: number) => ({
  kind: 'response' as const,
  latencyMs: 5,
  httpStatus: 200,
  requestId: null,
  rateLimit: {},
  bodyText: JSON.stringify({
    choices: [{ message: { content: JSON.stringify({ stories: simulatedStories(`E${epic}`, `Epic number ${epic}`) }) } }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  }),
});

/** Item `id` of thread `t-<id>`, running under `owner`, answering epic `E<epic>` of project `projectId`: its response recorded. */
async function answeredItem(id: string, projectId: string, epic: number, owner: string): Promise<LedgerRow> {
  const input = JSON.stringify({ project_id: projectId, epic_id: `E${epic}` });
  const target_ref = JSON.stringify({ project_id: projectId, doc_type: 'story_backlog', epic_id: `E${epic}` });
  await insertThread(reader(), { ...testThreadRow(id), kind: 'story_generate_epic', status: 'running', input, target_ref });
  const item = testWorkItemRow(id, { status: 'running', project_id: projectId, lease_owner: owner, lease_expires_at: Date.now() + 60_000 });
  await insertWorkItem(reader(), item);
  await acquireLock(reader(), { scope: item.lock_scope, owner: id, now: 1, expires_at: null });
  return (await write((tx) => recordResponse(tx, ctxOf(owner), id, answerTo(epic)))).row;
}

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
    const responses = [await answeredItem('a', 'p', 1, 'd1'), await answeredItem('b', 'p', 2, 'd1')];
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

describe("two daemons' closures of answers to two documents, asked in crossing orders", () => {
  it('each takes both heads in id order before its first apply: both commit', async () => {
    const [p, q] = [await backlogOf('p'), await backlogOf('q')];
    // x: the document whose id sorts first. d1's threads answer x, then y; d2's y, then x.
    const [x, y] = p.id < q.id ? ['p', 'q'] : ['q', 'p'];
    const asked = [
      { owner: 'd1', id: 'i1', projectId: x, epic: 1 },
      { owner: 'd1', id: 'i2', projectId: y, epic: 1 },
      { owner: 'd2', id: 'i3', projectId: y, epic: 2 },
      { owner: 'd2', id: 'i4', projectId: x, epic: 2 },
    ];
    const responses = new Map<string, LedgerRow>();
    for (const a of asked) responses.set(a.id, await answeredItem(a.id, a.projectId, a.epic, a.owner));
    const closureOf = (owner: string) => {
      const finishes = itemWrites(write, ctxOf(owner), 'postgres');
      return () =>
        Promise.all(
          asked.filter((a) => a.owner === owner).map((a) => finishes.finish({ itemId: a.id, response: responses.get(a.id)!, resumed: false, sent: undefined })),
        );
    };
    const hold = pausedWriteBy(
      write,
      async (tx: Tx) => {
        await lockDocumentHead(tx.sql, x, 'story_backlog');
        return backendPid(tx.sql);
      },
      async () => undefined,
    );
    const holderPid = await hold.reached;
    // d1's closure waits for x. In its answers' order, d2's would then take y and wait for x behind d1,
    // which, once the holder commits, applies to x and waits for y: a deadlock.
    const first = closureOf('d1')();
    first.catch(() => {});
    await waitUntil(async () => (await writesWaitingFor(reader(), holderPid)) === 1, "d1's closure to wait for the holder");
    const second = closureOf('d2')();
    second.catch(() => {});
    await waitUntil(async () => (await writesWaitingFor(reader())) === 2, "d2's closure to wait too");
    hold.go();
    await hold.done;
    for (const r of await Promise.allSettled([first, second])) if (r.status === 'rejected') throw r.reason;
    expect(failed).toEqual([]);
    for (const projectId of ['p', 'q']) {
      const backlog = await backlogOf(projectId);
      expect(backlog.version).toBe(3);
      expect(backlog.epics).toEqual(['E1', 'E2']);
    }
  });
});

describe('a shared closure of answers whose second step fails (its lease was lost)', () => {
  it("rolls back, then applies each answer alone: the first one's answer is kept", async () => {
    const responses = [await answeredItem('a', 'p', 1, 'd1'), await answeredItem('b', 'p', 2, 'd1')];
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
