/**
 * The ledger append on Postgres riding on its transaction's COMMIT (ledger/store.ts
 * appendLedgerEntriesAtCommit, db/pg/writer.ts, migrations/pg/0009): the chain head is not held while the
 * transaction is open, the rows and hashes come back after the commit and chain correctly, and an entry
 * whose bytes the database would hash differently from this process is refused before the COMMIT; a
 * guarded statement queued behind the append has its changed-row count checked there (migrations/pg/0012).
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StaleStateError } from '../../src/core/errors.js';
import type { Sql } from '../../src/core/sql.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { runGuardedAtCommit } from '../../src/db/statements.js';
import type { LedgerRow } from '../../src/db/schema.js';
import { insertThread } from '../../src/db/threads.js';
import { canonicalMetadataAroundSeq, findChainBreak, GENESIS_HASH } from '../../src/ledger/chain.js';
import { appendLedgerEntries, appendLedgerEntriesAtCommit, getLedgerHead, type NewLedgerEntry } from '../../src/ledger/store.js';
import { createTestDatabase, type TestDatabase, openTestPool } from '../helpers/postgres.js';
import { testThreadRow } from '../helpers/rows.js';

function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

const entry = (threadId: string, payload: unknown): NewLedgerEntry => ({
  thread_id: threadId,
  work_item_id: null,
  entry_type: 'prompt',
  attempt: 1,
  payload,
  created_at: 5,
});

describe('Postgres ledger append at COMMIT', () => {
  let database: TestDatabase;
  let pool: pg.Pool;
  let reader: Sql;
  let writer: PgWriter;

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true });
    pool = openTestPool(database.url, 4);
    reader = new PgSql(pool);
    writer = new PgWriter(pool);
    await insertThread(reader, testThreadRow('a'));
  });
  afterAll(async () => {
    await writer.close();
    await pool.end();
    await database.drop();
  });

  const stored = () => reader.all<LedgerRow>('SELECT * FROM llm_ledger_entries ORDER BY seq');

  it('holds the head only at the COMMIT: another append commits meanwhile; rows come back after, chained', async () => {
    const queued = gate();
    const resume = gate();
    let linked: LedgerRow[] = [];
    const first = writer.write(async (sql) => {
      await appendLedgerEntriesAtCommit(
        sql,
        [entry('t-a', { n: 'é ✓ "q" \\ \u2028' }), entry('t-a', { n: "it's" })],
        (rows) => {
          linked = rows;
        },
        undefined,
      );
      expect(linked).toEqual([]); // not appended yet: the COMMIT query appends
      queued.open();
      await resume.opened;
    });
    await queued.opened;
    // With the first transaction open, this append takes the head and commits: nothing holds it.
    const [other] = await writer.write((sql) => appendLedgerEntries(sql, [entry('t-a', { n: 'meanwhile' })]));
    resume.open();
    await first;
    expect(other!.seq).toBe(1);
    expect(linked.map((r) => r.seq)).toEqual([2, 3]);
    const rows = await stored();
    expect(rows.slice(1)).toEqual(linked);
    expect(findChainBreak(rows, GENESIS_HASH)).toBeNull();
    expect(await getLedgerHead(reader)).toEqual({ seq: 3, hash: linked[1]!.hash });
  });

  it('refuses an entry whose bytes differ from what the client hashed, and rolls its whole write back', async () => {
    const before = await stored();
    const e = { ...entry('t-b', null), payload: '{"n":1}' };
    const [head, tail] = canonicalMetadataAroundSeq(e);
    const write = writer.write(async (sql) => {
      await insertThread(sql, testThreadRow('b'));
      sql.atCommit!(
        `SELECT * FROM llm_ledger_append(@t::text[], @w::text[], @y::text[], @a::integer[], @p::text[], @c::bigint[], @h::text[], @l::text[], @d::text[])`,
        { t: ['t-b'], w: [null], y: ['prompt'], a: [1], p: [e.payload], c: [5], h: [head], l: [tail], d: ['0'.repeat(64)] },
        () => {},
      );
    });
    await expect(write).rejects.toThrow(/would hash other bytes/);
    expect(await stored()).toEqual(before);
    expect(await reader.get('SELECT id FROM llm_threads WHERE id = ?', ['t-b'])).toBeUndefined();
  });

  it('checks the count of a guarded statement behind the append in the COMMIT query: the row gets the seq, or the write rolls back as stale', async () => {
    await reader.run('CREATE TABLE guarded (id TEXT PRIMARY KEY, state TEXT NOT NULL, seq BIGINT)');
    await reader.run("INSERT INTO guarded (id, state) VALUES ('g', 'open')");
    // The seq is the append's, read behind it in the same query (as the charge settle does: db/charges.ts).
    const close = (sql: Sql, from: string) =>
      runGuardedAtCommit(
        sql,
        "UPDATE guarded SET state = 'closed', seq = (SELECT max(seq) FROM llm_ledger_entries) WHERE id = @id AND state = @from",
        { id: 'g', from },
        `guarded g is not ${from}`,
      );
    const before = await stored();
    let runs = 0;
    const stale = writer.write(async (sql) => {
      runs++;
      await appendLedgerEntriesAtCommit(sql, [entry('t-a', { n: 'stale' })], () => {}, undefined);
      await close(sql, 'gone');
    });
    // The database's refusal reaches the caller as the client's own, after the writer's bounded re-runs.
    await expect(stale).rejects.toBeInstanceOf(StaleStateError);
    await expect(stale).rejects.toThrow('guarded g is not gone');
    expect(runs).toBe(3);
    expect(await stored()).toEqual(before);
    let linked: LedgerRow[] = [];
    await writer.write(async (sql) => {
      await appendLedgerEntriesAtCommit(
        sql,
        [entry('t-a', { n: 'closes' })],
        (rows) => {
          linked = rows;
        },
        undefined,
      );
      await close(sql, 'open');
    });
    expect(await reader.get('SELECT state, seq FROM guarded')).toEqual({ state: 'closed', seq: linked[0]!.seq });
  });
});
