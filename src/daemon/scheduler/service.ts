/**
 * Schedule commands and queries as the router exposes them: add, list, pause, resume, remove, runs,
 * and reading a project's briefing. Commands are one writer transaction each and validate everything
 * before writing; a change wakes the scheduler so its timer follows.
 */
import { newId } from '../../db/ids.js';
import type { Db } from '../../db/connection.js';
import { getKeyedDocument, getLatestKeyedDocument, getProject } from '../../db/projects.js';
import type { ScheduleRow } from '../../db/schema.js';
import { getSchedule, insertSchedule, listPendingRunsForProject, listScheduleRuns, listSchedules, transitionSchedule } from '../../db/schedules.js';
import { isCalendarDate } from '../../domain/briefing.js';
import { BRIEFING } from '../../domain/operations.js';
import {
  CATCH_UP_POLICIES,
  SCHEDULE_OPERATIONS,
  canTransitionSchedule,
  checkCron,
  localDate,
  nextFireTimes,
  type ScheduleStatus,
} from '../../domain/schedule.js';
import { CommandError } from '../commands.js';
import type { Clock } from '../engine/engine.js';
import type { Tx } from '../engine/tx.js';
import type { Scheduler } from './scheduler.js';
import { briefingView, runView, scheduleView, type BriefingView, type RunView, type ScheduleView } from './views.js';

export interface NewSchedule {
  project_id: string;
  operation: string;
  cron: string;
  timezone: string;
  catch_up: string;
}

type Write = <T>(fn: (tx: Tx) => T) => Promise<T>;

export class ScheduleService {
  constructor(
    private readonly db: Db,
    private readonly write: Write,
    private readonly clock: Clock,
    private readonly scheduler: Scheduler,
  ) {}

  /** Creates an active schedule; its first period is the first fire time after now. */
  async add(input: NewSchedule): Promise<ScheduleView & { upcoming: string[] }> {
    if (!(SCHEDULE_OPERATIONS as readonly string[]).includes(input.operation)) {
      throw new CommandError('BAD_REQUEST', `--operation: "${input.operation}" is not one of ${SCHEDULE_OPERATIONS.join(', ')}`);
    }
    if (!(CATCH_UP_POLICIES as readonly string[]).includes(input.catch_up)) {
      throw new CommandError('BAD_REQUEST', `--catch-up: "${input.catch_up}" is not one of ${CATCH_UP_POLICIES.join(', ')}`);
    }
    const check = checkCron(input.cron, input.timezone);
    if (!check.ok) throw new CommandError('BAD_REQUEST', check.error);
    const row = await this.write((tx) => {
      if (!getProject(tx.db, input.project_id)) {
        throw new CommandError('NOT_FOUND', `no project "${input.project_id}" (see \`combine project list\`)`);
      }
      const s: ScheduleRow = { id: newId(), ...input, status: 'active', active_from: tx.now, created_at: tx.now, updated_at: tx.now };
      insertSchedule(tx.db, s);
      return s;
    });
    this.scheduler.wake();
    const now = this.clock.now();
    return { ...scheduleView(this.db, row, now), upcoming: nextFireTimes(row, now, 3).map((t) => new Date(t).toISOString()) };
  }

  list(includeRemoved: boolean): ScheduleView[] {
    const now = this.clock.now();
    return listSchedules(this.db, includeRemoved).map((s) => scheduleView(this.db, s, now));
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
    const row = await this.write((tx) => {
      const s = getSchedule(tx.db, id);
      if (!s) throw new CommandError('NOT_FOUND', `no schedule "${id}" (see \`combine schedule list\`)`);
      if (s.status === to) return s;
      if (!canTransitionSchedule(s.status as ScheduleStatus, to)) {
        throw new CommandError('CONFLICT', `schedule ${id} is ${s.status}; it cannot become ${to}`);
      }
      transitionSchedule(tx.db, { id, from: s.status as ScheduleStatus, to, now: tx.now });
      return getSchedule(tx.db, id)!;
    });
    this.scheduler.wake();
    return scheduleView(this.db, row, this.clock.now());
  }

  runs(scheduleId: string | null, limit: number): RunView[] {
    if (scheduleId !== null && !getSchedule(this.db, scheduleId)) {
      throw new CommandError('NOT_FOUND', `no schedule "${scheduleId}" (see \`combine schedule list\`)`);
    }
    return listScheduleRuns(this.db, { schedule_id: scheduleId, limit }).map((r) => runView(this.db, r));
  }

  /**
   * The briefing of a project for a date (default: the newest). A briefing still being generated is
   * not ready: it is reported as such, never shown half-made.
   */
  briefing(projectId: string, date: string | null): BriefingView {
    if (date !== null && !isCalendarDate(date)) throw new CommandError('BAD_REQUEST', `--date: "${date}" is not a date (YYYY-MM-DD)`);
    if (!getProject(this.db, projectId)) throw new CommandError('NOT_FOUND', `no project "${projectId}" (see \`combine project list\`)`);
    const doc = date === null ? getLatestKeyedDocument(this.db, projectId, BRIEFING) : getKeyedDocument(this.db, projectId, BRIEFING, date);
    if (doc) return briefingView(doc);
    const pending = listPendingRunsForProject(this.db, projectId, 'briefing').filter((r) => date === null || localDate(r.period_at, r.timezone) === date);
    if (pending.length > 0) {
      throw new CommandError('CONFLICT', `the briefing of "${projectId}"${date ? ` for ${date}` : ''} is not ready yet: run ${pending[0]!.id} is pending`, 'NOT_READY');
    }
    throw new CommandError(
      'NOT_FOUND',
      `project "${projectId}" has no briefing${date ? ` for ${date}` : ''} (schedule one: combine schedule add --project ${projectId} --operation briefing --cron "0 8 * * *")`,
    );
  }
}
