/**
 * Acceptance rules an operator adds on top of the answer schema (config
 * `operations.<kind>.validation`): how many stories an answer must have and which extra fields every
 * story must carry. They are checked after the schema, so a violation is SCHEMA_INVALID and goes
 * through repair like any schema error. The prompt does not change with them: answers recorded under
 * one set of rules can be replayed under another (`combine replay`).
 */
import type { StoriesAnswer } from './backlog.js';

export interface AnswerRules {
  minStories: number | null;
  maxStories: number | null;
  /** Fields every story must have with a non-empty value (beyond title, description, acceptance_criteria). */
  requiredStoryFields: readonly string[];
}

export const NO_ANSWER_RULES: AnswerRules = { minStories: null, maxStories: null, requiredStoryFields: [] };

function isEmpty(value: unknown): boolean {
  return value === undefined || value === null || (typeof value === 'string' && value.trim() === '') || (Array.isArray(value) && value.length === 0);
}

/** The rule violations of a schema-valid answer, each naming the field; empty when it passes. */
export function checkAnswerRules(answer: StoriesAnswer, rules: AnswerRules): string[] {
  const errors: string[] = [];
  const n = answer.stories.length;
  if (rules.minStories !== null && n < rules.minStories) errors.push(`stories: needs at least ${rules.minStories} stories (got ${n})`);
  if (rules.maxStories !== null && n > rules.maxStories) errors.push(`stories: allows at most ${rules.maxStories} stories (got ${n})`);
  answer.stories.forEach((story, i) => {
    for (const field of rules.requiredStoryFields) {
      if (isEmpty((story as Record<string, unknown>)[field])) errors.push(`stories[${i}].${field}: is required`);
    }
  });
  return errors;
}
