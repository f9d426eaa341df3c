/**
 * `project_briefing`: a short status briefing of a project for one date, written from its epics, story
 * counts and failed and running threads, stored as the project's `briefing` document for that date.
 * Key: `project_briefing:project:<project>:briefing:<date>`; lock: `briefing:<project>:<date>` (a
 * briefing writes only its own document).
 */
import { defineOperation } from '../../api.js';
import { briefingMessages, gatherProjectFacts } from './prompt.js';
import {
  BRIEFING,
  BRIEFING_JSON_SCHEMA,
  INPUT_SCHEMA,
  checkBriefingText,
  trimBriefing,
  type BriefingAnswer,
  type BriefingDocument,
  type BriefingInput,
} from './schema.js';

export const NAME = 'project_briefing';

export const projectBriefing = defineOperation<BriefingInput, BriefingAnswer, BriefingDocument>({
  name: NAME,
  description: 'Write a short status briefing of a project for a date from its epics, stories and threads',
  input: INPUT_SCHEMA,
  identity: (i) => ({ space_type: 'project', space_id: i.project_id, target_doc_type: BRIEFING, target_id: i.date }),
  lockScope: (i) => `briefing:${i.project_id}:${i.date}`,
  target: (i) => ({ project_id: i.project_id, doc_type: BRIEFING, key: i.date, date: i.date }),
  prompt: (ctx) => ({ messages: briefingMessages(ctx.project, ctx.input.date, gatherProjectFacts(ctx, NAME)) }),
  output: BRIEFING_JSON_SCHEMA,
  rules: { schema: { type: 'object', additionalProperties: false }, check: (answer) => checkBriefingText(answer) },
  apply: ({ answer, input, provenance }) => {
    const briefing = trimBriefing(answer);
    return {
      content: {
        project_id: input.project_id,
        date: input.date,
        briefing,
        thread_id: provenance.thread_id,
        work_item_id: provenance.work_item_id,
        generated_at: provenance.at,
      },
      summary: { date: input.date, highlights: briefing.highlights.length, risks: briefing.risks.length, next_steps: briefing.next_steps.length },
    };
  },
});
