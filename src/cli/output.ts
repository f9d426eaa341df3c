/** Exit codes, errors and printing shared by every command. */

export const EXIT = { OK: 0, FAILED: 1, USAGE: 2, UNREACHABLE: 3 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export interface OutputOptions {
  json?: boolean;
}

/** Prints `data` as JSON with --json, otherwise the human rendering. */
export function print(opts: OutputOptions, data: unknown, human: () => string): void {
  process.stdout.write(opts.json ? `${JSON.stringify(data, null, 2)}\n` : `${human()}\n`);
}

/** One JSON object per line (for --follow --json streams). */
export function printJsonLine(data: unknown): void {
  process.stdout.write(`${JSON.stringify(data)}\n`);
}

export function shortId(id: string): string {
  return id.slice(0, 8);
}

/** "2026-11-22T10:00:00.000Z" → "2026-11-22 10:00:00". */
export function shortTime(iso: string | null): string {
  return iso ? iso.replace('T', ' ').slice(0, 19) : '-';
}

export function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n');
}
