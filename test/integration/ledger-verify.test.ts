/**
 * `combine ledger verify` against tampering done behind the daemon's back: one flipped byte that no
 * trigger saw (in the SQLite file; on Postgres an UPDATE with triggers disabled for the session), an
 * UPDATE after dropping the append-only triggers, and state rows that claim work the ledger does not
 * record. Each makes verify exit 1 and name the entry.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/core/sql.js';
import { FAST_RETRY, Harness, project, TEST_BACKEND, type CommandJson } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

async function setup() {
  h = await Harness.start();
  h.writeConfig(FAST_RETRY);
  await h.importProject(project('p', 2));
  const threads: string[] = [];
  for (const epic of ['E1', 'E2']) {
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', epic]);
    await h.waitForEnd(r.thread_id);
    threads.push(r.thread_id);
  }
  expect(await h.json(['ledger', 'verify'])).toMatchObject({ ok: true, entries: 8 });
  return threads;
}

/** The daemon closes the database (on SQLite, checkpointing the WAL into the file) before the test edits it. */
async function editDatabase(fn: (sql: Sql) => Promise<void>) {
  await h.stopDaemon();
  await h.edit(fn);
}

/** `DROP TRIGGER` as each dialect spells it (Postgres names the table too). */
function dropLedgerTrigger(sql: Sql, name: string) {
  return sql.run(sql.dialect === 'postgres' ? `DROP TRIGGER ${name} ON llm_ledger_entries` : `DROP TRIGGER ${name}`);
}

/**
 * Changes `from` to `to` (same length) in the stored ledger where no trigger sees it. SQLite: in the
 * database file's bytes — every copy, as SQLite may leave stale copies of a record in a page's free
 * space; same length, so the page structure stays valid. Postgres: an UPDATE in a session that fires
 * no triggers (`session_replication_role = replica`, open to a superuser, which is what the tests use).
 */
async function flipBehindTheTriggers(from: string, to: string) {
  await h.stopDaemon();
  if (TEST_BACKEND === 'postgres') {
    await h.edit(async (sql) => {
      await sql.run('SET session_replication_role = replica');
      const { changes } = await sql.run('UPDATE llm_ledger_entries SET payload = replace(payload, ?, ?) WHERE payload LIKE ?', [from, to, `%${from}%`]);
      expect(changes).toBe(1);
    });
    return;
  }
  const file = join(h.home, 'combine.db');
  expect(() => readFileSync(`${file}-wal`)).toThrow(); // checkpointed: the file holds every page
  const bytes = readFileSync(file);
  const needle = Buffer.from(from);
  let flipped = 0;
  for (let at = bytes.indexOf(needle); at !== -1; at = bytes.indexOf(needle, at + 1)) {
    Buffer.from(to).copy(bytes, at);
    flipped++;
  }
  expect(flipped).toBeGreaterThan(0);
  writeFileSync(file, bytes);
}

async function verifyFails() {
  const r = await h.cli(['ledger', 'verify', '--json']);
  expect(r.code).toBe(1);
  const human = await h.cli(['ledger', 'verify']);
  expect(human.code).toBe(1);
  return { report: JSON.parse(r.stdout), text: human.stdout };
}

describe('ledger verify', () => {
  it('a byte flipped in a payload where no trigger sees it fails verification at that entry', async () => {
    const [t1] = await setup();
    const response = (await h.json<any[]>(['ledger', t1!])).find((e) => e.entry_type === 'response');
    expect(response.payload.request_id).toBe('sim-req-1');
    await flipBehindTheTriggers('"request_id":"sim-req-1"', '"request_id":"sim-req-7"');

    const { report, text } = await verifyFails();
    expect(report.first_break).toEqual({ seq: response.seq, reason: 'hash does not match the entry contents' });
    expect(text).toContain(`entry ${response.seq}: hash does not match the entry contents`);
  });

  it('an UPDATE is refused by the triggers; after dropping them, the changed entry is named', async () => {
    const [, t2] = await setup();
    const report = (await h.json<any[]>(['ledger', t2!])).find((e) => e.entry_type === 'parse_report');
    await editDatabase(async (sql) => {
      await expect(sql.run("UPDATE llm_ledger_entries SET payload = '{}' WHERE seq = ?", [report.seq])).rejects.toThrow(/append-only/);
      await dropLedgerTrigger(sql, 'ledger_entries_no_update');
      const { changes } = await sql.run('UPDATE llm_ledger_entries SET payload = replace(payload, \'"ok":true\', \'"ok":fals\') WHERE seq = ?', [report.seq]);
      expect(changes).toBe(1);
    });
    const { report: r } = await verifyFails();
    expect(r.first_break).toEqual({ seq: report.seq, reason: 'hash does not match the entry contents' });
  });

  it('a deleted entry breaks the chain at the entry after it', async () => {
    await setup();
    await editDatabase(async (sql) => {
      await dropLedgerTrigger(sql, 'ledger_entries_delete_only_checkpointed');
      expect((await sql.run('DELETE FROM llm_ledger_entries WHERE seq = 3')).changes).toBe(1);
    });
    const { report } = await verifyFails();
    expect(report.first_break).toEqual({ seq: 4, reason: 'entry 3 is missing and no checkpoint covers it' });
  });

  it('names a thread whose state claims work its ledger does not record', async () => {
    h = await Harness.start();
    h.writeConfig(FAST_RETRY);
    h.setFaults([{ kind: 'auth' }]);
    await h.importProject(project('p', 2));
    const ids: string[] = [];
    for (const epic of ['E1', 'E2']) {
      const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', epic]);
      expect((await h.waitForEnd(r.thread_id)).status).toBe('failed');
      expect((await h.json<any[]>(['ledger', r.thread_id])).map((e) => e.entry_type)).toEqual(['prompt', 'error']);
      ids.push(r.thread_id);
    }
    expect((await h.json(['ledger', 'verify'])).ok).toBe(true);
    await editDatabase(async (sql) => {
      expect((await sql.run("UPDATE llm_work_items SET status = 'applied' WHERE thread_id = ?", [ids[0]!])).changes).toBe(1);
      expect((await sql.run("UPDATE llm_threads SET status = 'complete' WHERE id = ?", [ids[1]!])).changes).toBe(1);
    });
    const { report, text } = await verifyFails();
    expect(report.first_break).toBeNull(); // the chain itself is intact
    expect(report.incomplete).toEqual([
      expect.objectContaining({ seq: 2, thread_id: ids[0], reason: 'applied without a mutation_report entry' }),
      expect.objectContaining({ seq: 4, thread_id: ids[1], work_item_id: null, reason: 'the thread is complete but none of its work items was applied' }),
    ]);
    expect(text).toContain(`entry 2 (thread ${ids[0]}`);
  });
});
