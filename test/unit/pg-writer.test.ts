/**
 * The Postgres writer (src/db/pg/writer.ts) on the run's real Postgres keeps the SQLite writer's
 * contract: a write is visible to others only after it resolved, a failed one never, its events are
 * published after its commit and never for a rollback, a closure's handle dies with it, and a
 * transaction Postgres aborts for a conflict (or whose connection dies before COMMIT) runs again.
 */
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { InfraError, RefusedValueError, StaleStateError } from '../../src/core/errors.js';
import type { Sql } from '../../src/core/sql.js';
import { openPostgresPool } from '../../src/db/pg/connection.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { expectOneChange } from '../../src/db/statements.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';

/** A promise and its resolver: a closure waits on it mid-transaction while the test looks from outside. */
function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

describe('Postgres writer', () => {
  let database: TestDatabase;
  let pool: pg.Pool;
  let reader: Sql;

  beforeAll(async () => {
    database = await createTestDatabase();
    // As the daemon's pools (daemon/storage.ts): a pooled connection the server ends (the tests below
    // terminate backends on purpose) is dropped by the pool; without a listener its 'error' is unhandled.
    pool = openPostgresPool(database.url, { max: 6 }).on('error', () => {});
    reader = new PgSql(pool);
    await reader.run('CREATE TABLE t (id SERIAL PRIMARY KEY, v TEXT UNIQUE NOT NULL)');
  });
  beforeEach(async () => {
    await reader.run('TRUNCATE t');
  });
  afterAll(async () => {
    await pool.end();
    await database.drop();
  });

  const values = async () => (await reader.all<{ v: string }>('SELECT v FROM t ORDER BY v')).map((r) => r.v);

  it('shows a write to others only once it resolved, and never a write that failed; each fails alone', async () => {
    const w = new PgWriter<string>(pool);
    const inside = gate();
    const resume = gate();
    const kept = w.write(async (sql, emit) => {
      await sql.run("INSERT INTO t (v) VALUES ('kept')");
      emit('kept');
      inside.open();
      await resume.opened;
    });
    const failing = w.write(async (sql, emit) => {
      await sql.run("INSERT INTO t (v) VALUES ('rolled back')");
      emit('rolled back');
      await inside.opened;
      throw new Error('the closure failed after its insert');
    });
    // Its rejection can come while the test awaits other things: take it now so it is never unhandled.
    const failure = failing.then(
      () => 'resolved',
      (error: Error) => error.message,
    );
    await inside.opened;
    expect(await values()).toEqual([]); // both transactions are open: nothing is visible yet
    expect(await failure).toMatch(/closure failed/);
    expect(await values()).toEqual([]);
    resume.open();
    await kept;
    expect(await values()).toEqual(['kept']);
  });

  it('publishes the events of a committed write after its commit, and none of a rolled-back one', async () => {
    const published: { events: string[]; visible: string[] }[] = [];
    let check: Promise<void> = Promise.resolve();
    const w = new PgWriter<string>(pool, {
      publish: (events) => {
        check = values().then((visible) => void published.push({ events, visible }));
      },
    });
    await w.write(async (sql, emit) => {
      await sql.run("INSERT INTO t (v) VALUES ('a')");
      emit('a1');
      emit('a2');
    });
    await expect(
      w.write(async (sql, emit) => {
        emit('b');
        await sql.run("INSERT INTO t (v) VALUES ('a')"); // unique violation: the write fails as a whole
      }),
    ).rejects.toThrow(/unique/);
    await check;
    expect(published).toEqual([{ events: ['a1', 'a2'], visible: ['a'] }]);
  });

  it('refuses a statement made after the closure settled (a missing await)', async () => {
    const w = new PgWriter(pool);
    let leaked: Sql | undefined;
    await w.write(async (sql) => {
      leaked = sql;
      await sql.run("INSERT INTO t (v) VALUES ('x')");
    });
    await expect(leaked!.run("INSERT INTO t (v) VALUES ('late')")).rejects.toThrow(/after its write closure ended/);
    expect(await values()).toEqual(['x']);
  });

  it('refuses a transaction in which a statement failed, even if the closure caught the error', async () => {
    const w = new PgWriter(pool);
    await reader.run("INSERT INTO t (v) VALUES ('dup')");
    const write = w.write(async (sql) => {
      await sql.run("INSERT INTO t (v) VALUES ('first')");
      await sql.run("INSERT INTO t (v) VALUES ('dup')").catch(() => undefined);
    });
    await expect(write).rejects.toThrow();
    expect(await values()).toEqual(['dup']);
  });

  it('runs a closure again when Postgres aborts its transaction for a serialization failure', async () => {
    const published: string[] = [];
    const counted = new PgWriter<string>(pool, { conflictDelayMs: () => 0, publish: (e) => published.push(...e) });
    let runs = 0;
    const value = await counted.write(async (sql, emit) => {
      runs++;
      emit(`run ${runs}`);
      await sql.run('INSERT INTO t (v) VALUES (@v)', { v: `run ${runs}` });
      if (runs === 1) await sql.run("DO $$ BEGIN RAISE EXCEPTION 'could not serialize' USING ERRCODE = '40001'; END $$");
      return runs;
    });
    expect(value).toBe(2);
    expect(await values()).toEqual(['run 2']);
    expect(published).toEqual(['run 2']);
    // Bounded: a closure that always conflicts fails with InfraError after `conflictAttempts` runs.
    let attempts = 0;
    const always = new PgWriter(pool, { conflictDelayMs: () => 0, conflictAttempts: 3 });
    const failed = always.write(async (sql) => {
      attempts++;
      await sql.run("DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = '40P01'; END $$");
    });
    await expect(failed).rejects.toBeInstanceOf(InfraError);
    expect(attempts).toBe(3);
  });

  it('resolves a real deadlock between two writes: one is aborted, runs again, and both commit', async () => {
    await reader.run("INSERT INTO t (v) VALUES ('left'), ('right')");
    const w = new PgWriter(pool, { conflictDelayMs: () => 0 });
    const bothLocked = { left: gate(), right: gate() };
    let runs = 0;
    const lockInOrder = (first: 'left' | 'right', second: 'left' | 'right') =>
      w.write(async (sql) => {
        runs++;
        // Only the left-first side runs the deadlock check in time: when both checks fire together, Postgres can
        // abort both (each finds the cycle before the other's abort releases it), which is a fourth run, not a bug.
        if (first === 'right') await sql.run("SET LOCAL deadlock_timeout = '60s'");
        await sql.run('UPDATE t SET v = v WHERE v = @v', { v: first });
        bothLocked[first].open();
        await bothLocked[second].opened;
        await sql.run('UPDATE t SET v = v WHERE v = @v', { v: second });
      });
    await Promise.all([lockInOrder('left', 'right'), lockInOrder('right', 'left')]);
    expect(runs).toBe(3);
    expect((await values()).sort()).toEqual(['left', 'right']);
  });

  it('runs a write again when another transaction took its unique key first: the new run sees it and deduplicates', async () => {
    const w = new PgWriter(pool);
    const bothChecked = gate();
    let checked = 0;
    const insertIfAbsent = () =>
      w.write(async (sql) => {
        if (await sql.get("SELECT v FROM t WHERE v = 'key'")) return 'deduplicated';
        if (++checked === 2) bothChecked.open();
        await bothChecked.opened; // both looked before either inserted: the race SQLite's single writer never has
        await sql.run("INSERT INTO t (v) VALUES ('key')");
        return 'inserted';
      });
    expect((await Promise.all([insertIfAbsent(), insertIfAbsent()])).sort()).toEqual(['deduplicated', 'inserted']);
    expect(await values()).toEqual(['key']);
  });

  it('runs a write again when its guarded statement lost to a concurrent one, and gives up with the error after a bound', async () => {
    await reader.run("INSERT INTO t (v) VALUES ('v1')");
    const w = new PgWriter(pool, { raceAttempts: 3 });
    const bothRead = gate();
    let reads = 0;
    const bump = () =>
      w.write(async (sql) => {
        const current = (await sql.get<{ v: string }>("SELECT v FROM t WHERE v LIKE 'v%'"))!.v;
        if (++reads === 2) bothRead.open();
        await bothRead.opened;
        const next = `v${Number(current.slice(1)) + 1}`;
        expectOneChange(await sql.run('UPDATE t SET v = @next WHERE v = @current', { next, current }), `t is no longer at ${current}`);
      });
    await Promise.all([bump(), bump()]);
    expect(await values()).toEqual(['v3']); // both applied, one after the other: no lost update
    let runs = 0;
    const alwaysStale = w.write(async () => {
      runs++;
      throw new StaleStateError('the row moved on');
    });
    await expect(alwaysStale).rejects.toBeInstanceOf(StaleStateError);
    expect(runs).toBe(3);
  });

  it('runs a write again when its connection died before COMMIT, then commits it once', async () => {
    const w = new PgWriter(pool, { infraRetryDelayMs: 1 });
    let runs = 0;
    await w.write(async (sql) => {
      runs++;
      await sql.run('INSERT INTO t (v) VALUES (@v)', { v: `run ${runs}` });
      if (runs === 1) await sql.run('SELECT pg_terminate_backend(pg_backend_pid())');
    });
    expect(runs).toBe(2);
    expect(await values()).toEqual(['run 2']);
  });

  it('tells its caches to forget a rolled-back write, on the connection it used', async () => {
    const forgotten: object[] = [];
    const w = new PgWriter(pool, { onRollback: (connection) => forgotten.push(connection) });
    let used: object | undefined;
    await expect(
      w.write(async (sql) => {
        used = sql.connection;
        throw new Error('no');
      }),
    ).rejects.toThrow('no');
    expect(forgotten).toEqual([used]);
    expect(used).not.toBe(pool);
  });

  it('keeps a write whose BEGIN rode with its first statement (already prepared on the connection) one transaction, its values intact', async () => {
    // One connection: the statement prepared by the first write is prepared for the second, whose
    // BEGIN then goes with it in one query (`BEGIN; EXECUTE …` with the values as literals).
    const single = openPostgresPool(database.url, { max: 1 }).on('error', () => {});
    const w = new PgWriter(single);
    const insert = (sql: Sql, v: string, n: number | null, tags: string[]) =>
      sql.get<{ v: string; n: number | null; tags: string[] }>(
        'INSERT INTO t (v) VALUES (@v) RETURNING v, CAST(@n AS int8) AS n, CAST(@tags AS text[]) AS tags',
        { v, n, tags },
      );
    try {
      expect(await w.write((sql) => insert(sql, 'prepared', 1, []))).toEqual({ v: 'prepared', n: 1, tags: [] });
      const inside = gate();
      const resume = gate();
      const failing = w.write(async (sql) => {
        const row = await insert(sql, 'it\'s \\ a "quote"', null, ['a,b', 'c"d', '']);
        inside.open();
        await resume.opened;
        await sql.run('INSERT INTO t (v) VALUES (?)', ['prepared']); // unique violation: the whole write fails
        return row;
      });
      const failure = failing.then(
        () => 'resolved',
        (error: Error) => error.message,
      );
      await inside.opened;
      expect(await values()).toEqual(['prepared']); // the first statement is inside the open transaction
      resume.open();
      expect(await failure).toMatch(/unique/);
      expect(await values()).toEqual(['prepared']);
      const row = await w.write((sql) => insert(sql, 'it\'s \\ a "quote"', 42, ['a,b', 'c"d', '']));
      expect(row).toEqual({ v: 'it\'s \\ a "quote"', n: 42, tags: ['a,b', 'c"d', ''] });
      expect(await values()).toEqual(['it\'s \\ a "quote"', 'prepared']);
    } finally {
      await w.close();
      await single.end();
    }
  });

  it('runs writes in parallel, each in its own transaction', async () => {
    const w = new PgWriter(pool);
    const all = gate();
    let started = 0;
    const writes = Array.from({ length: 4 }, (_, i) =>
      w.write(async (sql) => {
        await sql.run('INSERT INTO t (v) VALUES (@v)', { v: `w${i}` });
        if (++started === 4) all.open();
        await all.opened; // only reached by all four if they run at the same time
      }),
    );
    await Promise.all(writes);
    expect(await values()).toEqual(['w0', 'w1', 'w2', 'w3']);
  });

  it('runs the statements a closure queued for its COMMIT in the COMMIT query, values inlined: rows after the commit, before the events', async () => {
    const seen: string[] = [];
    const w = new PgWriter<string>(pool, { publish: (events) => seen.push(`published ${events.join(',')}`) });
    const tricky = ["it's", 'a "quoted" \\ backslash', null, '{,}', 'NULL', 'é ✓'];
    await w.write(async (sql, emit) => {
      await sql.run("INSERT INTO t (v) VALUES ('body')");
      sql.atCommit!('INSERT INTO t (v) SELECT x FROM unnest(@xs::text[]) AS x WHERE x IS NOT NULL RETURNING v', { xs: tricky }, (rows) =>
        seen.push(`rows ${(rows as { v: string }[]).map((r) => r.v).join('|')}`),
      );
      sql.atCommit!('SELECT @n::bigint + 1 AS n, @s AS s, @none::text AS none', { n: 41, s: "o'k", none: null }, (rows) =>
        seen.push(`rows ${JSON.stringify(rows)}`),
      );
      emit('e');
      // Queued, not run: the COMMIT query runs them.
      expect(await sql.all('SELECT v FROM t WHERE v = @v', { v: "it's" })).toEqual([]);
    });
    const kept = tricky.filter((v) => v !== null);
    expect(seen).toEqual([`rows ${kept.join('|')}`, 'rows [{"n":42,"s":"o\'k","none":null}]', 'published e']);
    expect((await values()).sort()).toEqual(['body', ...kept].sort());
  });

  it('rolls the whole write back, events unpublished, when a statement queued for its COMMIT fails', async () => {
    const seen: string[] = [];
    const w = new PgWriter<string>(pool, { publish: (events) => seen.push(...events) });
    const failed = w.write(async (sql, emit) => {
      await sql.run("INSERT INTO t (v) VALUES ('body')");
      sql.atCommit!('SELECT @v::integer AS n', { v: 'not a number' }, () => seen.push('rows'));
      emit('e');
    });
    await expect(failed).rejects.toThrow(/invalid input syntax for type integer/);
    expect(seen).toEqual([]);
    expect(await values()).toEqual([]);
    // The connection was left clean: the next write on the pool commits.
    await w.write((sql) => sql.run("INSERT INTO t (v) VALUES ('next')"));
    expect(await values()).toEqual(['next']);
  });

  it('prepares a queued statement once per connection, and drops a connection whose COMMIT query failed while preparing', async () => {
    const one = openPostgresPool(database.url, { max: 1 }).on('error', () => {});
    try {
      const w = new PgWriter(one);
      const seen: string[] = [];
      const NUMBER = 'SELECT @v::integer AS n';
      const PID = 'SELECT pg_backend_pid() AS pid, @tag AS tag';
      const queue = (sql: Parameters<Parameters<PgWriter['write']>[0]>[0], text: string, params: Record<string, unknown>) =>
        sql.atCommit!(text, params, (rows) => seen.push(JSON.stringify(rows[0])));
      await w.write((sql) => queue(sql, NUMBER, { v: '1' }));
      // NUMBER fails before PID's PREPARE, which comes after it in the query, has run: the connection must go,
      // or PID would be taken for prepared on it and its EXECUTE would fail on every later commit.
      const failed = w.write((sql) => {
        queue(sql, NUMBER, { v: 'x' });
        queue(sql, PID, { tag: 'never' });
      });
      await expect(failed).rejects.toThrow(/invalid input syntax for type integer/);
      await w.write((sql) => queue(sql, PID, { tag: 'a' }));
      await w.write((sql) => queue(sql, PID, { tag: 'b' }));
      const [first, a, b] = seen.map((r) => JSON.parse(r) as { n?: number; pid?: number; tag?: string });
      expect(first).toEqual({ n: 1 });
      expect([a!.tag, b!.tag]).toEqual(['a', 'b']);
      expect(b!.pid).toBe(a!.pid);
      // That connection holds PID once, under its COMMIT name (the driver's own names have no suffix).
      const held = await new PgSql(one).all<{ statement: string }>("SELECT statement FROM pg_prepared_statements WHERE right(name, 2) = '_c'");
      expect(held.map((h) => h.statement)).toEqual([expect.stringContaining('SELECT pg_backend_pid() AS pid, $1 AS tag')]);
    } finally {
      await one.end();
    }
  });

  it("a statement queued for the COMMIT that fails names the code that awaited the write in its error's stack", async () => {
    const w = new PgWriter(pool);
    const writeAt = async function theCallerOfTheFailingCommit() {
      await w.write((sql) => sql.atCommit!('SELECT @v::integer AS n', { v: 'nan' }, () => {}));
    };
    const err = (await writeAt().catch((e: unknown) => e)) as Error & { cause?: Error };
    expect(err).toBeInstanceOf(RefusedValueError);
    // The server's error, kept as the cause: its stack is the writer's and its caller's, not the driver's parser's.
    expect(err.cause?.stack).toMatch(/theCallerOfTheFailingCommit/);
  });

  it("fails a write holding a value the server refuses with that write's RefusedValueError, not storage trouble; the next write commits", async () => {
    const one = openPostgresPool(database.url, { max: 1 }).on('error', () => {});
    try {
      const infra: unknown[] = [];
      const w = new PgWriter(one, { onInfraFailure: (err) => infra.push(err) });
      const seen: string[] = [];
      const PID = 'SELECT pg_backend_pid() AS pid, @tag AS tag';
      const refusal = (write: Promise<unknown>) =>
        write.then(
          () => null,
          (err: unknown) => err as RefusedValueError,
        );
      // A NUL queued for the COMMIT is refused before the query is sent (the server would answer 08P01, a
      // connection exception), after PID was noted as prepared by the query never sent: that connection goes.
      const nul = await refusal(
        w.write((sql) => {
          sql.atCommit!(PID, { tag: 'never' }, () => seen.push('never'));
          sql.atCommit!('SELECT @s::text AS s', { s: 'a\u0000b' }, () => seen.push('never'));
        }),
      );
      expect(nul).toBeInstanceOf(RefusedValueError);
      expect(nul).toMatchObject({
        sqlstate: '22021',
        message: expect.stringContaining('U+0000 (NUL), which Postgres does not store, in the statement "SELECT @s::text AS s"'),
      });
      await w.write((sql) => sql.atCommit!(PID, { tag: 'a' }, (rows) => seen.push((rows[0] as { tag: string }).tag)));
      // Bound in a statement of the closure, the server refuses it (22021); a number out of its type's range (22003).
      const bound = await refusal(w.write((sql) => sql.run('INSERT INTO t (v) VALUES (@v)', { v: 'a\u0000' })));
      expect(bound).toMatchObject({ name: 'RefusedValueError', sqlstate: '22021' });
      const range = await refusal(w.write((sql) => sql.atCommit!('SELECT @n::integer AS n', { n: 3e9 }, () => seen.push('never'))));
      expect(range).toMatchObject({ name: 'RefusedValueError', sqlstate: '22003', message: expect.stringContaining('out of range for type integer') });
      // A value the server quotes whole (22P02): the message kept is bounded, the server's error kept as `cause`.
      const long = await refusal(w.write((sql) => sql.run('SELECT @v::integer', { v: 'x'.repeat(2000) })));
      expect(long).toMatchObject({ name: 'RefusedValueError', sqlstate: '22P02', cause: { code: '22P02' } });
      expect(long!.message.length).toBeLessThan(600);
      // A bug of our own SQL (22012, a division by zero) is no refused value: it fails as itself.
      const bug = await refusal(w.write((sql) => sql.run('SELECT 1 / @n::integer', { n: 0 })));
      expect(bug).not.toBeInstanceOf(RefusedValueError);
      expect(bug).toMatchObject({ code: '22012' });
      await w.write((sql) => sql.run("INSERT INTO t (v) VALUES ('next')"));
      expect(seen).toEqual(['a']);
      expect(await values()).toEqual(['next']);
      expect(infra).toEqual([]);
    } finally {
      await one.end();
    }
  });

  describe('close', () => {
    let w: PgWriter;
    beforeEach(() => {
      w = new PgWriter(pool);
    });
    afterEach(async () => {
      await w.close();
    });

    it('waits for the writes under way and refuses new ones', async () => {
      const resume = gate();
      const running = w.write(async (sql) => {
        await resume.opened;
        await sql.run("INSERT INTO t (v) VALUES ('under way')");
      });
      const closed = w.close();
      await expect(w.write(() => 1)).rejects.toThrow(/closed/);
      resume.open();
      await closed;
      await running;
      expect(await values()).toEqual(['under way']);
    });
  });
});
