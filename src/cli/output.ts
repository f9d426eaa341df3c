/**
 * Exit codes, errors and printing shared by every command: JSON for scripts; for people, colour and
 * relative times on a terminal only, and tables measured in display columns that fit its width.
 */
import picocolors from 'picocolors';
import { shortId as tailShortId } from '../domain/short-id.js';
import { systemClock } from '../core/clock.js';

export const EXIT = { OK: 0, FAILED: 1, USAGE: 2, UNREACHABLE: 3 } as const;

export interface OutputOptions {
  json?: boolean;
}

// --- colour --------------------------------------------------------------------------------------

/** Colour only on a terminal, never with NO_COLOR (https://no-color.org) or --no-color; FORCE_COLOR forces it. */
export function colorEnabled(stream: NodeJS.WriteStream, env: NodeJS.ProcessEnv = process.env, argv = process.argv): boolean {
  if (env.NO_COLOR) return false;
  if (argv.includes('--no-color')) return false;
  if (env.FORCE_COLOR && env.FORCE_COLOR !== '0') return true;
  return stream.isTTY === true && env.TERM !== 'dumb';
}

export type Colors = ReturnType<typeof picocolors.createColors>;

let stdoutColors: Colors | null = null;
let stderrColors: Colors | null = null;
/** Styles for what goes to stdout (plain strings when colour is off). */
export const color = (): Colors => (stdoutColors ??= picocolors.createColors(colorEnabled(process.stdout)));
/** Styles for what goes to stderr. */
export const errColor = (): Colors => (stderrColors ??= picocolors.createColors(colorEnabled(process.stderr)));

/** The colour of a status by what it means: done, failed, stopped or waiting, in progress. */
export function statusColor(status: string, c: Colors = color()): (s: string) => string {
  if (status === 'complete' || status === 'applied' || status === 'ok' || status === 'ready' || status === 'active') return c.green;
  if (status === 'failed' || status === 'dead_letter' || status === 'fail' || status === 'unready') return c.red;
  if (status === 'canceled' || status === 'warn' || status === 'paused') return c.yellow;
  if (status === 'running' || status === 'claimed') return c.cyan;
  return (s) => s;
}

/** A status word in its colour. */
export function statusText(status: string, c: Colors = color()): string {
  return statusColor(status, c)(status);
}

/** A table cell holding a status, coloured after padding. */
export function statusCell(status: string): Cell {
  return { text: status, style: statusColor(status) };
}

// --- words, ids and times ---------------------------------------------------------------------------

/** "1 epic", "3 epics"; `many` for irregular plurals. */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** The short id of a row: the random tail of its UUIDv7 (see domain/short-id.ts). */
export function shortId(id: string): string {
  return tailShortId(id);
}

/** "2026-11-22T10:00:00.000Z" → "2026-11-22 10:00:00". */
export function shortTime(iso: string | null): string {
  return iso ? iso.replace('T', ' ').slice(0, 19) : '-';
}

/** "3m ago", "in 2h", "just now": how a person reads a time on a terminal. */
export function relativeTime(iso: string, now = systemClock.now()): string {
  const ms = now - Date.parse(iso);
  const abs = Math.abs(ms);
  if (abs < 5_000) return 'just now';
  const units: [number, string][] = [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'm'],
    [1_000, 's'],
  ];
  const [size, unit] = units.find(([u]) => abs >= u)!;
  if (unit === 'd' && abs >= 30 * 86_400_000) return shortTime(iso).slice(0, 10);
  const n = `${Math.floor(abs / size)}${unit}`;
  return ms >= 0 ? `${n} ago` : `in ${n}`;
}

/** A time for people: relative on a terminal, "YYYY-MM-DD HH:MM:SS" (UTC) in a pipe; JSON keeps ISO. */
export function when(iso: string | null): string {
  if (!iso) return '-';
  return process.stdout.isTTY ? relativeTime(iso) : shortTime(iso);
}

// --- display width ---------------------------------------------------------------------------------

/**
 * string-width compiles large Unicode tables when first used (~25 ms): it is loaded only when a table
 * holds text that is not plain ASCII, so an ASCII table costs nothing extra.
 */
