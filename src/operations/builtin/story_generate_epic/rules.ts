/**
 * Answer rules: every text field non-empty, plus what an operator may add in config
 * (`operations.story_generate_epic.validation`): how many stories an answer must have and which extra
 * fields every story must carry. A violation is SCHEMA_INVALID and goes through repair; the prompt does
 * not change with the rules, so answers recorded under one set can be replayed under another.
 */
import type { AnswerRules } from '../../api.js';
import type { StoriesAnswer } from './schema.js';

export interface StoryRules {
  min_stories?: number;
  max_stories?: number;
  /** Fields every story must have with a non-empty value (beyond title, description, acceptance_criteria). */
  required_story_fields?: string[];
}

const RULES_SCHEMA = {
  type: 'object',
  properties: {
    min_stories: { type: 'integer', minimum: 1, maximum: 1000 },
    max_stories: { type: 'integer', minimum: 1, maximum: 1000 },
    required_story_fields: { type: 'array', maxItems: 50, items: { type: 'string', minLength: 1 } },
  },
  additionalProperties: false,
};

function isEmpty(value: unknown): boolean {
  return value === undefined || value === null || (typeof value === 'string' && value.trim() === '') || (Array.isArray(value) && value.length === 0);
}

/** The violations of a schema-valid answer, each naming the field; empty when it passes. */
export function checkStoryRules(answer: StoriesAnswer, rules: StoryRules): string[] {
  const errors: string[] = [];
  answer.stories.forEach((s, i) => {
    if (s.title.trim() === '') errors.push(`stories[${i}].title: must not be empty`);
    if (s.description.trim() === '') errors.push(`stories[${i}].description: must not be empty`);
    s.acceptance_criteria.forEach((c, j) => {
      if (c.trim() === '') errors.push(`stories[${i}].acceptance_criteria[${j}]: must not be empty`);
    });
  });
  const n = answer.stories.length;
  if (rules.min_stories !== undefined && n < rules.min_stories) errors.push(`stories: needs at least ${rules.min_stories} stories (got ${n})`);
  if (rules.max_stories !== undefined && n > rules.max_stories) errors.push(`stories: allows at most ${rules.max_stories} stories (got ${n})`);
  answer.stories.forEach((story, i) => {
    for (const field of rules.required_story_fields ?? []) {
      if (isEmpty((story as Record<string, unknown>)[field])) errors.push(`stories[${i}].${field}: is required`);
    }
  });
  return errors;
}

export const storyRules: AnswerRules<StoriesAnswer> = { schema: RULES_SCHEMA, check: checkStoryRules };
