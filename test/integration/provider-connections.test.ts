/** Provider calls reuse keep-alive connections to their endpoint: the provider sees a few TCP connections, not one per call. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Harness, project, type ThreadJson } from '../helpers/harness.js';

describe('24 calls through max_in_flight 4', () => {
  let h: Harness;
  let final: ThreadJson;
  beforeAll(async () => {
    h = await Harness.start({ latencyMs: 20 });
    h.writeConfig({ engine: { max_in_flight: 4 } });
    await h.importProject(project('pc', 24));
    const r = await h.cli(['generate-all', '--project', 'pc', '--follow', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    final = lines[lines.length - 1];
  });
  afterAll(() => h.cleanup());

  it('all complete, one call each', () => {
    expect(final).toMatchObject({ kind: 'story_generate_all', status: 'complete' });
    expect(final.child_summary).toEqual({ complete: 24 });
    expect(h.sim.calls).toHaveLength(24);
    expect(h.sim.calls.every((c) => c.status === 200 && c.traceparent !== null)).toBe(true);
  });

  it('the provider saw a handful of connections, reused across calls (4 expected: one per call slot)', () => {
    expect(h.sim.connections).toBeGreaterThanOrEqual(1);
    expect(h.sim.connections).toBeLessThanOrEqual(12);
  });
});
