import { describe, expect, it } from 'vitest';
import { RUN_TRANSITIONS, checkCron, duePeriod, localDate, nextFireAt, runStatusesLeadingTo } from '../../src/domain/schedule.js';
import { simulatedBriefing } from '../../src/operations/builtin/project_briefing/simulate.js';
import { expectGolden } from '../helpers/golden.js';
import { builtinRequest, checkBuiltinAnswer, threadsOf } from '../helpers/operations.js';

const parseBriefingAnswer = (content: string) => checkBuiltinAnswer('project_briefing', content);

const at = (iso: string) => Date.parse(iso);
const hourly = { cron: '0 * * * *', timezone: 'UTC', catch_up: 'latest', active_from: at('2026-03-01T00:00:00Z') };

describe('due periods', () => {
  it('a tick at exactly the fire time claims that period', () => {
    expect(duePeriod(hourly, at('2026-03-01T05:00:00.000Z'), 60_000)).toBe(at('2026-03-01T05:00:00Z'));
    expect(duePeriod(hourly, at('2026-03-01T04:59:59.999Z'), 60_000)).toBe(at('2026-03-01T04:00:00Z'));
  });

  it('latest: many missed periods collapse into the newest; skip: only when on time', () => {
    const late = at('2026-03-01T05:40:00Z');
    expect(duePeriod(hourly, late, 60_000)).toBe(at('2026-03-01T05:00:00Z'));
    expect(duePeriod({ ...hourly, catch_up: 'skip' }, late, 60_000)).toBeNull();
    expect(duePeriod({ ...hourly, catch_up: 'skip' }, at('2026-03-01T05:00:30Z'), 60_000)).toBe(at('2026-03-01T05:00:00Z'));
  });

  it('never claims a period before the schedule became active', () => {
    expect(duePeriod({ ...hourly, active_from: at('2026-03-01T05:10:00Z') }, at('2026-03-01T05:40:00Z'), 60_000)).toBeNull();
  });

  it('reads the expression in the time zone, across a DST change', () => {
    const berlin = { cron: '0 8 * * *', timezone: 'Europe/Berlin' };
    expect(nextFireAt(berlin, at('2026-03-28T12:00:00Z'))).toBe(at('2026-03-29T06:00:00Z')); // CEST starts on the 29th
    expect(nextFireAt(berlin, at('2026-03-27T12:00:00Z'))).toBe(at('2026-03-28T07:00:00Z'));
    expect(localDate(at('2026-03-01T23:30:00Z'), 'Europe/Berlin')).toBe('2026-03-02');
    expect(localDate(at('2026-03-01T23:30:00Z'), 'UTC')).toBe('2026-03-01');
  });

  it('rejects bad expressions and unknown time zones with a message naming them', () => {
    expect(checkCron('0 8 * * *', 'UTC')).toEqual({ ok: true });
    expect(checkCron('*/10 * * * * *', 'UTC')).toEqual({ ok: true });
    expect(checkCron('61 8 * * *', 'UTC')).toMatchObject({ ok: false, error: expect.stringContaining('"61 8 * * *"') });
    expect(checkCron('0 8 * *', 'UTC')).toMatchObject({ ok: false });
    expect(checkCron('0 8 * * *', 'Mars/Olympus')).toMatchObject({ ok: false, error: expect.stringContaining('Mars/Olympus') });
    expect(checkCron('0 0 30 2 *', 'UTC')).toMatchObject({ ok: false, error: expect.stringContaining('never fires') });
  });

  it('run transitions: a pending run ends once; a failed run can complete after a retry; nothing else', () => {
    expect(runStatusesLeadingTo('complete')).toEqual(['pending', 'failed']);
    expect(runStatusesLeadingTo('failed')).toEqual(['pending']);
    expect(RUN_TRANSITIONS.complete).toEqual([]);
  });
});

describe('briefing prompt and answer', () => {
  const epics = [
    { id: 'checkout', title: 'Checkout', description: '' },
    { id: 'returns', title: 'Returns', description: '' },
  ];
  const story = { title: 's', description: 'd', acceptance_criteria: ['c'] };
  const backlog = { epics: [{ epic_id: 'checkout', title: 'Checkout', stories: Array(5).fill(story), thread_id: 't-1', work_item_id: 'w', generated_at: 0 }] };
  const failed = [
    {
      thread_id: 't-2',
      kind: 'story_generate_epic',
      target_ref: { epic_id: 'returns' },
      status: 'failed',
      error_code: 'SCHEMA_INVALID',
      created_at: '2026-03-01T07:00:00.000Z',
    },
  ];
  const fixture = {
    project: { id: 'acme', name: 'ACME Shop' },
    documents: { epic_architecture: { epics }, story_backlog: backlog },
    threads: threadsOf({ complete: 1, failed: 1 }, failed, []),
  };
  const renderBriefingPrompt = () => builtinRequest('project_briefing', { project_id: 'acme', date: '2026-03-01' }, fixture);

  it('matches the golden rendering', () => {
    expectGolden('briefing-prompt.json', `${JSON.stringify(renderBriefingPrompt(), null, 2)}\n`);
  });

  it("the simulator's answer to it is a valid briefing that reflects the facts", () => {
    const request = renderBriefingPrompt();
    const answer = simulatedBriefing(request.messages.map((m) => m.content).join('\n'));
    const parsed = parseBriefingAnswer(JSON.stringify(answer));
    expect(parsed.ok).toBe(true);
    expect(answer.summary).toContain('5 stories across 1 of 2 epics; 1 failed');
    expect(answer.next_steps).toContain('Generate the stories of "Returns"');
  });

  it('rejects an answer that misses fields, naming them', () => {
    expect(parseBriefingAnswer('{"summary":"ok","highlights":[]}')).toMatchObject({
      ok: false,
      errors: expect.arrayContaining([expect.stringMatching(/^risks:/)]),
    });
    expect(parseBriefingAnswer('nope')).toMatchObject({ ok: false });
  });
});
