/**
 * The one submit recipe for an orchestration's children: a child whose request already completed is
 * not paid for again (WS-ADR-035 §8: a complete thread is a no-op unless force); `--force` regenerates
 * every child; an orchestration is a thread role, so its lock is released by owner when it ends.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, project, type CommandJson } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

describe('orchestration children', () => {
  it('reuse the complete thread of their request; --force runs every child again', async () => {
    h = await Harness.start();
    await h.importProject(project('p', 3));
    const single = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E2']);
    expect((await h.waitForEnd(single.thread_id)).status).toBe('complete');

    const all = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    const end = await h.waitForEnd(all.thread_id);
    expect(end).toMatchObject({ kind: 'story_generate_all', status: 'complete', child_summary: { complete: 2 } });
    expect(h.sim.calls.map((c) => c.epic_id).sort()).toEqual(['E1', 'E2', 'E3']);

    const forced = await h.json<CommandJson>(['generate-all', '--project', 'p', '--force']);
    expect(await h.waitForEnd(forced.thread_id)).toMatchObject({ status: 'complete', child_summary: { complete: 3 } });
    expect(h.sim.calls).toHaveLength(6);
    expect(await h.queryOne('SELECT count(*) AS n FROM locks')).toEqual({ n: 0 });
    expect(await h.query('SELECT role, count(*) AS n FROM llm_threads GROUP BY role ORDER BY role')).toEqual([
      { role: 'orchestration', n: 2 },
      { role: 'work', n: 6 },
    ]);
  });
});
