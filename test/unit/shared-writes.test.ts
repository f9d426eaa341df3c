/**
 * Items' steps (a start slice's starts) in one write closure (engine/shared-writes.ts), on the real SQLite group-commit
 * writer: the starts asked in one turn share a closure; one that throws fails alone — every other one is
 * committed once, the failed one's changes are not.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { Writer } from '../../src/db/writer.js';
import { writeTx } from '../../src/core/tx.js';
import { InfraError, StaleStateError } from '../../src/core/errors.js';
import { eachStep, SharedWrites } from '../../src/daemon/engine/shared-writes.js';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import type { EngineHooks, Tx } from '../../src/daemon/engine/tx.js';

describe('starts sharing one write closure', () => {
  let dir: string;
  let db: Db;
  let writes: number[];
  let write: <T>(fn: (tx: Tx) => Promise<T>) => Promise<T>;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-shared-writes-'));
    db = openDatabase(join(dir, 's.db'));
    db.exec('CREATE TABLE started (id TEXT PRIMARY KEY, closure INTEGER NOT NULL)');
    writes = [];
    const writer = new Writer<EngineEvent>(db, { onCommit: (c) => writes.push(c.writes) });
    write = writeTx(writer, { now: () => 1 }, {} as EngineHooks);
  });
  afterEach(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Records the start with the closure it ran in (each closure's handle is its own); throws for ids starting with "lost". */
  function recorder() {
    const closures: object[] = [];
    const runs: string[] = [];
    const one = async (tx: Tx, id: string) => {
      if (!closures.includes(tx.sql)) closures.push(tx.sql);
      runs.push(id);
      await tx.sql.run('INSERT INTO started (id, closure) VALUES (?, ?)', [id, closures.indexOf(tx.sql)]);
      if (id.startsWith('lost')) throw new StaleStateError(`work item ${id} is not claimed under me`);
      return `started ${id}`;
    };
    return { one, closures, runs };
  }

  const rows = () => db.prepare('SELECT id, closure FROM started ORDER BY id').all() as { id: string; closure: number }[];

  it('the starts asked in one turn run in shared closures of at most 64, each start getting its own result', async () => {
    const r = recorder();
    const shared = new SharedWrites(write, eachStep(r.one));
    const ids = Array.from({ length: 100 }, (_, i) => `item${String(i).padStart(3, '0')}`);
    const results = await Promise.all(ids.map((id) => shared.run(id)));
    expect(results).toEqual(ids.map((id) => `started ${id}`));
    expect(r.closures).toHaveLength(2);
    expect(writes).toEqual([2]); // both closures in one transaction
    expect(rows()).toEqual(ids.map((id, i) => ({ id, closure: i < 64 ? 0 : 1 })));
  });

  it('one start that throws fails alone: the others commit once, its changes roll back', async () => {
    const r = recorder();
    const shared = new SharedWrites(write, eachStep(r.one));
    const outcomes = await Promise.allSettled(['a', 'b', 'lost-c', 'd'].map((id) => shared.run(id)));
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[2] as PromiseRejectedResult).reason).toBeInstanceOf(StaleStateError);
    expect(outcomes.filter((o) => o.status === 'fulfilled').map((o) => o.value)).toEqual(['started a', 'started b', 'started d']);
    // The shared closure rolled back; then each ran alone, in a closure of its own.
    expect(rows().map((x) => x.id)).toEqual(['a', 'b', 'd']);
    expect(new Set(rows().map((x) => x.closure)).size).toBe(3);
    expect(r.runs.filter((id) => id === 'a')).toHaveLength(2);
  });

  it('a shared closure that fails with an InfraError is not run again step by step: every caller gets the error', async () => {
    const r = recorder();
    const shared = new SharedWrites(
      write,
      eachStep(async (tx, id: string) => {
        const started = await r.one(tx, id);
        // What the writer says when storage failed or a COMMIT's outcome is unknown: a step run again
        // alone could repeat one that did commit.
        if (id === 'b') throw new InfraError(new Error('connection lost during COMMIT'));
        return started;
      }),
    );
    const outcomes = await Promise.allSettled(['a', 'b', 'c'].map((id) => shared.run(id)));
    expect(outcomes.map((o) => (o.status === 'rejected' ? (o.reason as Error).name : o.value))).toEqual(['InfraError', 'InfraError', 'InfraError']);
    expect(r.runs).toEqual(['a', 'b']);
    expect(rows()).toEqual([]);
  });

  it('a start asked while the closure runs goes to the next closure', async () => {
    const r = recorder();
    let shared: SharedWrites<string, string>;
    let late: Promise<string> | undefined;
    shared = new SharedWrites(
      write,
      eachStep(async (tx, id: string) => {
        if (id === 'first') late = shared.run('late');
        return r.one(tx, id);
      }),
    );
    expect(await shared.run('first')).toBe('started first');
    expect(await late).toBe('started late');
    expect(rows()).toEqual([
      { id: 'first', closure: 0 },
      { id: 'late', closure: 1 },
    ]);
  });
  it('with one closure in flight (Postgres), the steps asked while it runs wait together for the next, run in `orderBy` order', async () => {
    const r = recorder();
    let handed = 0;
    const counted: typeof write = (fn) => {
      handed++;
      return write(fn);
    };
    let shared: SharedWrites<string, string, Map<string, string>>;
    const later: Promise<string>[] = [];
    let handedWhileFirstRan = -1;
    shared = new SharedWrites(
      counted,
      eachStep(async (tx, id: string) => {
        if (id === 'first') {
          // Asked in later turns while this closure runs: none is handed to the writer before it commits.
          for (const x of ['c', 'a', 'b']) {
            later.push(shared.run(x));
            await new Promise((go) => setImmediate(go));
          }
          handedWhileFirstRan = handed;
        }
        return r.one(tx, id);
      }),
      async (_tx, ids) => new Map(ids.map((id) => [id, `key ${id}`])),
      { inFlight: 1, orderBy: (keys, id) => keys.get(id)! },
    );
    expect(await shared.run('first')).toBe('started first');
    expect(await Promise.all(later)).toEqual(['started c', 'started a', 'started b']);
    expect([handedWhileFirstRan, handed]).toEqual([1, 2]);
    // The second closure ran its steps by key, not in the order asked.
    expect(r.runs).toEqual(['first', 'a', 'b', 'c']);
  });

  it('work shared by a closure (`before`) runs once before its steps, each step getting it; a step alone gets none', async () => {
    const r = recorder();
    const befores: string[][] = [];
    const seen: (string | undefined)[] = [];
    const shared = new SharedWrites(
      write,
      eachStep(async (tx, id: string, ahead: Map<string, string> | undefined) => {
        seen.push(ahead?.get(id));
        return r.one(tx, id);
      }),
      async (tx, ids) => {
        befores.push([...ids]);
        // Run inside the closure's transaction, before any step.
        expect(rows().filter((x) => ids.includes(x.id))).toEqual([]);
        await tx.sql.get('SELECT 1');
        return new Map(ids.map((id) => [id, `read ${id}`]));
      },
    );
    await Promise.all(['a', 'b', 'c'].map((id) => shared.run(id)));
    expect(befores).toEqual([['a', 'b', 'c']]);
    expect(seen).toEqual(['read a', 'read b', 'read c']);
    // Alone (the only step asked, or run again alone after a shared closure failed): no shared work.
    await shared.run('d');
    expect(befores).toHaveLength(1);
    expect(seen.at(-1)).toBeUndefined();
    await Promise.allSettled(['e', 'lost-f'].map((id) => shared.run(id)));
    expect(befores.at(-1)).toEqual(['e', 'lost-f']);
    expect(seen.slice(-4)).toEqual(['read e', 'read lost-f', undefined, undefined]);
  });
});
