/**
 * The built-in operations, and the few places the product names them: the story and briefing
 * shorthand commands, the schedule operation names kept from before any operation could be scheduled,
 * and the simulator's richer answers for them. Everything else reaches an operation by its definition.
 */
import type { OperationDefinition } from '../api.js';
import { NAME as BRIEFING_OPERATION, projectBriefing } from './project_briefing/index.js';
import { BRIEFING } from './project_briefing/schema.js';
import { simulatedBriefing } from './project_briefing/simulate.js';
import { briefingView } from './project_briefing/view.js';
import { NAME as ALL_OPERATION, storyGenerateAll } from './story_generate_all/index.js';
import { NAME as EPIC_OPERATION, storyGenerateEpic } from './story_generate_epic/index.js';
import { simulateStoriesAnswer } from './story_generate_epic/simulate.js';

export const BUILTIN_OPERATIONS: readonly OperationDefinition[] = [storyGenerateEpic, storyGenerateAll, projectBriefing];

export interface OperationRequest {
  operation: string;
  input: Record<string, unknown>;
}

/** `generate-epic`, `generate-all` and `briefing`: the generic requests and reads they stand for. */
export const SHORTHANDS = {
  generateEpic: (projectId: string, epicId: string): OperationRequest => ({ operation: EPIC_OPERATION, input: { project_id: projectId, epic_id: epicId } }),
  generateAll: (projectId: string): OperationRequest => ({ operation: ALL_OPERATION, input: { project_id: projectId } }),
  /** `combine briefing` reads this document type and shows it with this view. */
  briefing: { docType: BRIEFING, view: briefingView },
};

/**
 * `schedule add --operation briefing | generate-all`: each stands for an operation and an input
 * template (`{{date}}` is the period's date in the schedule's time zone; `project_id` comes from --project).
 */
export const SCHEDULE_ALIASES: Readonly<Record<string, OperationRequest>> = {
  briefing: { operation: BRIEFING_OPERATION, input: { date: '{{date}}' } },
  'generate-all': { operation: ALL_OPERATION, input: {} },
};

/** Answers the simulator gives the built-ins (any other operation gets one generated from its schema). */
export const SIMULATED_ANSWERS: Readonly<Record<string, (promptText: string) => unknown>> = {
  [EPIC_OPERATION]: simulateStoriesAnswer,
  [BRIEFING_OPERATION]: simulatedBriefing,
};

export type { BriefingView } from './project_briefing/view.js';
