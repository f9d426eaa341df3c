/**
 * Finding rows by what a person types: a whole id, a prefix of it, or a prefix of its random tail.
 *
 * Row ids are UUIDv7 (db/ids.ts): the first 12 hex digits are the creation time, so every row made in
 * the same minute shares its first 8 characters. The short id people see is taken from the random
 * tail instead (characters 25–36, see src/domain/short-id.ts). Each kind is one statement of two range
 * scans — the primary key for a prefix of the id, the `substr(id, 25)` expression index for a prefix
 * of the tail — so a lookup costs the same at a million rows as at ten.
 */
import type { Sql } from '../core/sql.js';

export interface IdRange {
  /** Lowest matching value (the typed text). */
  lo: string;
  /** First value past every match: the typed text with its last character incremented. */
  hi: string;
}

const matchesOf = (table: string) => `
  SELECT id FROM (SELECT id FROM ${table} WHERE id >= @lo AND id < @hi LIMIT @limit) by_id
  UNION
  SELECT id FROM (SELECT id FROM ${table} WHERE substr(id, 25) >= @lo AND substr(id, 25) < @hi LIMIT @limit) by_tail
  ORDER BY id LIMIT @limit`;

/** Thread ids starting with the range's text, or whose tail does; at most `limit`, in id order. */
export async function findThreadIdsByPrefix(sql: Sql, r: IdRange, limit: number): Promise<string[]> {
  return ((await sql.all(matchesOf('llm_threads'), { ...r, limit })) as { id: string }[]).map((row) => row.id);
}

/** Work item ids matched the same way, with the thread each belongs to. */
export async function findWorkItemIdsByPrefix(sql: Sql, r: IdRange, limit: number): Promise<{ id: string; thread_id: string }[]> {
  return (await sql.all(`SELECT w.id, w.thread_id FROM (${matchesOf('llm_work_items')}) m JOIN llm_work_items w ON w.id = m.id ORDER BY w.id`, {
    ...r,
    limit,
  })) as { id: string; thread_id: string }[];
}

/** Schedule ids matched the same way. */
export async function findScheduleIdsByPrefix(sql: Sql, r: IdRange, limit: number): Promise<string[]> {
  return ((await sql.all(matchesOf('schedules'), { ...r, limit })) as { id: string }[]).map((row) => row.id);
}
