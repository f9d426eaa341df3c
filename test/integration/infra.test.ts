/** Infrastructure failure: the database stays locked past busy_timeout. */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, project, type CommandJson } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

describe('storage failure', () => {
  it('refuses commands with nothing stored, turns health unready with one log line, and recovers', async () => {
    h = await Harness.start();
    h.env.COMBINE_BUSY_TIMEOUT = '100ms';
    await h.importProject(project('p', 1));
    const blocker = new Database(join(h.home, 'combine.db'));
    blocker.exec('BEGIN IMMEDIATE'); // another process holds the write lock
    try {
      const refused = await h.cli(['generate-epic', '--project', 'p', '--epic', 'E1']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('storage failure');
      const health = await h.cli(['health', '--json']);
      expect(health.code).toBe(1);
      expect(JSON.parse(health.stdout).checks.database).toBe(false);
    } finally {
      blocker.exec('ROLLBACK');
      blocker.close();
    }
    expect(h.logText().match(/storage failure: writes are failing/g)).toHaveLength(1);
    expect(await h.json(['threads'])).toEqual([]); // the refused command stored nothing
    const ok = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    expect((await h.waitForEnd(ok.thread_id)).status).toBe('complete');
    expect((await h.json(['health'])).ready).toBe(true);
  });
});
