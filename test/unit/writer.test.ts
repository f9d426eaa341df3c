import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { SqliteSql } from '../../src/db/sql.js';
import { Writer } from '../../src/db/writer.js';

describe('group-commit writer', () => {
  let dir: string;
  let db: Db;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-writer-'));
    db = openDatabase(join(dir, 'w.db'));
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE)');
  });
  afterEach(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('commits writes that arrive together in one transaction, answering each after the commit', async () => {
    const commits: number[] = [];
    const w = new Writer(db, { onCommit: (i) => commits.push(i.writes) });
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => w.write((sql) => sql.run('INSERT INTO t (v) VALUES (?)', [`v${i}`]))));
    expect(results).toHaveLength(100);
    expect(commits).toEqual([100]);
    expect(db.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 100 });
  });

  it('rolls back only the write that failed, and publishes only committed events', async () => {
    const published: string[] = [];
    const w = new Writer<string>(db, { publish: (e) => published.push(...e) });
    const ok = w.write(async (sql, emit) => {
      await sql.run("INSERT INTO t (v) VALUES ('a')");
      emit('a');
    });
    const bad = w.write(async (sql, emit) => {
      await sql.run("INSERT INTO t (v) VALUES ('b')");
      emit('b');
      await sql.run("INSERT INTO t (v) VALUES ('a')"); // UNIQUE violation: this write fails as a whole
    });
    await expect(ok).resolves.toBeUndefined();
    await expect(bad).rejects.toThrow(/UNIQUE/);
    expect(db.prepare('SELECT v FROM t ORDER BY v').all()).toEqual([{ v: 'a' }]);
    expect(published).toEqual(['a']);
  });

  it('refuses writes after close, having committed those already queued', async () => {
    const w = new Writer(db);
    const queued = w.write((sql) => sql.run("INSERT INTO t (v) VALUES ('x')"));
    await w.close();
    await expect(queued).resolves.toBeDefined();
    await expect(w.write(() => 1)).rejects.toThrow(/closed/);
  });

  describe('async closures', () => {
    it('run one after another in one transaction, each in its savepoint, answered after the commit', async () => {
      const commits: number[] = [];
      const order: string[] = [];
      const w = new Writer(db, { onCommit: (i) => commits.push(i.writes) });
      const write = (v: string) =>
        w.write(async (sql) => {
          order.push(`start ${v}`);
          await sql.run('INSERT INTO t (v) VALUES (?)', [v]);
          const row = await sql.get<{ n: number }>('SELECT count(*) AS n FROM t');
          order.push(`end ${v}`);
          return row!.n;
        });
      const a = write('a');
      const failing = w.write(async (sql) => {
        await sql.run("INSERT INTO t (v) VALUES ('c')");
        await sql.run("INSERT INTO t (v) VALUES ('a')"); // UNIQUE: this closure alone rolls back
      });
      const results = await Promise.all([a, failing.catch((e: Error) => e.message), write('b')]);
      expect(results[0]).toBe(1);
      expect(results[1]).toMatch(/UNIQUE/);
      expect(results[2]).toBe(2);
      expect(order).toEqual(['start a', 'end a', 'start b', 'end b']);
      expect(commits).toEqual([3]);
      expect(db.prepare('SELECT v FROM t ORDER BY v').all()).toEqual([{ v: 'a' }, { v: 'b' }]);
    });

    it('a reader connection never sees a batch before its commit, nor a write the batch rolls back', async () => {
      db.prepare("INSERT INTO t (v) VALUES ('before')").run();
      const reader = new SqliteSql(openDatabase(join(dir, 'w.db'), { readonly: true }));
      try {
        const w = new Writer(db);
        let inserted!: () => void;
        const insertedNow = new Promise<void>((r) => (inserted = r));
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        const kept = w.write(async (sql) => sql.run("INSERT INTO t (v) VALUES ('kept')"));
        const rolledBack = w.write(async (sql) => {
          await sql.run("INSERT INTO t (v) VALUES ('rolled back')");
          inserted();
          await gate;
          throw new Error('changed its mind');
        });
        await insertedNow;
        // Mid-batch: the writer's own connection shows the uncommitted rows; the reader shows the last commit.
        expect(db.prepare('SELECT v FROM t ORDER BY id').all()).toEqual([{ v: 'before' }, { v: 'kept' }, { v: 'rolled back' }]);
        expect(await reader.all('SELECT v FROM t ORDER BY id')).toEqual([{ v: 'before' }]);
        release();
        await expect(rolledBack).rejects.toThrow('changed its mind');
        await kept;
        expect(await reader.all('SELECT v FROM t ORDER BY id')).toEqual([{ v: 'before' }, { v: 'kept' }]);
      } finally {
        reader.db.close();
      }
    });

    it('refuses a statement a closure left running after it returned (a missing await)', async () => {
      const w = new Writer(db);
      let leaked: Promise<unknown> | undefined;
      await w.write((sql) => {
        leaked = Promise.resolve().then(() => sql.run("INSERT INTO t (v) VALUES ('late')"));
        return 'returned';
      });
      await expect(leaked).rejects.toThrow(/after its write closure ended/);
      expect(db.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 0 });
    });

    it('fails a closure that keeps the batch waiting, and commits the others', async () => {
      const w = new Writer(db, { closureTimeoutMs: 50 });
      const stuck = w.write(async (sql) => {
        await sql.run("INSERT INTO t (v) VALUES ('stuck')");
        await new Promise((r) => setTimeout(r, 1000));
      });
      const next = w.write(async (sql) => sql.run("INSERT INTO t (v) VALUES ('next')"));
      await expect(stuck).rejects.toThrow(/did not settle within 50 ms/);
      await next;
      expect(db.prepare('SELECT v FROM t').all()).toEqual([{ v: 'next' }]);
    });
  });
});
