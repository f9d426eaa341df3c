/**
 * The LLM's answer for one epic, and the `story_backlog` document that answers are applied to.
 * Extra fields in the answer are allowed and kept: the model may know more than our schema does.
 */
import { z } from 'zod';
import { describeZodIssues, type Epic, type ParseResult } from './project.js';

export const storySchema = z.looseObject({
  title: z.string().trim().min(1, 'must not be empty'),
  description: z.string().trim().min(1, 'must not be empty'),
  acceptance_criteria: z.array(z.string().trim().min(1, 'must not be empty')).min(1, 'needs at least one criterion'),
});
export type Story = z.infer<typeof storySchema>;

export const storiesAnswerSchema = z.looseObject({
  stories: z.array(storySchema).min(1, 'needs at least one story'),
});
export type StoriesAnswer = z.infer<typeof storiesAnswerSchema>;

/** The JSON schema sent as the response format (non-strict, so extra fields stay allowed). */
export const STORIES_JSON_SCHEMA = {
  type: 'object',
  properties: {
    stories: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        properties: {
          title: { type: 'string' },
          description: { type: 'string' },
          acceptance_criteria: { type: 'array', minItems: 1, items: { type: 'string' } },
        },
        required: ['title', 'description', 'acceptance_criteria'],
      },
    },
  },
  required: ['stories'],
} as const;

/** Parses the message content of an answer: JSON first, then the schema. Errors name each bad field. */
export function parseStoriesAnswer(content: string | null | undefined): ParseResult<StoriesAnswer> {
  if (content === null || content === undefined || content.trim() === '') {
    return { ok: false, errors: ['(root): the answer is empty'] };
  }
  let json: unknown;
  try {
    json = JSON.parse(content);
  } catch (err) {
    return { ok: false, errors: [`(root): the answer is not JSON (${(err as Error).message})`] };
  }
  const result = storiesAnswerSchema.safeParse(json);
  return result.success ? { ok: true, value: result.data } : { ok: false, errors: describeZodIssues(result.error) };
}

export const backlogEpicSchema = z.object({
  epic_id: z.string(),
  title: z.string(),
  stories: z.array(storySchema),
  thread_id: z.string(),
  work_item_id: z.string(),
  generated_at: z.number(),
});
export type BacklogEpic = z.infer<typeof backlogEpicSchema>;

export const storyBacklogSchema = z.object({ epics: z.array(backlogEpicSchema) });
export type StoryBacklog = z.infer<typeof storyBacklogSchema>;

/** Reads a stored `story_backlog` document (throws if it does not match the schema). */
export function parseStoryBacklog(content: string): StoryBacklog {
  return storyBacklogSchema.parse(JSON.parse(content));
}

export const EMPTY_BACKLOG: StoryBacklog = { epics: [] };

export interface BacklogChange {
  content: StoryBacklog;
  summary: { epic_id: string; stories_before: number; stories_after: number; replaced: boolean };
}

/**
 * Plans the mutation for one epic: its stories are replaced by the answer's (generation is idempotent
 * per epic, not additive), other epics are untouched, and epics keep the architecture's order.
 */
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
    },
  };
}
