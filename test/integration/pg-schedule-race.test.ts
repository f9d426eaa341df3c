/**
 * Lease-then-LLM across daemons on one Postgres (ADR-0023, issue 18): three OS processes, each the real
 * App with a COMBINE_HOME of its own and the same database, race the scheduler's tick for the same 100
 * periods. `INSERT … ON CONFLICT DO NOTHING` on the run's natural key settles every race before any
 * work: exactly one run, one thread, one provider call and one briefing per period, and one hash chain.
 * Postgres only (the SQLite race is schedule-race.test.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { applyPgMigrations } from '../../src/db/pg/migrate.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { claimSchedulePeriod, reclaimStaleScheduleRuns } from '../../src/db/schedules.js';
import { verifyLedger } from '../../src/ledger/verify.js';
import { Harness, project } from '../helpers/harness.js';
import { type Racer, startRacer, tickInLockstep } from '../helpers/schedule-racer.js';
import { openTestPool } from '../helpers/postgres.js';

const PERIODS = 100;
const RACERS = 3;
const DAY = 86_400_000;
const FIRST = Date.parse('2026-01-01T09:00:00Z');

let h: Harness;
let pool: pg.Pool | null = null;
const racers: Racer[] = [];
const homes: string[] = [];
afterEach(async () => {
  for (const r of racers.splice(0)) if (r.child.exitCode === null) r.child.kill('SIGKILL');
  await pool?.end();
  pool = null;
  for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true });
  await h?.cleanup();
});

/** A harness whose database has the schema, and a handle on it for the test's own statements. */
async function migratedDatabase(): Promise<PgSql> {
  h = await Harness.start();
  if (!h.database) throw new Error('pg-* test files run in the postgres project only (vitest.config.ts)');
  await applyPgMigrations(h.database.url);
  pool = openTestPool(h.database.url, 3);
  return new PgSql(pool);
}

