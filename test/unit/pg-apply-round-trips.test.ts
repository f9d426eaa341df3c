/**
 * The statements a shared closure of two answers to one document sends on Postgres (issue 18 target 9:
 * each statement that is a round trip of its own costs the daemon and the server CPU per item). Pinned on
 * real Postgres with the real shared closure (`itemWrites`), the real writer and the built-in
 * `story_generate_epic` (its backlog stored in parts), two children of one orchestration:
 * - the second answer's epic goes after the first's: its part takes its neighbour's ord in its own
 *   INSERT … SELECT, with no read of the ords (`SELECT part_key … FROM document_parts`);
 * - the backlog's parts and next versions ride in the COMMIT's query, each version's UPDATE and its new part's
 *   INSERT as one statement there, though the closure writes the
 *   document twice (two answers of one project: db/document-parts-queued.ts `writeDocumentsAgain`): the second
 *   apply plans from the head the closure holds and the parts it queued, no part's INSERT a round trip of its own;
 * - each item's scope lock row is released, then its thread ended, both items', and then the orchestration
 *   locked once for its close check, all in one statement after the last apply
 *   (`combine_release_end_threads_lock_parents`, engine/ends-together.ts), not a DELETE then the end per item,
 *   nor one end per item (`combine_release_end_thread_lock_parent`) while the closure holds the backlog's head.
 * - the ended threads' runs finalized in the COMMIT's query (the daemon's own `threadsEnded` hook), no
 *   `schedule_runs` statement a round trip of its own, and the two children's runs by one statement there
 *   (one per child before: a statement each, ~1 per item at 3 daemons), each run with its own usage;
 * - each item's move to applied and its mutation row in one statement of the COMMIT's query (two before).
 * The outcome is the same as before: both applied, consecutive versions, the orchestration complete, the lock
 * rows gone; and an item whose lock row is gone is refused in that one statement, nothing of it committed.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { readWholeDocument } from '../../src/db/document-parts.js';
import { getThread, insertThread } from '../../src/db/threads.js';
import { finishAnswer } from '../../src/daemon/engine/completer.js';
import { claimSchedulePeriod, insertSchedule, linkScheduleRunThread } from '../../src/db/schedules.js';
import { itemWrites } from '../../src/daemon/engine/item-pipeline.js';
import type { EngineHooks } from '../../src/daemon/engine/tx.js';
import { finalizeRunsOfThreads } from '../../src/daemon/scheduler/finalize.js';
import { useAnswerClosures } from '../helpers/pg-answer-closures.js';
import { testThreadRow } from '../helpers/rows.js';

/** The daemon's own `threadsEnded` hook (daemon/app.ts): finalizing the runs the ended threads work for. */
const APP_HOOKS: EngineHooks = { threadsEnded: (tx, threads, status) => finalizeRunsOfThreads(tx, threads, status), budgeted: () => false };

