/**
 * Turns what a user typed into a row id, for every client (CLI, HTTP): the whole id, or a unique
 * prefix of the id or of its short (tail) form. A thread may also be named by one of its work items.
 * No match is NOT_FOUND; several are BAD_REQUEST listing them (exit 2), never a guess.
 */
import type { Sql } from '../../core/sql.js';
import { findScheduleIdsByPrefix, findThreadIdsByPrefix, findWorkItemIdsByPrefix } from '../../db/id-prefix.js';
import { getSchedule } from '../../db/schedules.js';
import { getThread } from '../../db/threads.js';
import { MIN_ID_PREFIX, prefixRange } from '../../domain/short-id.js';
import { CommandError } from '../../core/errors.js';

/** Candidates listed in an ambiguity error; one more is read to know there are more. */
const LISTED = 10;

function normalized(text: string, what: string): string {
  const q = text.trim().toLowerCase();
  if (q.length < MIN_ID_PREFIX) {
    throw new CommandError('BAD_REQUEST', `"${text}" is too short to name a ${what}: give at least ${MIN_ID_PREFIX} characters of its id`, 'ID_TOO_SHORT');
  }
  return q;
}

function ambiguous(text: string, what: string, lines: string[]): CommandError {
  const shown = lines.slice(0, LISTED).map((l) => `  ${l}`);
  const more = lines.length > LISTED ? ['  … and more'] : [];
  return new CommandError('BAD_REQUEST', [`"${text}" matches several ${what}s; give more characters of one of:`, ...shown, ...more].join('\n'), 'AMBIGUOUS_ID');
}

async function describeThread(sql: Sql, id: string): Promise<string> {
  const t = await getThread(sql, id);
  return t ? `${id}  ${t.kind}  ${t.status}  ${new Date(t.created_at).toISOString()}` : id;
}

/** The thread `text` names: a thread id or prefix, else a work item id or prefix (its thread). */
export async function resolveThreadId(sql: Sql, text: string): Promise<string> {
  if (await getThread(sql, text)) return text;
  const range = prefixRange(normalized(text, 'thread'));
  const threads = await findThreadIdsByPrefix(sql, range, LISTED + 1);
  if (threads.length === 1) return threads[0]!;
  if (threads.length > 1) throw ambiguous(text, 'thread', await Promise.all(threads.map((id) => describeThread(sql, id))));
  const items = await findWorkItemIdsByPrefix(sql, range, LISTED + 1);
  const owners = [...new Set(items.map((w) => w.thread_id))];
  if (owners.length === 1) return owners[0]!;
  if (owners.length > 1)
    throw ambiguous(
      text,
      'work item',
      items.map((w) => `${w.id}  (thread ${w.thread_id})`),
    );
  throw new CommandError('NOT_FOUND', `no thread "${text}"`);
}

/** The schedule `text` names: its id or a unique prefix of the id or of its short form. */
export async function resolveScheduleId(sql: Sql, text: string): Promise<string> {
  if (await getSchedule(sql, text)) return text;
  const ids = await findScheduleIdsByPrefix(sql, prefixRange(normalized(text, 'schedule')), LISTED + 1);
  if (ids.length === 1) return ids[0]!;
  if (ids.length > 1) {
    throw ambiguous(
      text,
      'schedule',
      await Promise.all(
        ids.map(async (id) => {
          const s = (await getSchedule(sql, id))!;
          return `${id}  ${s.operation} of ${s.project_id}  "${s.cron}"  ${s.status}`;
        }),
      ),
    );
  }
  throw new CommandError('NOT_FOUND', `no schedule "${text}" (see \`combine schedule list\`)`);
}