describe('three daemons on one Postgres race the schedule tick', () => {
  // 3 processes × 100 lockstep ticks: ~10 s alone, over a minute when the whole suite shares 2 cores.
  it('for 100 periods: one run, one thread, one provider call and one briefing per period', { timeout: 180_000 }, async () => {
    const sql = await migratedDatabase();
    const p = project('race', 2);
    await sql.run('INSERT INTO projects (id, name, created_at) VALUES (?, ?, 0)', [p.id, p.name]);
    await sql.run(
      `INSERT INTO documents (id, project_id, doc_type, version, content, updated_at) VALUES
       ('arch', 'race', 'epic_architecture', 1, ?, 0), ('backlog', 'race', 'story_backlog', 1, '{"epics":[]}', 0)`,
      [JSON.stringify({ epics: p.epics })],
    );
    await sql.run(
      `INSERT INTO schedules (id, project_id, operation, cron, timezone, catch_up, status, active_from, created_at, updated_at)
       VALUES ('s1', 'race', 'briefing', '0 9 * * *', 'UTC', 'latest', 'active', ?, 0, 0)`,
      [FIRST - DAY / 2],
    );

    for (let i = 0; i < RACERS; i++) {
      const home = mkdtempSync(join(tmpdir(), 'cmb-racer-'));
      homes.push(home);
      racers.push(startRacer(home, h.env, FIRST, PERIODS));
    }
    // Lockstep: every racer ticks period i at the same moment, so they really contend for its row.
    const tallies = await tickInLockstep(racers, PERIODS);

    // Every period was claimed exactly once; each racer either won or lost each period, never both.
    for (const t of tallies) expect(t.won + t.lost).toBe(PERIODS);
    const sum = (f: (t: (typeof tallies)[number]) => number) => tallies.reduce((s, t) => s + f(t), 0);
    expect(sum((t) => t.won)).toBe(PERIODS);
    expect(sum((t) => t.lost)).toBe(PERIODS * (RACERS - 1));
    expect(new Set(tallies.flatMap((t) => t.won_periods)).size).toBe(PERIODS);
    expect(sum((t) => t.started)).toBe(PERIODS);
    console.log(`race split: won ${tallies.map((t) => t.won).join('/')}; lost at the INSERT itself: ${sum((t) => t.lost_at_insert)}`);

    // One provider call per period, for that period's date.
    const calls = h.sim.calls.filter((c) => c.operation === 'project_briefing');
    expect(calls).toHaveLength(PERIODS);
    const dates = Array.from({ length: PERIODS }, (_, i) => new Date(FIRST + i * DAY).toISOString().slice(0, 10));
    expect(calls.map((c) => c.briefing_date).sort()).toEqual(dates);

    const runs = await sql.all<any>("SELECT * FROM schedule_runs WHERE schedule_id = 's1' ORDER BY period_at");
    expect(runs).toHaveLength(PERIODS);
    expect(runs.every((r) => r.status === 'complete' && r.claims === 1 && r.responses === 1 && r.total_tokens > 0)).toBe(true);
    expect(new Set(runs.map((r) => r.thread_id)).size).toBe(PERIODS);
    const threads = await sql.get<{ n: number }>("SELECT count(*) AS n FROM llm_threads WHERE kind = 'project_briefing'");
    expect(threads!.n).toBe(PERIODS);
    const docs = await sql.all<any>("SELECT doc_key, version FROM documents WHERE doc_type = 'briefing' ORDER BY doc_key");
    expect(docs.map((d) => d.doc_key)).toEqual(dates);
    expect(docs.every((d) => d.version === 1)).toBe(true);
    // Usage on the runs is exactly what the provider reported, once each.
    const ledger = await sql.get<{ t: number }>(
      "SELECT sum((payload::jsonb #>> '{usage,total_tokens}')::bigint)::bigint AS t FROM llm_ledger_entries WHERE entry_type = 'response'",
    );
    expect(runs.reduce((s, r) => s + r.total_tokens, 0)).toBe(ledger!.t);
    // Three daemons appended to one hash chain without forking it.
    expect(await verifyLedger(sql)).toMatchObject({ ok: true, first_break: null, incomplete: [] });
  });

  it('a stale pending run is re-claimed by one daemon: the second re-evaluates the new stamp and gets nothing', async () => {
    const sql = await migratedDatabase();
    await sql.run("INSERT INTO projects (id, name, created_at) VALUES ('p', 'P', 0)");
    await sql.run(
      `INSERT INTO schedules (id, project_id, operation, cron, timezone, catch_up, status, active_from, created_at, updated_at)
       VALUES ('s1', 'p', 'briefing', '0 9 * * *', 'UTC', 'latest', 'active', 0, 0, 0)`,
    );
    // A daemon claimed a period at t=1000 and died before starting its thread.
    const claimed = await claimSchedulePeriod(sql, { id: 'r1', schedule_id: 's1', period_key: 'k', period_at: 0, owner: 'dead', now: 1000 });
    expect(claimed?.claim_owner).toBe('dead');

    // Two live daemons re-claim it at once, each in a transaction of its own.
    const [a, b] = [await pool!.connect(), await pool!.connect()];
    try {
      await a.query('BEGIN');
      await b.query('BEGIN');
      const wonByA = await reclaimStaleScheduleRuns(new PgSql(a), { owner: 'A', now: 5000, stale_before: 2000 });
      expect(wonByA.map((r) => r.claim_owner)).toEqual(['A']);
      // B's UPDATE waits for A's row lock; once A commits, READ COMMITTED re-checks B's WHERE against
      // A's fresh stamp (5000 is not < 2000): nothing left to take.
      const byB = reclaimStaleScheduleRuns(new PgSql(b), { owner: 'B', now: 5001, stale_before: 2001 });
      await a.query('COMMIT');
      expect(await byB).toEqual([]);
      await b.query('COMMIT');
    } finally {
      a.release();
      b.release();
    }
    const row = await sql.get<{ claim_owner: string; claims: number; claimed_at: number }>(
      "SELECT claim_owner, claims, claimed_at FROM schedule_runs WHERE id = 'r1'",
    );
    expect(row).toEqual({ claim_owner: 'A', claims: 2, claimed_at: 5000 });
  });
});