describe('a shared closure of two answers to one document, on Postgres', () => {
  const c = useAnswerClosures(APP_HOOKS);
  beforeAll(async () => {
    await insertThread(c.db.reader, { ...testThreadRow('o'), kind: 'story_generate_all', status: 'running' });
    const responses = [await c.answered('a', 1), await c.answered('b', 2)];
    // A scheduled run waits for each child and one for the orchestration (a run joins a thread already at work).
    await scheduledRuns(['t-a', 't-b', 't-o']);
    const finishes = itemWrites(c.write, c.ctx, 'postgres');
    c.record();
    const outcomes = await Promise.all(['a', 'b'].map((itemId, i) => finishes.finish({ itemId, response: responses[i]!, resumed: false, sent: undefined })));
    c.stop();
    expect(outcomes).toEqual(['applied', 'applied']);
    // One closure: one COMMIT's query.
    expect(c.sent.filter((text) => /\bCOMMIT\b/.test(text))).toHaveLength(1);
  });

  it('reads no ords: the second epic goes after the first, its part placed by its own insert', () => {
    expect(c.count(/^SELECT part_key\b.* FROM document_parts/s)).toBe(0);
    // Both parts' inserts in the COMMIT's query (the second one's prepared there: it is guarded), none on its own.
    expect(c.count(/^INSERT INTO document_parts/)).toBe(0);
    expect(c.sent.find((text) => /\bCOMMIT\b/.test(text))).toMatch(/INSERT INTO document_parts .* SELECT .* n\.ord \+ /s);
  });

  it("writes the backlog's next versions in the COMMIT's query, though it writes the document twice", () => {
    expect(c.count(/^UPDATE documents/)).toBe(0);
    // Prepared there on first use, then executed once per version (version 3 below: both ran).
    expect(c.sent.find((text) => /\bCOMMIT\b/.test(text))).toMatch(/UPDATE documents SET content/);
    // Each answer's new part's INSERT in one statement with its version's UPDATE (two before), in the order written.
    const commit = c.sent.find((text) => /\bCOMMIT\b/.test(text))!;
    expect(executionsOf(commit, /^WITH changed AS \(UPDATE documents [\s\S]*INSERT INTO document_parts/)).toBe(2);
    expect(executionsOf(commit, /^(?:WITH changed AS \()?INSERT INTO document_parts/)).toBe(0);
  });

  it("releases both items' lock rows and ends their threads in one statement", () => {
    // (The orchestration's close still releases the locks it owns: `DELETE FROM locks WHERE owner`.)
    expect(c.count(/^DELETE FROM locks WHERE scope = /)).toBe(0);
    expect(c.count(/^SELECT combine_end_thread_lock_parent/)).toBe(0);
    expect(c.count(/^SELECT combine_release_end_thread_lock_parent\(/)).toBe(0);
    expect(c.count(/^SELECT combine_release_end_threads_lock_parents\(/)).toBe(1);
  });

  it("finalizes the ended threads' runs in the COMMIT's query, as one answer alone does: no schedule_runs round trip", () => {
    expect(c.sent.filter((text) => !/\bCOMMIT\b/.test(text) && /schedule_runs/.test(text))).toEqual([]);
    expect(c.sent.find((text) => /\bCOMMIT\b/.test(text))).toMatch(/UPDATE schedule_runs/);
  });

  it("finalizes the two children's runs with one statement, the orchestration's with its own, each with its usage", async () => {
    const commit = c.sent.find((text) => /\bCOMMIT\b/.test(text))!;
    expect(executionsOf(commit, /UPDATE schedule_runs/)).toBe(2);
    const runs = await c.db.reader.all<{
      thread_id: string;
      status: string;
      responses: number;
      prompt_tokens: number;
      completion_tokens: number;
      total_tokens: number;
    }>('SELECT thread_id, status, responses, prompt_tokens, completion_tokens, total_tokens FROM schedule_runs ORDER BY thread_id');
    // Each answer used 10 prompt, 5 completion, 15 total tokens (`paidAnswerOf`); the orchestration's run sums its children's.
    const usage = (r: (typeof runs)[number]) => [r.responses, r.prompt_tokens, r.completion_tokens, r.total_tokens].map(Number);
    expect(runs.map((r) => [r.thread_id, r.status, ...usage(r)])).toEqual([
      ['t-a', 'complete', 1, 10, 5, 15],
      ['t-b', 'complete', 1, 10, 5, 15],
      ['t-o', 'complete', 2, 20, 10, 30],
    ]);
  });

  it('moves each item to applied and records its mutation in one statement of the COMMIT’s query', () => {
    const commit = c.sent.find((text) => /\bCOMMIT\b/.test(text))!;
    // Each statement's text is one part of `executionsOf`'s: both in one text, run once per item, none alone.
    expect(executionsOf(commit, /UPDATE llm_work_items\s+SET status = 'applied'[\s\S]*INSERT INTO mutations/)).toBe(2);
    expect(executionsOf(commit, /^INSERT INTO mutations/)).toBe(0);
  });

  it('applies both as before: consecutive versions, the orchestration complete, the lock rows gone', async () => {
    const backlogId = (await c.db.reader.get<{ id: string }>("SELECT id FROM documents WHERE project_id = 'p' AND doc_type = 'story_backlog'"))!.id;
    const backlog = (await readWholeDocument(c.db.reader, backlogId))!;
    expect(backlog.version).toBe(3);
    expect((JSON.parse(backlog.content) as { epics: { epic_id: string }[] }).epics.map((e) => e.epic_id)).toEqual(['E1', 'E2']);
    const mutations = await c.db.reader.all<{ work_item_id: string; from_version: number; to_version: number }>(
      'SELECT work_item_id, from_version, to_version FROM mutations ORDER BY from_version',
    );
    expect(mutations.map((m) => [m.work_item_id, m.from_version, m.to_version])).toEqual([
      ['a', 1, 2],
      ['b', 2, 3],
    ]);
    expect((await getThread(c.db.reader, 't-o'))!.status).toBe('complete');
    expect(await c.db.reader.all('SELECT scope FROM locks')).toEqual([]);
  });

  /** A schedule of project p with a pending run linked to each of these threads. */
  async function scheduledRuns(threadIds: readonly string[]): Promise<void> {
    const s = { id: 'sched', project_id: 'p', operation: 'story_generate_all', input: '{}', cron: '0 * * * *', timezone: 'UTC', catch_up: 'skip' };
    await insertSchedule(c.db.reader, { ...s, status: 'active', active_from: 0, created_at: 0, updated_at: 0 });
    for (const [i, thread_id] of threadIds.entries()) {
      const run = (await claimSchedulePeriod(c.db.reader, { id: `run-${i}`, schedule_id: 'sched', period_key: `k${i}`, period_at: i, owner: 'me', now: 1 }))!;
      await linkScheduleRunThread(c.db.reader, { id: run.id, owner: 'me', claimed_at: 1, thread_id });
    }
  }
});

/**
 * How many times a COMMIT's query runs a statement whose text matches `pattern`: the `EXECUTE`s of each name
 * it prepares such a statement under (commit-query.ts), and the statements it runs inline.
 */
function executionsOf(commit: string, pattern: RegExp): number {
  const parts = commit.split(';\n');
  const names = parts.flatMap((p) => {
    const m = /^PREPARE (\w+) AS (.*)$/s.exec(p);
    return m && pattern.test(m[2]!) ? [m[1]!] : [];
  });
  const inline = parts.filter((p) => !p.startsWith('PREPARE ') && pattern.test(p)).length;
  return inline + parts.filter((p) => names.some((name) => p.startsWith(`EXECUTE ${name}(`))).length;
}

describe('an answer whose item no longer holds its lock row, on Postgres', () => {
  const c = useAnswerClosures(APP_HOOKS);
  it('is refused in the release-and-end statement: nothing of it commits', async () => {
    await insertThread(c.db.reader, { ...testThreadRow('o'), kind: 'story_generate_all', status: 'running' });
    const response = await c.answered('a', 1);
    await c.db.reader.run('DELETE FROM locks WHERE owner = ?', ['a']);
    await expect(c.write((tx) => finishAnswer(tx, c.ctx, 'a', response, false))).rejects.toThrow(/work item a no longer holds its lock/);
    expect((await getThread(c.db.reader, 't-a'))!.status).toBe('running');
    expect((await getThread(c.db.reader, 't-o'))!.status).toBe('running');
    expect(await c.db.reader.all('SELECT id FROM mutations')).toEqual([]);
  });
});
