/**
 * The mutation: an epic's stories in the project's `story_backlog` are replaced by the answer's
 * (generation is idempotent per epic, not additive); other epics are untouched and epics keep the
 * architecture's order. The summary says what changed, story by story (keyed by title).
 */
import type { BacklogEpic, Story, StoryBacklog } from '../../../domain/backlog.js';
import type { Epic } from '../../../domain/project.js';
import { canonicalJson } from '../../../domain/canonical-json.js';

export interface StoryDiff {
  added: string[];
  removed: string[];
  /** Same title, different content (description, criteria or extra fields). */
  changed: string[];
  unchanged: number;
}

export function diffStories(before: readonly Story[], after: readonly Story[]): StoryDiff {
  const old = new Map(before.map((s) => [s.title, s]));
  const diff: StoryDiff = { added: [], removed: [], changed: [], unchanged: 0 };
  const seen = new Set<string>();
  for (const s of after) {
    seen.add(s.title);
    const previous = old.get(s.title);
    if (previous === undefined) diff.added.push(s.title);
    else if (canonicalJson(previous) !== canonicalJson(s)) diff.changed.push(s.title);
    else diff.unchanged++;
  }
  for (const s of before) if (!seen.has(s.title)) diff.removed.push(s.title);
  return diff;
}

/** The answer's stories as stored: text fields trimmed, extra fields the model sent kept. */
export function trimStories(stories: readonly Story[]): Story[] {
  return stories.map((s) => ({
    ...s,
    title: s.title.trim(),
    description: s.description.trim(),
    acceptance_criteria: s.acceptance_criteria.map((c) => c.trim()),
  }));
}

export interface BacklogChange {
  content: StoryBacklog;
  summary: { epic_id: string; stories_before: number; stories_after: number; replaced: boolean; difference: StoryDiff };
}

/** Backlogs this module made, with the order they are known to be in (a backlog is frozen once stored). */
const sortedBy = new WeakMap<readonly BacklogEpic[], (id: string) => number>();

/** Where `entry` goes in `epics` when they are in `rank` order already; -1 when they are not. */
function placeIn(epics: readonly BacklogEpic[], entry: BacklogEpic, previous: number, rank: (id: string) => number): number {
  if (sortedBy.get(epics) !== rank) {
    for (let i = 1; i < epics.length; i++) if (rank(epics[i - 1]!.epic_id) > rank(epics[i]!.epic_id)) return -1;
  }
  if (previous !== -1) return previous;
  const r = rank(entry.epic_id);
  let lo = 0;
  let hi = epics.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (rank(epics[mid]!.epic_id) <= r) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * `rank` is an epic's place in the architecture (unknown ids last): the same function for the same
 * architecture, so the order of a backlog made here is not checked again. The other epics stay the same
 * objects, in their order when it is the architecture's (no sort): a backlog stored in parts then
 * writes only this epic.
 */
export function applyStoriesToBacklog(
  backlog: StoryBacklog,
  epic: Epic,
  rank: (id: string) => number,
  stories: Story[],
  provenance: { thread_id: string; work_item_id: string; generated_at: number },
): BacklogChange {
  const at = backlog.epics.findIndex((e) => e.epic_id === epic.id);
  const previous = at === -1 ? undefined : backlog.epics[at];
  const entry: BacklogEpic = { epic_id: epic.id, title: epic.title, stories, ...provenance };
  const place = placeIn(backlog.epics, entry, at, rank);
  let epics: BacklogEpic[];
  if (place === -1) {
    const others = backlog.epics.filter((e) => e.epic_id !== epic.id);
    epics = [...others, entry].sort((a, b) => rank(a.epic_id) - rank(b.epic_id));
  } else {
    epics = [...backlog.epics];
    epics.splice(place, at === -1 ? 0 : 1, entry);
  }
  sortedBy.set(epics, rank);
  return {
    content: { epics },
    summary: {
      epic_id: epic.id,
      stories_before: previous?.stories.length ?? 0,
      stories_after: stories.length,
      replaced: previous !== undefined,
      difference: diffStories(previous?.stories ?? [], stories),
    },
  };
}
