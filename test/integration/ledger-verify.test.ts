/**
 * `combine ledger verify` against tampering done behind the daemon's back: one flipped byte in the
 * database file, an UPDATE after dropping the append-only triggers, and state rows that claim work the
 * ledger does not record. Each makes verify exit 1 and name the entry.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, type CommandJson } from '../helpers/harness.js';

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

/** The daemon closes the database (checkpointing the WAL into the file) before the test edits it. */
async function editDatabase(fn: (db: Database.Database) => void) {
  await h.stopDaemon();
  const db = new Database(join(h.home, 'combine.db'));
  fn(db);
  db.close();
}

async function verifyFails() {
  const r = await h.cli(['ledger', 'verify', '--json']);
  expect(r.code).toBe(1);
  const human = await h.cli(['ledger', 'verify']);
  expect(human.code).toBe(1);
  return { report: JSON.parse(r.stdout), text: human.stdout };
}

describe('ledger verify', () => {
  it('a byte flipped in a payload inside the database file fails verification at that entry', async () => {
    const [t1] = await setup();
    const response = (await h.json<any[]>(['ledger', t1!])).find((e) => e.entry_type === 'response');
    expect(response.payload.request_id).toBe('sim-req-1');
    await h.stopDaemon();
    const file = join(h.home, 'combine.db');
    expect(() => readFileSync(`${file}-wal`)).toThrow(); // checkpointed: the file holds every page
    const bytes = readFileSync(file);
    const needle = Buffer.from('"request_id":"sim-req-1"');
    // SQLite may leave stale copies of a record in free space of a page; flip the byte in each copy so
    // the live one is surely hit. Same length, so the page structure stays valid and SQLite reads it.
    let flipped = 0;
    for (let at = bytes.indexOf(needle); at !== -1; at = bytes.indexOf(needle, at + 1)) {
      bytes[at + needle.length - 2] = '7'.charCodeAt(0); // sim-req-1 → sim-req-7
      flipped++;
    }
    expect(flipped).toBeGreaterThan(0);
    writeFileSync(file, bytes);

    const { report, text } = await verifyFails();
    expect(report.first_break).toEqual({ seq: response.seq, reason: 'hash does not match the entry contents' });
    expect(text).toContain(`entry ${response.seq}: hash does not match the entry contents`);
  });

  it('an UPDATE is refused by the triggers; after dropping them, the changed entry is named', async () => {
    const [, t2] = await setup();
    const report = (await h.json<any[]>(['ledger', t2!])).find((e) => e.entry_type === 'parse_report');
    await editDatabase((db) => {
      expect(() => db.prepare("UPDATE llm_ledger_entries SET payload = '{}' WHERE seq = ?").run(report.seq)).toThrow(/append-only/);
      db.exec('DROP TRIGGER ledger_entries_no_update');
      db.prepare('UPDATE llm_ledger_entries SET payload = replace(payload, \'"ok":true\', \'"ok":fals\') WHERE seq = ?').run(report.seq);
    });
    const { report: r } = await verifyFails();
    expect(r.first_break).toEqual({ seq: report.seq, reason: 'hash does not match the entry contents' });
  });

  it('a deleted entry breaks the chain at the entry after it', async () => {
    await setup();
    await editDatabase((db) => {
      db.exec('DROP TRIGGER ledger_entries_delete_only_checkpointed');
      db.prepare('DELETE FROM llm_ledger_entries WHERE seq = 3').run();
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
    await editDatabase((db) => {
      db.prepare("UPDATE llm_work_items SET status = 'applied' WHERE thread_id = ?").run(ids[0]);
      db.prepare("UPDATE llm_threads SET status = 'complete' WHERE id = ?").run(ids[1]);
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
