/**
 * Choosing Postgres (issue 18): `COMBINE_DATABASE_URL` or config `database.url` puts the state in
 * Postgres, migrated at start; the URL's password is a secret — never in the log, `status`, `config
 * show`, `health`, the ledger or an export; a URL that is not a Postgres one, or a server that does not
 * answer, stops the start with a clear error. Always on Postgres, whatever the run's backend.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, project, type CommandJson } from '../helpers/harness.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';

/** A password that is never checked: for the URLs of servers that do not exist. */
const PASSWORD = 'pg-Secret-Pass-0123456789';

let h: Harness;
let database: TestDatabase;
afterEach(async () => {
  await h?.cleanup();
  await database?.drop();
});

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    const st = statSync(p);
    return st.isDirectory() ? filesUnder(p) : st.isFile() ? [p] : [];
  });
}

/** The harness's daemon on `url`: a project imported, one epic generated to the end. */
async function generateOneEpicOn(url: string): Promise<CommandJson> {
  h.env.COMBINE_DATABASE_URL = url;
  await h.importProject(project('p', 1));
  const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
  expect((await h.waitForEnd(r.thread_id)).status).toBe('complete');
  return r;
}

describe('a daemon on Postgres', () => {
  it('keeps its state in the database the URL names, and shows the URL only with its password redacted', async () => {
    h = await Harness.start();
    database = await createTestDatabase();
    // The test server's URLs carry its (random, 24-character) password: the secret to keep out of sight.
    const password = new URL(database.url).password;
    expect(password.length).toBeGreaterThanOrEqual(16);
    const r = await generateOneEpicOn(database.url);

    // The rows are in Postgres, and nothing was written to a SQLite file in the home.
    const pg = new (await import('pg')).default.Client({ connectionString: database.url });
    await pg.connect();
    try {
      const { rows } = await pg.query('SELECT status FROM llm_threads WHERE id = $1', [r.thread_id]);
      expect(rows).toEqual([{ status: 'complete' }]);
    } finally {
      await pg.end();
    }
    expect(readdirSync(h.home).filter((f) => f.startsWith('combine.db'))).toEqual([]);

    const status = await h.json(['daemon', 'status']);
    expect(status.db_path).toBe(database.url.replace(password, 'redacted'));
    const config = await h.json(['config', 'show']);
    expect(config.file.database).toEqual({ url: status.db_path });
    const health = await h.json(['health']);
    expect(health).toMatchObject({ ready: true, checks: { database: true, migrations_applied: true } });
    expect(health.migrations.pending).toBe(0);
    expect((await h.json(['ledger', 'verify'])).ok).toBe(true);
    const exported = join(h.home, 'export.jsonl');
    expect((await h.cli(['ledger', 'export', '--project', 'p', '--out', exported])).code).toBe(0);

    const shown = JSON.stringify({ status, config, health });
    expect(shown).not.toContain(password);
    expect(filesUnder(h.home).filter((f) => readFileSync(f).includes(password))).toEqual([]);
  });

  it('reaches the server through its Unix socket when the URL names the socket directory (host=)', async () => {
    h = await Harness.start();
    database = await createTestDatabase();
    await generateOneEpicOn(database.socketUrl);

    // The daemon's sessions came in through the socket (no client address); this test's own comes over TCP.
    const pg = new (await import('pg')).default.Client({ connectionString: database.url });
    await pg.connect();
    try {
      const { rows } = await pg.query<{ socket: string; tcp: string }>(
        'SELECT count(*) FILTER (WHERE client_addr IS NULL) AS socket, count(*) FILTER (WHERE client_addr IS NOT NULL) AS tcp FROM pg_stat_activity WHERE datname = $1',
        [database.name],
      );
      expect(Number(rows[0]!.socket)).toBeGreaterThan(0);
      expect(Number(rows[0]!.tcp)).toBe(1);
    } finally {
      await pg.end();
    }
    expect((await h.json(['daemon', 'status'])).db_path).not.toContain(new URL(database.url).password);
  });

  it('refuses to start on a URL that is not a Postgres one, without echoing its password', async () => {
    h = await Harness.start();
    const r = await h.cli(['daemon', 'start'], { env: { COMBINE_DATABASE_URL: `mysql://root:${PASSWORD}@127.0.0.1/db` } });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/COMBINE_DATABASE_URL: .* is not a Postgres URL/);
    expect(r.stderr + r.stdout).not.toContain(PASSWORD);
  });

  it('stops the start with the reason when the server does not answer', async () => {
    h = await Harness.start();
    // Port 1: nothing listens there; the connection is refused at once.
    const r = await h.cli(['daemon', 'start'], { env: { COMBINE_DATABASE_URL: `postgres://u:${PASSWORD}@127.0.0.1:1/db` } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/connecting to or migrating postgres:\/\/u:redacted@127\.0\.0\.1:1\/db failed: .*ECONNREFUSED/);
    expect(r.stderr + h.logText()).not.toContain(PASSWORD);
  });
});
