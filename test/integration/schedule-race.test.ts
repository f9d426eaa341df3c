/**
 * Lease-then-LLM across processes: two OS processes, each the real App on one database file, race the
 * scheduler's tick for the same 100 periods. The UNIQUE run row settles every race before any work:
 * exactly one run, one thread, one provider call and one briefing per period, and the loser of a
 * period does nothing at all.
 */
import { SqliteSql } from '../../src/db/sql.js';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/connection.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { verifyLedger } from '../../src/ledger/verify.js';
import { Harness, project } from '../helpers/harness.js';
import { startRacer, type Tally, tickInLockstep } from '../helpers/schedule-racer.js';

const PERIODS = 100;
const DAY = 86_400_000;
const FIRST = Date.parse('2026-01-01T09:00:00Z');

let h: Harness;
const racers: ChildProcessWithoutNullStreams[] = [];
afterEach(async () => {
  for (const r of racers.splice(0)) if (r.exitCode === null) r.kill('SIGKILL');
  await h?.cleanup();
});

describe('two processes race the schedule tick', () => {
  it('for 100 periods: one run, one thread, one provider call and one briefing per period', async () => {
    h = await Harness.start();
    // The shared database: migrated, with a project and a daily 09:00 UTC briefing schedule.
    const db = openDatabase(join(h.home, 'combine.db'));
    applyMigrations(db);
    const p = project('race', 2);
    db.prepare('INSERT INTO projects (id, name, created_at) VALUES (?, ?, 0)').run(p.id, p.name);
    db.prepare(
      `INSERT INTO documents (id, project_id, doc_type, version, content, updated_at) VALUES
       ('arch', 'race', 'epic_architecture', 1, ?, 0), ('backlog', 'race', 'story_backlog', 1, '{"epics":[]}', 0)`,
    ).run(JSON.stringify({ epics: p.epics }));
    db.prepare(
      `INSERT INTO schedules (id, project_id, operation, cron, timezone, catch_up, status, active_from, created_at, updated_at)
       VALUES ('s1', 'race', 'briefing', '0 9 * * *', 'UTC', 'latest', 'active', ?, 0, 0)`,
    ).run(FIRST - DAY / 2);
    db.close();

    const a = startRacer(h.home, h.env, FIRST, PERIODS);
    const b = startRacer(h.home, h.env, FIRST, PERIODS);
    racers.push(a.child, b.child);
    // Lockstep: both racers tick period i at the same moment, so they really contend for its row.
    const [ra, rb] = (await tickInLockstep([a, b], PERIODS)) as [Tally, Tally];

    // Every period was claimed exactly once; each racer either won or lost each period, never both.
    expect(ra.won + ra.lost).toBe(PERIODS);
    expect(rb.won + rb.lost).toBe(PERIODS);
    expect(ra.won + rb.won).toBe(PERIODS);
    expect(ra.lost + rb.lost).toBe(PERIODS);
    expect(new Set([...ra.won_periods, ...rb.won_periods]).size).toBe(PERIODS);
    expect(ra.started + rb.started).toBe(PERIODS);
    console.log(`race split: A won ${ra.won}, B won ${rb.won}; lost at the INSERT itself: ${ra.lost_at_insert + rb.lost_at_insert}`);

    // One provider call per period, for that period's date.
    const calls = h.sim.calls.filter((c) => c.operation === 'project_briefing');
    expect(calls).toHaveLength(PERIODS);
    const dates = Array.from({ length: PERIODS }, (_, i) => new Date(FIRST + i * DAY).toISOString().slice(0, 10));
    expect(calls.map((c) => c.briefing_date).sort()).toEqual(dates);

    const check = h.openDb();
    const runs = check.prepare("SELECT * FROM schedule_runs WHERE schedule_id = 's1' ORDER BY period_at").all() as any[];
    expect(runs).toHaveLength(PERIODS);
    expect(runs.every((r) => r.status === 'complete' && r.claims === 1 && r.responses === 1 && r.total_tokens > 0)).toBe(true);
    expect(new Set(runs.map((r) => r.thread_id)).size).toBe(PERIODS);
    const threads = check.prepare("SELECT count(*) AS n FROM llm_threads WHERE kind = 'project_briefing'").get() as { n: number };
    expect(threads.n).toBe(PERIODS);
    const docs = check.prepare("SELECT doc_key, version FROM documents WHERE doc_type = 'briefing' ORDER BY doc_key").all() as any[];
    expect(docs.map((d) => d.doc_key)).toEqual(dates);
    expect(docs.every((d) => d.version === 1)).toBe(true);
    // Usage on the runs is exactly what the provider reported, once each.
    const ledgerTokens = check
      .prepare("SELECT sum(json_extract(payload, '$.usage.total_tokens')) AS t FROM llm_ledger_entries WHERE entry_type = 'response'")
      .get() as { t: number };
    expect(runs.reduce((s, r) => s + r.total_tokens, 0)).toBe(ledgerTokens.t);
    // Two processes appended to one hash chain without forking it.
    expect(await verifyLedger(new SqliteSql(check))).toMatchObject({ ok: true, first_break: null, incomplete: [] });
    check.close();
  });
});
