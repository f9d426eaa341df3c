/** Rendering daemon.log lines (pino JSON) for people: one line each, ids shortened, errors inline. */
import { MIN_ID_PREFIX, shortId } from '../domain/short-id.js';

export interface LogFilter {
  /** A thread id (whole, or a prefix of it or of its short id): lines of that thread and of its children. */
  thread?: string;
}

type LogLine = Record<string, unknown>;

/** Parses a log line; null for lines that are not JSON objects (e.g. a crash trace on stderr). */
export function parseLogLine(line: string): LogLine | null {
  if (!line.startsWith('{')) return null;
  try {
    const v = JSON.parse(line) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as LogLine) : null;
  } catch {
    return null;
  }
}

/** The whole id, or a prefix (of MIN_ID_PREFIX or more characters) of the id or of its short form. */
export function idMatches(value: unknown, wanted: string): value is string {
  if (typeof value !== 'string') return false;
  if (value === wanted) return true;
  const w = wanted.toLowerCase();
  return w.length >= MIN_ID_PREFIX && (value.startsWith(w) || shortId(value, 12).startsWith(w));
}

/** The distinct thread ids a line names (its thread and its parent) that match `wanted`. */
export function matchingThreadIds(line: LogLine | null, wanted: string): string[] {
  if (!line) return [];
  return [line.thread_id, line.parent_thread_id].filter((v): v is string => idMatches(v, wanted));
}

export function matchesFilter(line: LogLine | null, f: LogFilter): boolean {
  if (!f.thread) return true;
  if (!line) return false;
  return idMatches(line.thread_id, f.thread) || idMatches(line.parent_thread_id, f.thread);
}

/** Fields shown in fixed places (or not at all) rather than as key=value. */
const PLACED = new Set(['level', 'ts', 'time', 'pid', 'msg', 'component', 'thread_id', 'work_item_id', 'parent_thread_id', 'err', 'event']);

function value(v: unknown): string {
  return typeof v === 'string' ? (/\s/.test(v) ? JSON.stringify(v) : v) : JSON.stringify(v);
}

/** `2026-01-02 10:00:00.123 INFO  engine  thread=1a2b3c4d item=5e6f7a8b  ledger prompt  seq=4 attempt=1` */
export function formatLogLine(l: LogLine): string {
  const ts = typeof l.ts === 'string' ? l.ts.replace('T', ' ').replace('Z', '') : typeof l.time === 'number' ? new Date(l.time).toISOString() : '-';
  const level = String(l.level ?? '-')
    .toUpperCase()
    .padEnd(5);
  const parts = [ts, level, String(l.component ?? 'daemon').padEnd(7)];
  if (typeof l.thread_id === 'string') parts.push(`thread=${shortId(l.thread_id)}`);
  if (typeof l.work_item_id === 'string') parts.push(`item=${shortId(l.work_item_id)}`);
  parts.push(` ${String(l.msg ?? '')}`);
  const extra = Object.entries(l)
    .filter(([k, v]) => !PLACED.has(k) && v !== null && v !== undefined)
    .map(([k, v]) => `${k}=${value(v)}`);
  if (extra.length > 0) parts.push(` ${extra.join(' ')}`);
  const err = l.err as { message?: string; type?: string } | undefined;
  if (err?.message) parts.push(`\n    ${err.type ?? 'Error'}: ${err.message}`);
  return parts.join(' ');
}
