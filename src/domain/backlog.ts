/**
 * The `story_backlog` document: a project's stories per epic, created empty at import and written by
 * story generation. Stories keep extra fields the model sent: it may know more than our schema does.
 */
import { z } from 'zod';

export const STORY_BACKLOG = 'story_backlog';

export const storySchema = z.looseObject({
  title: z.string().trim().min(1, 'must not be empty'),
  description: z.string().trim().min(1, 'must not be empty'),
  acceptance_criteria: z.array(z.string().trim().min(1, 'must not be empty')).min(1, 'needs at least one criterion'),
});
export type Story = z.infer<typeof storySchema>;

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
