/**
 * db/new-children.ts on Postgres: the multi-row INSERTs of an orchestration's children write what the
 * single-row inserts write. Their column lists are checked against the tables (a column missing from
 * them would be written as its default), and a lone UTF-16 surrogate in a child's text is stored as the
 * single-row insert stores it (U+FFFD), not refused by the json parser (which failed the whole
 * orchestration). Real Postgres.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { ITEM_COLUMN_TYPES, insertThreadsUnlessActive, insertWorkItems, THREAD_COLUMN_TYPES } from '../../src/db/new-children.js';
import { insertThreadUnlessActive } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { openRaceDatabase, type RaceDatabase } from '../helpers/pg-race.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let db: RaceDatabase;
beforeEach(async () => {
  db = await openRaceDatabase();
});
afterEach(async () => {
  await db?.drop();
});

it('the recordsets’ columns are the tables’ columns, with their types', async () => {
  const columnsOf = async (table: string) =>
    Object.fromEntries(
      (
        await db.reader.all<{ column_name: string; data_type: string }>(
          'SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?',
          [table],
        )
      ).map((c) => [c.column_name, c.data_type]),
    );
  expect(await columnsOf('llm_threads')).toEqual(THREAD_COLUMN_TYPES);
  expect(await columnsOf('llm_work_items')).toEqual(ITEM_COLUMN_TYPES);
});

it('a lone surrogate in a child’s text: stored as U+FFFD, as the single-row inserts store it', async () => {
  const text = 'x\ud800y\udfff';
  expect(await insertThreadUnlessActive(db.reader, { ...testThreadRow('one'), input: text })).toBe(true);
  await insertWorkItem(db.reader, testWorkItemRow('one', { error_message: text }));
  const inserted = await insertThreadsUnlessActive(db.reader, [{ ...testThreadRow('two'), input: text }]);
  expect([...inserted]).toEqual(['t-two']);
  await insertWorkItems(db.reader, [testWorkItemRow('two', { error_message: text })]);
  const threads = await db.reader.all<{ id: string; input: string }>('SELECT id, input FROM llm_threads ORDER BY id');
  const items = await db.reader.all<{ id: string; error_message: string }>('SELECT id, error_message FROM llm_work_items ORDER BY id');
  expect(threads).toEqual([
    { id: 't-one', input: 'x\ufffdy\ufffd' },
    { id: 't-two', input: 'x\ufffdy\ufffd' },
  ]);
  expect(items).toEqual([
    { id: 'one', error_message: 'x\ufffdy\ufffd' },
    { id: 'two', error_message: 'x\ufffdy\ufffd' },
  ]);
});
