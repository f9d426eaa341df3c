/** Parsing the exposition text with a third-party parser (parse-prometheus-text-format). */
import { createRequire } from 'node:module';

export interface MetricFamily {
  name: string;
  help: string;
  type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  metrics: { value?: string; labels?: Record<string, string>; buckets?: Record<string, string>; count?: string; sum?: string }[];
}

const require = createRequire(import.meta.url);
const parse = require('parse-prometheus-text-format') as (text: string) => MetricFamily[];

export function parseExposition(text: string): MetricFamily[] {
  return parse(text);
}

/** Series = sample lines (each histogram bucket, _sum and _count is one). */
export function seriesCount(text: string): number {
  return text.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#')).length;
}
