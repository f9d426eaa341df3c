/**
 * The story backlog is stored one row per epic: regenerating one epic of a large backlog writes that
 * epic's row and the document's version, nothing else — and every reader (`doc`, `backlog`, the HTTP
 * API's view through the CLI) still gets one whole, versioned document in the architecture's order.
 * Real daemon, real simulator, on the run's backend (SQLite or Postgres).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Harness, project, waitForExit, type CommandJson } from '../helpers/harness.js';

const EPICS = 200;

interface Part {
  part_key: string;
  ord: number;
  content: string;
  /** The row's physical identity (SQLite rowid, Postgres ctid): a part deleted and inserted again gets a new one. */
  row_id: string;
}

/** Parts another write changed or wrote again (same content and place, but a new row), by key. */
const rewritten = (before: Map<string, Part>, after: Map<string, Part>) =>
  [...after.values()]
    .filter((p) => {
      const b = before.get(p.part_key);
      return b?.content !== p.content || b.ord !== p.ord || String(b.row_id) !== String(p.row_id);
    })
    .map((p) => p.part_key);

describe(`a backlog of ${EPICS} epics stored in parts`, () => {
  let h: Harness;
  let docId: string;
  const parts = async () =>
    new Map(
      (
        await h.query<Part>(`SELECT part_key, ord, content, ${h.database ? 'ctid::text' : 'rowid'} AS row_id FROM document_parts WHERE document_id = ?`, [
          docId,
        ])
      ).map((p) => [p.part_key, p]),
    );
  const version = async () => (await h.queryOne<{ version: number }>('SELECT version FROM documents WHERE id = ?', [docId]))!.version;

  beforeAll(async () => {
    h = await Harness.start();
    await h.importProject(project('big', EPICS));
    const all = await h.json<CommandJson>(['generate-all', '--project', 'big']);
    // Followed longer than waitForEnd's 45 s: on a loaded machine with Postgres, the backlog takes a while.
    const followed = await h.cli(['thread', all.thread_id, '--follow', '--json'], { timeoutMs: 170_000 });
    expect(followed.code, followed.stderr).toBe(0);
    expect(JSON.parse(followed.stdout.trim().split('\n').at(-1)!).status).toBe('complete');
    docId = (await h.queryOne<{ id: string }>("SELECT id FROM documents WHERE project_id = 'big' AND doc_type = 'story_backlog'"))!.id;
  }, 180_000);
  afterAll(() => h.cleanup());

  it('keeps one row per epic, and shows the backlog whole, in the architecture order, at its version', async () => {
    expect((await parts()).size).toBe(EPICS);
    const doc = await h.json(['doc', 'big', 'story_backlog']);
    expect(doc.version).toBe(EPICS + 1); // created empty at import, then one version per epic
    expect(doc.content.epics.map((e: { epic_id: string }) => e.epic_id)).toEqual(project('big', EPICS).epics.map((e) => e.id));
    expect(doc.content.epics.every((e: { stories: unknown[] }) => e.stories.length > 0)).toBe(true);
    const backlog = await h.json(['backlog', 'big']);
    expect(backlog.epics).toHaveLength(EPICS);
  });

  it('regenerating one epic writes that epic and the version only', async () => {
    const before = await parts();
    const beforeDoc = await h.json(['doc', 'big', 'story_backlog']);
    const from = await version();
    const run = await h.json<CommandJson>(['generate-epic', '--project', 'big', '--epic', 'E100', '--force']);
    expect((await h.waitForEnd(run.thread_id)).status).toBe('complete');

    expect(await version()).toBe(from + 1);
    const after = await parts();
    expect(rewritten(before, after)).toEqual(['E100']);
    expect(JSON.parse(after.get('E100')!.content)).toMatchObject({ epic_id: 'E100', thread_id: run.thread_id });

    const doc = await h.json(['doc', 'big', 'story_backlog']);
    expect(doc.version).toBe(from + 1);
    const changed = doc.content.epics.findIndex((e: { epic_id: string }) => e.epic_id === 'E100');
    expect(changed).toBe(99);
    expect({ ...doc.content, epics: doc.content.epics.filter((_: unknown, i: number) => i !== changed) }).toEqual({
      ...beforeDoc.content,
      epics: beforeDoc.content.epics.filter((_: unknown, i: number) => i !== changed),
    });
    const mutation = await h.queryOne('SELECT from_version, to_version FROM mutations WHERE thread_id = ?', [run.thread_id]);
    expect(mutation).toEqual({ from_version: from, to_version: from + 1 });
    const ledger = await h.json<any[]>(['ledger', run.thread_id]);
    expect(ledger.find((e) => e.entry_type === 'mutation_report')?.payload).toMatchObject({ from_version: from, to_version: from + 1 });
  });

  it('a new epic in the middle of the architecture gets a row of its own between its neighbours', async () => {
    const p = project('big', EPICS);
    p.epics.splice(10, 0, { id: 'NEW', title: 'A new epic', description: 'Added after the backlog was generated.' });
    await h.importProject(p);
    const before = await parts();
    const run = await h.json<CommandJson>(['generate-epic', '--project', 'big', '--epic', 'NEW']);
    expect((await h.waitForEnd(run.thread_id)).status).toBe('complete');
    const after = await parts();
    expect(after.size).toBe(EPICS + 1);
    expect(rewritten(before, after)).toEqual(['NEW']);
    const ord = after.get('NEW')!.ord;
    expect(ord > after.get('E10')!.ord && ord < after.get('E11')!.ord).toBe(true);
    const doc = await h.json(['doc', 'big', 'story_backlog']);
    expect(doc.content.epics.map((e: { epic_id: string }) => e.epic_id)).toEqual(p.epics.map((e) => e.id));
  });

  it('a daemon killed inside the mutation leaves the backlog as it was; after restart the epic is applied once', async () => {
    const before = await parts();
    const from = await version();
    await h.stopDaemon();
    const pid = await h.startDaemon({ COMBINE_CRASH_AT: 'in_mutation' });
    const run = await h.json<CommandJson>(['generate-epic', '--project', 'big', '--epic', 'E150', '--force', '--no-autostart']);
    await waitForExit(pid);
    expect(h.logText()).toContain('"point":"in_mutation"');
    expect(await version()).toBe(from);
    expect(await parts()).toEqual(before);

    await h.startDaemon();
    expect((await h.waitForEnd(run.thread_id)).status).toBe('complete');
    expect(await version()).toBe(from + 1);
    const after = await parts();
    expect(rewritten(before, after)).toEqual(['E150']);
    expect(await h.query('SELECT to_version FROM mutations WHERE thread_id = ?', [run.thread_id])).toEqual([{ to_version: from + 1 }]);
    const doc = await h.json(['doc', 'big', 'story_backlog']);
    expect(doc.version).toBe(from + 1);
    expect(doc.content.epics).toHaveLength(EPICS + 1);
    expect(await h.json(['ledger', 'verify'])).toMatchObject({ ok: true });
  });

  it('a backlog stored whole (as every home before this version stores it) goes into parts at its next write', async () => {
    const before = await h.json(['doc', 'big', 'story_backlog']);
    await h.stopDaemon();
    await h.edit(async (sql) => {
      await sql.run('DELETE FROM document_parts WHERE document_id = ?', [docId]);
      await sql.run('UPDATE documents SET content = ?, parts_field = NULL, parts_key = NULL, parts_chars = 0 WHERE id = ?', [
        JSON.stringify(before.content),
        docId,
      ]);
    });
    await h.startDaemon();
    expect(await h.json(['doc', 'big', 'story_backlog'])).toEqual(before);
    const run = await h.json<CommandJson>(['generate-epic', '--project', 'big', '--epic', 'E5', '--force']);
    expect((await h.waitForEnd(run.thread_id)).status).toBe('complete');
    expect((await parts()).size).toBe(EPICS + 1);
    const doc = await h.json(['doc', 'big', 'story_backlog']);
    expect(doc.version).toBe(before.version + 1);
    const others = (c: { epics: { epic_id: string }[] }) => c.epics.filter((e) => e.epic_id !== 'E5');
    expect(others(doc.content)).toEqual(others(before.content));
    expect(doc.content.epics[4]).toMatchObject({ epic_id: 'E5', thread_id: run.thread_id });
  });

  it('a new epic before the first one gets a row of its own before it, placed from it by its own insert', async () => {
    const p = project('big', EPICS);
    p.epics.splice(10, 0, { id: 'NEW', title: 'A new epic', description: 'Added after the backlog was generated.' });
    const first = p.epics[0]!.id;
    p.epics.unshift({ id: 'FIRST', title: 'A first epic', description: 'Added before every other one.' });
    await h.importProject(p);
    const before = await parts();
    const run = await h.json<CommandJson>(['generate-epic', '--project', 'big', '--epic', 'FIRST']);
    expect((await h.waitForEnd(run.thread_id)).status).toBe('complete');
    const after = await parts();
    expect(rewritten(before, after)).toEqual(['FIRST']);
    expect(after.get('FIRST')!.ord).toBeLessThan(after.get(first)!.ord);
    const doc = await h.json(['doc', 'big', 'story_backlog']);
    expect(doc.content.epics.map((e: { epic_id: string }) => e.epic_id)).toEqual(p.epics.map((e) => e.id));
  });
});
