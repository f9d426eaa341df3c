/**
 * A shared write closure on Postgres whose step meets a stale guard (engine/shared-writes.ts): the writer
 * runs a closure that failed on a stale guard again, up to its race attempts (another transaction may
 * have committed first). A shared closure is not run again as a whole: its stale step (a lost lease) would
 * only fail again, after the other steps had run again each time, holding their rows. Its steps run again
 * alone at once, and only the stale one is retried and fails. Real Postgres, the real PgWriter.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { StaleStateError } from '../../src/core/errors.js';
import { eachStep, SharedWrites } from '../../src/daemon/engine/shared-writes.js';
import type { Tx } from '../../src/daemon/engine/tx.js';
import { openRaceDatabase, type RaceDatabase } from '../helpers/pg-race.js';

let db: RaceDatabase;
beforeEach(async () => {
  db = await openRaceDatabase();
  await db.reader.run('CREATE TABLE started (id text PRIMARY KEY)');
});
afterEach(() => db?.drop());

it('a stale step fails alone without the shared closure being run again as a whole', async () => {
  const runs: string[] = [];
  const shared = new SharedWrites(
    db.write,
    eachStep(async (tx: Tx, id: string) => {
      runs.push(id);
      await tx.sql.run('INSERT INTO started (id) VALUES (?)', [id]);
      if (id === 'lost') throw new StaleStateError(`work item ${id} is not claimed under me`);
      return `started ${id}`;
    }),
    undefined,
    { inFlight: 1 },
  );
  // Asked in one turn: one closure of three steps.
  const results = await Promise.allSettled(['a', 'lost', 'c'].map((id) => shared.run(id)));

  expect(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).name))).toEqual(['started a', 'StaleStateError', 'started c']);
  const times = (id: string) => runs.filter((r) => r === id).length;
  // The shared closure ran once (a, lost), then each step alone: a and c once, lost through the writer's 3 race attempts.
  // Run again as a whole first, it was a 4 times and lost 6.
  expect({ a: times('a'), lost: times('lost'), c: times('c') }).toEqual({ a: 2, lost: 4, c: 1 });
  expect(await db.reader.all<{ id: string }>('SELECT id FROM started ORDER BY id')).toEqual([{ id: 'a' }, { id: 'c' }]);
});
