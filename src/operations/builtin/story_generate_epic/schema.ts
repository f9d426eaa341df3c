/** `story_generate_epic`: what it accepts and the answer it asks the model for. */
import type { Story } from '../../../domain/backlog.js';

export interface EpicInput {
  project_id: string;
  epic_id: string;
}

export const INPUT_SCHEMA = {
  type: 'object',
  properties: {
    project_id: { type: 'string', minLength: 1, maxLength: 128 },
    epic_id: { type: 'string', minLength: 1, maxLength: 128 },
  },
  required: ['project_id', 'epic_id'],
  additionalProperties: false,
};

/** The JSON schema sent as the response format (non-strict, so extra fields stay allowed and are kept). */
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
};

export interface StoriesAnswer {
  stories: Story[];
}
