/** The schedule and briefing commands through the real CLI and daemon: JSON shapes, errors, exit codes. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Harness, project } from '../helpers/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
  await h.importProject(project('p', 2));
});
afterAll(() => h?.cleanup());

describe('combine schedule / briefing', () => {
  it('add → list → pause → resume → remove, with stable JSON shapes', async () => {
    const s = await h.json(['schedule', 'add', '--project', 'p', '--operation', 'briefing', '--cron', '0 8 * * 1-5', '--tz', 'Europe/Berlin']);
    expect(s).toMatchObject({
      project_id: 'p',
      operation: 'briefing',
      cron: '0 8 * * 1-5',
      timezone: 'Europe/Berlin',
      catch_up: 'latest',
      status: 'active',
      last_run: null,
    });
    expect(s.upcoming).toHaveLength(3);
    expect(Object.keys(s).sort()).toEqual(
      ['catch_up', 'created_at', 'cron', 'last_run', 'next_run_at', 'operation', 'project_id', 'schedule_id', 'status', 'timezone', 'upcoming'].sort(),
    );
    expect((await h.json<any[]>(['schedule', 'list'])).map((x) => x.schedule_id)).toEqual([s.schedule_id]);
    expect(await h.json(['schedule', 'pause', s.schedule_id])).toMatchObject({ status: 'paused', next_run_at: null });
    expect(await h.json(['schedule', 'resume', s.schedule_id])).toMatchObject({ status: 'active' });
    expect(await h.json(['schedule', 'remove', s.schedule_id])).toMatchObject({ status: 'removed' });
    expect(await h.json(['schedule', 'list'])).toEqual([]);
    expect((await h.json<any[]>(['schedule', 'list', '--all'])).map((x) => x.status)).toEqual(['removed']);
    expect(await h.json(['schedule', 'runs', s.schedule_id])).toEqual([]);

    const resumeRemoved = await h.cli(['schedule', 'resume', s.schedule_id]);
    expect(resumeRemoved.code).toBe(1);
    expect(resumeRemoved.stderr).toContain('is removed');
  });

  it('refuses bad input with exit 2 and a message naming what was wrong, storing nothing', async () => {
    const cases: [string[], RegExp][] = [
      [['--cron', '61 8 * * *', '--operation', 'briefing'], /"61 8 \* \* \*" is not a cron expression/],
      [['--cron', '0 8 * * *', '--operation', 'briefing', '--tz', 'Mars/Olympus'], /"Mars\/Olympus" is not an IANA time zone/],
      [['--cron', '0 8 * * *', '--operation', 'summarize'], /--operation: "summarize" is not one of briefing, generate-all/],
      [['--cron', '0 8 * * *', '--operation', 'briefing', '--catch-up', 'all'], /--catch-up: "all"/],
    ];
    for (const [args, message] of cases) {
      const r = await h.cli(['schedule', 'add', '--project', 'p', ...args]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    const noProject = await h.cli(['schedule', 'add', '--project', 'nope', '--cron', '0 8 * * *', '--operation', 'briefing']);
    expect(noProject.code).toBe(2);
    expect(noProject.stderr).toContain('no project "nope"');
    expect((await h.cli(['schedule', 'pause', 'no-such-id'])).code).toBe(2);
    expect((await h.cli(['schedule', 'runs', 'no-such-id'])).code).toBe(2);
    expect(await h.json(['schedule', 'list', '--all'])).toHaveLength(1); // only the first test's schedule
  });

  it('briefing: no briefing yet is exit 2 with a hint; a bad date is exit 2', async () => {
    const none = await h.cli(['briefing', 'p']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('has no briefing');
    const badDate = await h.cli(['briefing', 'p', '--date', '2026-13-40']);
    expect(badDate.code).toBe(2);
    expect(badDate.stderr).toContain('--date');
  });

  it('every new command has --help with examples', async () => {
    for (const args of [['schedule', 'add'], ['schedule', 'list'], ['schedule', 'pause'], ['schedule', 'runs'], ['briefing']]) {
      const r = await h.cli([...args, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/Examples?:/);
      expect(r.stdout).toContain('--json');
    }
  });
});
