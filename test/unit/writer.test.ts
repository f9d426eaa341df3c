import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
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
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => w.write((d) => d.prepare('INSERT INTO t (v) VALUES (?)').run(`v${i}`).lastInsertRowid)),
    );
    expect(results).toHaveLength(100);
    expect(commits).toEqual([100]);
    expect(db.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 100 });
  });

  it('rolls back only the write that failed, and publishes only committed events', async () => {
    const published: string[] = [];
    const w = new Writer<string>(db, { publish: (e) => published.push(...e) });
    const ok = w.write((d, emit) => {
      d.prepare("INSERT INTO t (v) VALUES ('a')").run();
      emit('a');
    });
    const bad = w.write((d, emit) => {
      d.prepare("INSERT INTO t (v) VALUES ('b')").run();
      emit('b');
      d.prepare("INSERT INTO t (v) VALUES ('a')").run(); // UNIQUE violation: this write fails as a whole
    });
    await expect(ok).resolves.toBeUndefined();
    await expect(bad).rejects.toThrow(/UNIQUE/);
    expect(db.prepare('SELECT v FROM t ORDER BY v').all()).toEqual([{ v: 'a' }]);
    expect(published).toEqual(['a']);
  });

  it('refuses writes after close, having committed those already queued', async () => {
    const w = new Writer(db);
    const queued = w.write((d) => d.prepare("INSERT INTO t (v) VALUES ('x')").run());
    await w.close();
    await expect(queued).resolves.toBeDefined();
    await expect(w.write(() => 1)).rejects.toThrow(/closed/);
  });
});
