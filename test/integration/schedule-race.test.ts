/**
 * Lease-then-LLM across processes: two OS processes, each the real App on one database, race the
 * scheduler's tick for the same 100 periods. The UNIQUE run row settles every race before any work:
 * exactly one run, one thread, one provider call and one briefing per period, and the loser of a
 * period does nothing at all.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/connection.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { verifyLedger } from '../../src/ledger/verify.js';
import { Harness, ROOT, TEST_BACKEND, project } from '../helpers/harness.js';

const PERIODS = 100;
const DAY = 86_400_000;
const FIRST = Date.parse('2026-01-01T09:00:00Z');

let h: Harness;
const racers: ChildProcessWithoutNullStreams[] = [];
afterEach(async () => {
  for (const r of racers.splice(0)) if (r.exitCode === null) r.kill('SIGKILL');
  await h?.cleanup();
});

interface Tally {
  won: number;
  lost: number;
  lost_at_insert: number;
  started: number;
  won_periods: string[];
}

interface Racer {
  child: ChildProcessWithoutNullStreams;
  ready: Promise<void>;
  /** Resolves when the racer has printed its n-th `ticked`. */
  ticked(n: number): Promise<void>;
  result: Promise<Tally>;
}

function startRacer(): Racer {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test/helpers/schedule-race-worker.ts'), h.home, String(FIRST), String(PERIODS)], {
    cwd: ROOT,
    env: { ...h.env },
  });
  racers.push(child);
  let out = '';
  let err = '';
  const waiters: { n: number; resolve: () => void }[] = [];
  const tickedCount = () => (out.match(/^ticked$/gm) ?? []).length;
  child.stderr.on('data', (d) => (err += d));
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d;
      if (out.startsWith('ready\n')) resolve();
      for (const w of waiters.splice(0))
        if (tickedCount() >= w.n) w.resolve();
        else waiters.push(w);
    });
    child.once('exit', (code) => reject(new Error(`racer exited ${code} before it was ready: ${err}`)));
  });
  const ticked = (n: number) => new Promise<void>((resolve) => (tickedCount() >= n ? resolve() : waiters.push({ n, resolve })));
  const result = new Promise<any>((resolve, reject) => {
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`racer exited ${code}: ${err}`));
      resolve(JSON.parse(out.split('\n').filter(Boolean).pop()!));
    });
  });
  return { child, ready, ticked, result };
}

describe('two processes race the schedule tick', () => {
  it('for 100 periods: one run, one thread, one provider call and one briefing per period', async () => {
    h = await Harness.start();
    // The shared database: migrated (the Postgres test database is a copy of a migrated one), with a
    // project and a daily 09:00 UTC briefing schedule.
    if (TEST_BACKEND === 'sqlite') {
      const file = openDatabase(join(h.home, 'combine.db'));
      applyMigrations(file);
      file.close();
    }
    const p = project('race', 2);
    await h.edit(async (sql) => {
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
    });

    const a = startRacer();
    const b = startRacer();
    await Promise.all([a.ready, b.ready]);
    // Lockstep: both racers tick period i at the same moment, so they really contend for its row.
    for (let i = 1; i <= PERIODS; i++) {
      a.child.stdin.write('go\n');
      b.child.stdin.write('go\n');
      await Promise.all([a.ticked(i), b.ticked(i)]);
    }
    const [ra, rb] = await Promise.all([a.result, b.result]);

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

    const runs = await h.query<any>("SELECT * FROM schedule_runs WHERE schedule_id = 's1' ORDER BY period_at");
    expect(runs).toHaveLength(PERIODS);
    expect(runs.every((r) => r.status === 'complete' && r.claims === 1 && r.responses === 1 && r.total_tokens > 0)).toBe(true);
    expect(new Set(runs.map((r) => r.thread_id)).size).toBe(PERIODS);
    expect(await h.queryOne("SELECT count(*) AS n FROM llm_threads WHERE kind = 'project_briefing'")).toEqual({ n: PERIODS });
    const docs = await h.query<{ doc_key: string; version: number }>("SELECT doc_key, version FROM documents WHERE doc_type = 'briefing'");
    expect(docs.map((d) => d.doc_key).sort()).toEqual(dates);
    expect(docs.every((d) => d.version === 1)).toBe(true);
    // Usage on the runs is exactly what the provider reported, once each.
    const responses = await h.query<{ payload: string }>("SELECT payload FROM llm_ledger_entries WHERE entry_type = 'response'");
    const ledgerTokens = responses.reduce((s, r) => s + JSON.parse(r.payload).usage.total_tokens, 0);
    expect(runs.reduce((s, r) => s + r.total_tokens, 0)).toBe(ledgerTokens);
    // Two processes appended to one hash chain without forking it (verified on a connection of the test's own).
    expect(await h.edit((sql) => verifyLedger(sql))).toMatchObject({ ok: true, first_break: null, incomplete: [] });
  });
});
