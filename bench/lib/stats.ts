/** Summaries and the results table for `npm run bench`: medians with their spread, never single runs. */

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** The arithmetic mean; NaN of no values. */
export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? NaN : sum(xs) / xs.length;
}

export function sum(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}

/** The q-quantile (0–1) by nearest rank: the value that `q` of the samples do not exceed. */
export function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}

/** One row of the results table: a figure measured over several runs, and its target. */
export interface Row {
  target: string;
  figure: string;
  /** One value per run; the table shows their median and min–max. */
  runs: number[];
  unit: string;
  /** The target as text, e.g. "≥ 1.00" or "≤ 2 ms". */
  goal: string;
  /** Pass/miss, decided on the median; null for a figure reported without a target. */
  pass: boolean | null;
  note?: string;
}

export function row(r: Omit<Row, 'pass'> & { check?: (median: number) => boolean }): Row {
  const { check, ...rest } = r;
  return { ...rest, pass: check ? check(median(r.runs)) : null };
}

export function fmt(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  const a = Math.abs(n);
  if (a >= 1000) return Math.round(n).toLocaleString('en-US');
  if (a >= 100) return n.toFixed(0);
  if (a >= 10) return n.toFixed(1);
  return n.toFixed(2);
}

export function renderTable(rows: readonly Row[]): string {
  const head = ['#', 'figure', 'median', 'spread (min–max, n)', 'target', 'result'];
  const body = rows.map((r) => [
    r.target,
    r.figure,
    `${fmt(median(r.runs))} ${r.unit}`.trim(),
    `${fmt(Math.min(...r.runs))}–${fmt(Math.max(...r.runs))} (${r.runs.length})`,
    r.goal,
    r.pass === null ? 'info' : r.pass ? 'pass' : 'MISS',
  ]);
  const lines = [head, head.map(() => '---'), ...body].map((cells) => `| ${cells.join(' | ')} |`);
  const notes = rows.filter((r) => r.note).map((r) => `- ${r.target} ${r.figure}: ${r.note}`);
  return [...lines, ...(notes.length ? ['', ...notes] : [])].join('\n');
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
