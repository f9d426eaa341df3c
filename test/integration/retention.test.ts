/**
 * Retention and metrics over a long history: 1,000+ threads through the real daemon and simulator.
 * The metrics' series count does not grow with them; `combine prune` removes the old ones (with their
 * ledger entries, under checkpoints) while `ledger verify` stays clean, threads still running are not
 * touched, and new work keeps extending the same chain.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Harness, project, TEST_BACKEND, type CommandJson, type ThreadJson } from '../helpers/harness.js';
import { parseExposition, seriesCount } from '../helpers/prometheus.js';
import { METRIC_SERIES_BOUND, metricSeriesCount } from '../../src/daemon/runtime/metrics.js';

const EPICS = 50;
const ROUNDS = 21; // 20 superseded rounds × 51 threads = 1,020 prunable threads

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
  // A very long call timeout: the "keeper" calls hang, so their threads stay running throughout.
  h.writeConfig({ engine: { max_in_flight: 32 }, provider: { timeout: '30m' } });
  h.setFaults([{ kind: 'hang', match: 'Keeper' }]);
  await h.importProject(project('big', EPICS));
  await h.importProject({ id: 'keep', name: 'Keep', epics: [1, 2].map((n) => ({ id: `K${n}`, title: `Keeper ${n}`, description: 'Stays running.' })) });
});
afterAll(() => h.cleanup());

async function round(force: boolean): Promise<ThreadJson> {
  const r = await h.json<CommandJson>(['generate-all', '--project', 'big', ...(force ? ['--force'] : [])]);
  const end = await h.waitForEnd(r.thread_id);
  expect(end.status).toBe('complete');
  return end;
}

async function metricsText(): Promise<string> {
  const r = await h.cli(['metrics']);
  expect(r.code).toBe(0);
  return r.stdout;
}

describe('a long history', () => {
  const keepers: CommandJson[] = [];
  let keeperLedgers: unknown[] = [];
  let last: ThreadJson;
  let seriesBefore = 0;

  it('exposes metrics that parse as Prometheus text, with a fixed series count', async () => {
    const text = await metricsText();
    const families = parseExposition(text);
    expect(families.map((f) => f.name)).toEqual(
      expect.arrayContaining([
        'combine_threads',
        'combine_work_items',
        'combine_queue_depth',
        'combine_calls_in_flight',
        'combine_call_duration_seconds',
        'combine_attempts_total',
        'combine_failures_total',
        'combine_tokens_total',
        'combine_breaker_state',
        'combine_limiter_waits_total',
        'combine_recoveries_total',
        'combine_commit_seconds',
        'combine_wal_bytes',
      ]),
    );
    seriesBefore = seriesCount(text);
    // Exactly the documented count for one model and no price, within the hard bound.
    expect(seriesBefore).toBe(metricSeriesCount(1, false));
    expect(seriesBefore).toBeLessThanOrEqual(METRIC_SERIES_BOUND);
  });

  it('runs 1,000+ threads, with threads still running in the middle of the chain', { timeout: 600_000 }, async () => {
    keepers.push(await h.json<CommandJson>(['generate-epic', '--project', 'keep', '--epic', 'K1']));
    for (let i = 0; i < ROUNDS; i++) {
      if (i === 10) keepers.push(await h.json<CommandJson>(['generate-epic', '--project', 'keep', '--epic', 'K2']));
      last = await round(i > 0);
    }
    const text = await metricsText();
    parseExposition(text);
    // No thread or item ids in labels: 1,071 threads later, exactly the same series.
    expect(seriesCount(text)).toBe(seriesBefore);
    expect(text).toContain(`combine_threads{status="complete"} ${ROUNDS * (EPICS + 1)}`);
    expect(text).toContain('combine_calls_in_flight 2');
    keeperLedgers = await Promise.all(keepers.map((k) => h.json(['ledger', k.thread_id])));
    for (const k of keepers) expect((await h.json<ThreadJson>(['thread', k.thread_id])).status).toBe('running');
  });

  it('prunes the old threads; ledger verify stays clean; running threads and the newest run are untouched', async () => {
    const before = await h.json(['ledger', 'verify']);
    expect(before.ok).toBe(true);
    const dry = await h.json(['prune', '--older-than', '1ms', '--dry-run']);
    expect(dry).toMatchObject({ dry_run: true, threads: (ROUNDS - 1) * (EPICS + 1) });

    const pruned = await h.json(['prune', '--older-than', '1ms']);
    expect(pruned).toMatchObject({ dry_run: false, threads: (ROUNDS - 1) * (EPICS + 1), work_items: (ROUNDS - 1) * EPICS });
    expect(pruned.ledger_entries).toBe((ROUNDS - 1) * EPICS * 4); // prompt, response, parse_report, mutation_report
    expect(pruned.checkpoints).toBeGreaterThanOrEqual(2); // the keepers' entries split the removed range

    const after = await h.json(['ledger', 'verify']);
    expect(after).toMatchObject({ ok: true, first_break: null, pruned_entries: pruned.ledger_entries, head_hash: before.head_hash });
    expect(after.entries).toBe(before.entries - pruned.ledger_entries);

    const threads = await h.json<ThreadJson[]>(['threads', '--limit', '10000']);
    expect(threads).toHaveLength(EPICS + 1 + keepers.length);
    expect(threads.map((t) => t.thread_id)).toContain(last.thread_id);
    for (const [i, k] of keepers.entries()) {
      expect((await h.json<ThreadJson>(['thread', k.thread_id])).status).toBe('running');
      expect(await h.json(['ledger', k.thread_id])).toEqual(keeperLedgers[i]);
    }
    // The completed backlog is still there, and a repeated request is still recognised as done.
    const again = await h.json<CommandJson>(['generate-all', '--project', 'big']);
    expect(again).toMatchObject({ thread_id: last.thread_id, status: 'complete' });
  });

  it('keeps extending the same chain after a prune, and a second prune bridges adjacent gaps', async () => {
    await round(true);
    await round(true);
    for (const k of keepers) await h.json(['cancel', k.thread_id]);
    const second = await h.json(['prune', '--older-than', '1ms']);
    expect(second.threads).toBe(2 * (EPICS + 1) + keepers.length);
    const verify = await h.json(['ledger', 'verify']);
    expect(verify).toMatchObject({ ok: true, entries: EPICS * 4 });
    expect(await h.queryOne('SELECT count(*) AS n FROM llm_threads')).toEqual({ n: EPICS + 1 });
    // SQLite returns pruned pages to the file only with incremental auto-vacuum; Postgres's autovacuum does this itself.
    if (TEST_BACKEND === 'sqlite') {
      const db = h.openDb();
      try {
        expect(db.pragma('auto_vacuum', { simple: true })).toBe(2); // INCREMENTAL: pruned pages are returned
      } finally {
        db.close();
      }
    }
  });
});
