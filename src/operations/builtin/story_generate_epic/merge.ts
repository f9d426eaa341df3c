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

export function applyStoriesToBacklog(
  backlog: StoryBacklog,
  epic: Epic,
  epicOrder: readonly string[],
  stories: Story[],
  provenance: { thread_id: string; work_item_id: string; generated_at: number },
): BacklogChange {
  const previous = backlog.epics.find((e) => e.epic_id === epic.id);
  const entry: BacklogEpic = { epic_id: epic.id, title: epic.title, stories, ...provenance };
  const others = backlog.epics.filter((e) => e.epic_id !== epic.id);
  const order = new Map(epicOrder.map((id, i) => [id, i]));
  const rank = (id: string) => order.get(id) ?? Number.MAX_SAFE_INTEGER;
  const epics = [...others, entry].sort((a, b) => rank(a.epic_id) - rank(b.epic_id));
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
