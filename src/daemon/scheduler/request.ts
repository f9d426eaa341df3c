/**
 * What a schedule's run asks for: the schedule's operation (or the operation an alias such as
 * `briefing` stands for) with its input template filled for the run's period — `"{{date}}"` becomes the
 * period's date in the schedule's time zone, `"{{period}}"` its fire time (ISO 8601, UTC) — and
 * `project_id` set to the schedule's project unless the template sets it.
 */
import type { ScheduleRow } from '../../db/schema-schedules.js';
import { localDate } from '../../domain/schedule.js';
import { SCHEDULE_ALIASES, type OperationRequest } from '../../operations/builtin/index.js';

function fill(value: unknown, vars: Record<string, string>): unknown {
  if (typeof value === 'string') return value.replace(/\{\{(date|period)\}\}/g, (_, v: string) => vars[v]!);
  if (Array.isArray(value)) return value.map((v) => fill(v, vars));
  if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v, vars)]));
  return value;
}

export function scheduledRequest(schedule: Pick<ScheduleRow, 'operation' | 'input' | 'project_id' | 'timezone'>, periodAt: number): OperationRequest {
  const alias = SCHEDULE_ALIASES[schedule.operation];
  const template = { ...(alias?.input ?? {}), ...(JSON.parse(schedule.input) as Record<string, unknown>) };
  const input = fill(template, { date: localDate(periodAt, schedule.timezone), period: new Date(periodAt).toISOString() }) as Record<string, unknown>;
  return { operation: alias?.operation ?? schedule.operation, input: { project_id: schedule.project_id, ...input } };
}
