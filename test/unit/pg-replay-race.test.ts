/**
 * Two replays of one recorded answer at once (issue 18): two daemons on one Postgres both run
 * `combine replay --apply` on the same failed thread. The one that commits first queues the answer; the
 * other, which read the thread `failed` before that commit, is refused as if it had come second, and the
 * answer is applied once: one queued item, one mutation, no provider call, `ledger verify` ok. The race
 * is pinned with a gate: the first replay holds its transaction open until the second waits for it.
 * Real Postgres, two in-process daemons and the real simulator.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CommandError } from '../../src/core/errors.js';
import { App } from '../../src/daemon/app.js';
import { loadConfig, operationSettingsOf } from '../../src/daemon/config/config.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { applyReplay } from '../../src/ledger/replay.js';
import { verifyLedger } from '../../src/ledger/verify.js';
import { loadOperations } from '../../src/operations/loader.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { project, waitUntil } from '../helpers/harness.js';
import { aWriteWaitsForALock, backendPid, openRaceDatabase, type RaceDatabase } from '../helpers/pg-race.js';
import type { PgSql } from '../../src/db/pg/sql.js';

let sim: Simulator;
let db: RaceDatabase;
let reader: PgSql;
const dirs: string[] = [];
const apps: App[] = [];

beforeEach(async () => {
  sim = await createSimulator({ latencyMs: 1 });
  db = await openRaceDatabase();
  reader = db.reader;
});
afterEach(async () => {
  for (const app of apps.splice(0)) await app.shutdown(0);
  await db?.drop();
  await sim?.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A home on the shared database whose validator wants at least `minStories` stories per epic. */
async function home(minStories: number) {
  const dir = mkdtempSync(join(tmpdir(), 'cmb-pg-replay-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ operations: { story_generate_epic: { validation: { min_stories: minStories } } } }));
  const config = loadConfig(dir, { OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'k', COMBINE_DATABASE_URL: db.database.url });
  const operations = await loadOperations(dir, [], operationSettingsOf(config));
  return { config, operations };
}

async function daemon(minStories: number): Promise<App> {
  const { config, operations } = await home(minStories);
  const app = new App({ config, logger: createLogger(null, 'silent'), random: () => 0.5, operations });
  apps.push(app);
  await app.start();
  return app;
}

const count = async (text: string, params: (string | number)[]) => (await reader.get<{ n: number }>(text, params))!.n;
const statusOf = async (id: string) => (await reader.get<{ status: string }>('SELECT status FROM llm_threads WHERE id = ?', [id]))!.status;

describe('two daemons replaying the same failed thread at once', () => {
  it('one queues the answer, the other is refused; it is applied once, with no call, and the ledger verifies', async () => {
    // A validator too strict for the simulator's 3 to 5 stories: the thread fails with its answer recorded.
    const strict = await daemon(9);
    await strict.projects.import(project('p', 1));
    const thread = (await strict.threads.run('story_generate_epic', { project_id: 'p', epic_id: 'E1' }, { force: false, deadlineMs: null, createdBy: null }))
      .thread_id;
    await waitUntil(async () => (await statusOf(thread)) === 'failed', 'the thread to fail', 30_000);
    await strict.shutdown(0);
    apps.length = 0;
    const calls = sim.calls.length;

    // The rule relaxed: daemon 1's replay commits only once daemon 2's has read the thread failed and waits.
    const relaxed = await home(3);
    let go!: () => void;
    const gate = new Promise<void>((r) => (go = r));
    let reached!: (pid: number) => void;
    const queued = new Promise<number>((r) => (reached = r));
    const first = db.write(async (tx) => {
      const report = await applyReplay(tx, relaxed.operations, thread, null);
      reached(await backendPid(tx.sql));
      await gate;
      return report;
    });
    const firstPid = await queued;
    const other = await daemon(3);
    const second = other.threads.replay(thread, { apply: true, responseSeq: null });
    second.catch(() => {});
    await waitUntil(() => aWriteWaitsForALock(reader, firstPid), 'the second replay to wait for the first');
    go();
    expect((await first).applied).toMatchObject({ sequence: 2, status: 'queued' });
    const refused = await second.then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(CommandError);
    expect((refused as CommandError).kind).toBe('CONFLICT');

    // Daemon 2's engine applies the one queued answer (woken: daemon 1's write here sends no notification).
    other.engine.wake();
    await waitUntil(async () => (await statusOf(thread)) === 'complete', 'the replayed answer to be applied', 30_000);
    expect(await count('SELECT count(*)::int AS n FROM llm_work_items WHERE thread_id = ?', [thread])).toBe(2);
    expect(await count('SELECT count(*)::int AS n FROM mutations WHERE thread_id = ?', [thread])).toBe(1);
    expect(await count("SELECT count(*)::int AS n FROM llm_ledger_entries WHERE thread_id = ? AND entry_type = 'mutation_report'", [thread])).toBe(1);
    expect(sim.calls.length).toBe(calls);
    expect(await verifyLedger(reader)).toMatchObject({ ok: true });
  }, 60_000);
});
