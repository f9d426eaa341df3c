/**
 * The difference between two story lists for one epic, keyed by title: what `combine replay` shows
 * between what is applied now and what today's parser would apply.
 */
import { canonicalJson } from './ledger-hash.js';
import type { Story } from './backlog.js';

export interface StoryDiff {
  added: string[];
  removed: string[];
  /** Same title, different content (description, criteria or extra fields). */
  changed: string[];
  unchanged: number;
}

export function diffStories(before: readonly Story[], after: readonly Story[]): StoryDiff {
  const old = new Map(before.map((s) => [s.title, canonicalJson(s)]));
  const diff: StoryDiff = { added: [], removed: [], changed: [], unchanged: 0 };
  const seen = new Set<string>();
  for (const s of after) {
    seen.add(s.title);
    const previous = old.get(s.title);
    if (previous === undefined) diff.added.push(s.title);
    else if (previous !== canonicalJson(s)) diff.changed.push(s.title);
    else diff.unchanged++;
  }
  for (const s of before) if (!seen.has(s.title)) diff.removed.push(s.title);
  return diff;
}

export function isEmptyDiff(d: StoryDiff): boolean {
  return d.added.length === 0 && d.removed.length === 0 && d.changed.length === 0;
}
