/**
 * Migrations at start: an existing database is backed up (newest 3 kept) before pending migrations
 * run; a failing migration aborts the start, leaves the database file byte-identical and no daemon.
 * COMBINE_MIGRATIONS_DIR (a test/debug switch) points the daemon at a copy of the migrations with more.
 */
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isAlive } from '../../src/cli/daemon-control.js';
import { Harness, ROOT, project, type CommandJson } from '../helpers/harness.js';

let h: Harness;
let migrations: string;

/** Adds a migration to the copied folder, journaled after every existing one. */
function addMigration(tag: string, sql: string): void {
  const journalPath = join(migrations, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8')) as { entries: { idx: number; when: number; tag: string }[] };
  const last = journal.entries[journal.entries.length - 1]!;
  journal.entries.push({ ...last, idx: last.idx + 1, when: last.when + 1000, tag });
  writeFileSync(join(migrations, `${tag}.sql`), sql);
  writeFileSync(journalPath, JSON.stringify(journal, null, 2));
}

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const backups = () => (existsSync(join(h.home, 'backups')) ? readdirSync(join(h.home, 'backups')).sort() : []);

beforeAll(async () => {
  h = await Harness.start();
  migrations = mkdtempSync(join(tmpdir(), 'cmb-migrations-'));
  cpSync(join(ROOT, 'migrations'), migrations, { recursive: true });
  h.env.COMBINE_MIGRATIONS_DIR = migrations;
  await h.importProject(project('p', 1));
  const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
  await h.waitForEnd(r.thread_id);
  await h.stopDaemon();
});
afterAll(async () => {
  await h.cleanup();
  rmSync(migrations, { recursive: true, force: true });
});

describe('migrations at start', () => {
  it('a fresh start with nothing pending takes no backup', async () => {
    await h.startDaemon();
    await h.stopDaemon();
    expect(backups()).toEqual([]);
  });

  it('a failing migration aborts the start and leaves the database byte-identical, with no daemon running', async () => {
    const db = join(h.home, 'combine.db');
    const before = sha256(db);
    addMigration('0090_good_then_broken', 'CREATE TABLE `made_by_test` (`a` integer);\n--> statement-breakpoint\nINSERT INTO `no_such_table` VALUES (1);\n');
    const r = await h.cli(['daemon', 'start']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('migrating');
    expect(r.stderr).toContain('no such table: no_such_table');
    expect(r.stderr).toContain('No migration was applied');
    expect(sha256(db)).toBe(before);
    expect((await h.cli(['daemon', 'status'])).code).toBe(3);
    const pid = h.daemonPid();
    if (pid !== null) expect(isAlive(pid)).toBe(false);
    // The backup was taken before the attempt and opens as a database with the data.
    expect(backups()).toHaveLength(1);
    // Nothing of the failed migration (not even its first, valid statement) reached the database.
    const conn = h.openDb();
    try {
      expect(conn.prepare("SELECT name FROM sqlite_master WHERE name = 'made_by_test'").get()).toBeUndefined();
    } finally {
      conn.close();
    }
    // Fixing the migration lets the daemon start, and it applies it.
    writeFileSync(join(migrations, '0090_good_then_broken.sql'), 'CREATE TABLE `made_by_test` (`a` integer);\n');
    await h.startDaemon();
    expect((await h.json(['health'])).checks.migrations_applied).toBe(true);
    expect((await h.json(['threads'])).length).toBe(1);
    await h.stopDaemon();
  });

  it('keeps only the newest 3 backups', async () => {
    for (const n of [91, 92, 93]) {
      addMigration(`00${n}_more`, `CREATE TABLE \`t${n}\` (\`a\` integer);\n`);
      await h.startDaemon();
      await h.stopDaemon();
    }
    const kept = backups();
    expect(kept).toHaveLength(3);
    // The newest backup holds the schema as it was just before the last migration, with the data.
    const Database = (await import('better-sqlite3')).default;
    const newest = new Database(join(h.home, 'backups', kept[2]!), { readonly: true });
    try {
      expect(newest.prepare("SELECT name FROM sqlite_master WHERE name = 't92'").get()).toBeDefined();
      expect(newest.prepare("SELECT name FROM sqlite_master WHERE name = 't93'").get()).toBeUndefined();
      expect((newest.prepare('SELECT count(*) AS n FROM llm_threads').get() as { n: number }).n).toBe(1);
    } finally {
      newest.close();
    }
  });
});