let stringWidth: ((s: string) => number) | null = null;
let wideTextSeen = false;
const PLAIN = /^[\x20-\x7e]*$/;

export function displayWidth(s: string): number {
  if (PLAIN.test(s)) return s.length;
  if (stringWidth) return stringWidth(s);
  wideTextSeen = true;
  return s.length;
}

/** Cuts `s` to at most `width` display columns, ending in "…" when cut. */
export function truncate(s: string, width: number): string {
  if (displayWidth(s) <= width) return s;
  let out = '';
  for (const ch of s) {
    if (displayWidth(out + ch) > width - 1) break;
    out += ch;
  }
  return `${out}…`;
}

// --- tables ---------------------------------------------------------------------------------------

/** A cell: its text, and optionally a style applied after it is padded or cut (so widths stay right). */
export type Cell = string | { text: string; style: (s: string) => string };

/** A cut column keeps at least this many display columns (its last one "…"). */
const MIN_COLUMN = 4;

/**
 * Columns aligned by display width (CJK and emoji take two columns). On a terminal the table fits its
 * width: the widest column is cut (with "…") until it does — never the first, which holds what a
 * person types back (an id, a name). The header is dimmed when colour is on.
 */
export function table(rows: Cell[][], maxWidth: number = process.stdout.isTTY ? process.stdout.columns || 80 : Infinity): string {
  const text = (c: Cell | undefined) => (c === undefined ? '' : typeof c === 'string' ? c : c.text);
  const columns = rows[0]?.length ?? 0;
  const widths = Array.from({ length: columns }, (_, i) => Math.max(...rows.map((r) => displayWidth(text(r[i])))));
  const floor = widths.map((w, i) => (i === 0 ? w : Math.min(w, MIN_COLUMN)));
  let total = widths.reduce((a, b) => a + b, 0) + 2 * (columns - 1);
  while (total > maxWidth) {
    const widest = widths.reduce((best, w, i) => (w - floor[i]! > widths[best]! - floor[best]! ? i : best), 0);
    const room = widths[widest]! - floor[widest]!;
    if (room <= 0) break;
    const cut = Math.min(room, total - maxWidth);
    widths[widest]! -= cut;
    total -= cut;
  }
  const c = color();
  return rows
    .map((r, row) =>
      r
        .map((cell, i) => {
          const t = truncate(text(cell), widths[i]!);
          const padded = i === r.length - 1 ? t : t + ' '.repeat(Math.max(0, widths[i]! - displayWidth(t)));
          if (row === 0) return c.dim(padded);
          return typeof cell === 'string' ? padded : cell.style(padded);
        })
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

// --- printing ---------------------------------------------------------------------------------------

function write(text: string): void {
  process.stdout.write(`${text}\n`);
}

/**
 * Prints `data` as JSON with --json, otherwise the human rendering. A rendering that met wide text
 * (see displayWidth) is rendered again once string-width is loaded, so its columns line up.
 */
export async function print(opts: OutputOptions, data: unknown, human: () => string): Promise<void> {
  if (opts.json) return write(JSON.stringify(data, null, 2));
  wideTextSeen = false;
  const text = human();
  if (!wideTextSeen) return write(text);
  stringWidth = (await import('string-width')).default;
  write(human());
}

/** One JSON object per line (for --follow --json streams). */
export function printJsonLine(data: unknown): void {
  process.stdout.write(`${JSON.stringify(data)}\n`);
}

/**
 * What a child of an orchestration works on, read from its target_ref whatever the operation:
 * `{epic_id: "E3"}` → "epic E3", `{date: "2026-11-23"}` → "date 2026-11-23"; else its document type.
 */
export function describeTargetRef(ref: object): string {
  const fields = ref as Record<string, unknown>;
  const parts = Object.entries(fields)
    .filter(([k, v]) => k !== 'doc_type' && k !== 'project_id' && v !== undefined && v !== null)
    .map(([k, v]) => `${k.replace(/_id$/, '')} ${String(v)}`);
  return parts.join(', ') || String(fields.doc_type ?? 'target');
}
