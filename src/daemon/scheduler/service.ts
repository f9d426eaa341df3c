/**
 * Schedule commands and queries as the router exposes them: add, list, pause, resume, remove, runs.
 * Commands are one writer transaction each and validate everything before writing; a change wakes the
 * scheduler so its timer follows.
 */
import type { Sql } from '../../core/sql.js';
import { getProject } from '../../db/projects.js';
import type { ScheduleRow } from '../../db/schema-schedules.js';
import { getSchedule, insertSchedule, listScheduleRuns, listSchedules, transitionSchedule } from '../../db/schedules.js';
import { CATCH_UP_POLICIES, canTransitionSchedule, checkCron, nextFireTimes, type ScheduleStatus } from '../../domain/schedule.js';
import type { OperationRegistry } from '../../operations/registry.js';
import { SCHEDULE_ALIASES } from '../../operations/builtin/index.js';
import type { Tx } from '../engine/tx.js';
import { checkInput, requireOperation } from '../services/submit.js';
import { resolveScheduleId } from '../services/id-resolver.js';
import { scheduledRequest } from './request.js';
import type { Scheduler } from './scheduler.js';
import { runView, scheduleView, type RunView, type ScheduleView } from './views.js';
import { CommandError } from '../../core/errors.js';
import { newId } from '../../core/ids.js';
import type { Clock } from '../../core/clock.js';

export interface NewSchedule {
  project_id: string;
  /** An operation name, or an alias (`briefing`, `generate-all`). */
  operation: string;
  /** The input template of each run (see request.ts); none: `{}`. */
  input?: Record<string, unknown>;
  cron: string;
  timezone: string;
  catch_up: string;
}

type Write = <T>(fn: (tx: Tx) => T | Promise<T>) => Promise<T>;

export class ScheduleService {
  constructor(
    private readonly reader: Sql,
    private readonly write: Write,
    private readonly clock: Clock,
    private readonly scheduler: Scheduler,
    private readonly operations: OperationRegistry,
  ) {}

  /**
   * Creates an active schedule; its first period is the first fire time after now. The operation and
   * its input template are checked now (filled for the next period), so a bad one is refused here
   * rather than failing every period.
   */
  async add(input: NewSchedule): Promise<ScheduleView & { upcoming: string[] }> {
    if (!SCHEDULE_ALIASES[input.operation] && !this.operations.get(input.operation)) {
      const names = [...Object.keys(SCHEDULE_ALIASES), ...this.operations.list().map((o) => o.name)];
      throw new CommandError('BAD_REQUEST', `--operation: "${input.operation}" is not one of ${names.join(', ')}`);
    }
    if (!(CATCH_UP_POLICIES as readonly string[]).includes(input.catch_up)) {
      throw new CommandError('BAD_REQUEST', `--catch-up: "${input.catch_up}" is not one of ${CATCH_UP_POLICIES.join(', ')}`);
    }
    const check = checkCron(input.cron, input.timezone);
    if (!check.ok) throw new CommandError('BAD_REQUEST', check.error);
    const template = { operation: input.operation, input: JSON.stringify(input.input ?? {}), project_id: input.project_id, timezone: input.timezone };
    const sample = scheduledRequest(template, this.clock.now());
    checkInput(requireOperation(this.operations, sample.operation), sample.input, '--input');
    const row = await this.write(async (tx) => {
      if (!(await getProject(tx.sql, input.project_id))) {
        throw new CommandError('NOT_FOUND', `no project "${input.project_id}" (see \`combine project list\`)`);
      }
      const s: ScheduleRow = {
        id: newId(tx.now),
        ...input,
        input: template.input,
        status: 'active',
        active_from: tx.now,
        created_at: tx.now,
        updated_at: tx.now,
      };
      await insertSchedule(tx.sql, s);
      return s;
    });
    this.scheduler.wake();
    const now = this.clock.now();
    return { ...(await scheduleView(this.reader, row, now)), upcoming: nextFireTimes(row, now, 3).map((t) => new Date(t).toISOString()) };
  }

  /** The schedule a typed id (whole, or a unique prefix of it or of its short form) names; see id-resolver.ts. */
  scheduleId(text: string): Promise<string> {
    return resolveScheduleId(this.reader, text);
  }

  async list(includeRemoved: boolean): Promise<ScheduleView[]> {
    const now = this.clock.now();
    const views: ScheduleView[] = [];
    for (const s of await listSchedules(this.reader, includeRemoved)) views.push(await scheduleView(this.reader, s, now));
    return views;
  }

  pause(id: string): Promise<ScheduleView> {
    return this.transition(id, 'paused');
  }

  /** Periods that passed while paused are not caught up: the schedule runs from now on. */
  resume(id: string): Promise<ScheduleView> {
    return this.transition(id, 'active');
  }

  /** Stops the schedule for good; its runs stay listed (`schedule runs <id>`), and a pending run still ends. */
  remove(id: string): Promise<ScheduleView> {
    return this.transition(id, 'removed');
  }

  private async transition(id: string, to: ScheduleStatus): Promise<ScheduleView> {
    const row = await this.write(async (tx) => {
      const s = await getSchedule(tx.sql, id);
      if (!s) throw new CommandError('NOT_FOUND', `no schedule "${id}" (see \`combine schedule list\`)`);
      if (s.status === to) return s;
      if (!canTransitionSchedule(s.status as ScheduleStatus, to)) {
        throw new CommandError('CONFLICT', `schedule ${id} is ${s.status}; it cannot become ${to}`);
      }
      await transitionSchedule(tx.sql, { id, from: s.status as ScheduleStatus, to, now: tx.now });
      return (await getSchedule(tx.sql, id))!;
    });
    this.scheduler.wake();
    return scheduleView(this.reader, row, this.clock.now());
  }

  async runs(scheduleId: string | null, limit: number): Promise<RunView[]> {
    if (scheduleId !== null && !(await getSchedule(this.reader, scheduleId))) {
      throw new CommandError('NOT_FOUND', `no schedule "${scheduleId}" (see \`combine schedule list\`)`);
    }
    const views: RunView[] = [];
    for (const r of await listScheduleRuns(this.reader, { schedule_id: scheduleId, limit })) views.push(await runView(this.reader, r));
    return views;
  }
}
