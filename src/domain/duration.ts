/** Human durations: "500ms", "30s", "5m", "2h", "1d", or a bare number of milliseconds. */

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Milliseconds for a duration string, or null when it is not one. */
export function parseDurationMs(input: string | number): number | null {
  if (typeof input === 'number') return Number.isFinite(input) && input >= 0 ? input : null;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(input);
  if (!m) return null;
  return Math.round(Number(m[1]) * UNITS[m[2] ?? 'ms']!);
}
