/** `project_briefing`: what it accepts, the answer it asks for, and the `briefing` document it writes. */

export const BRIEFING = 'briefing';

export interface BriefingInput {
  project_id: string;
  /** The calendar day (YYYY-MM-DD) the briefing is for: one `briefing` document per project and date. */
  date: string;
}

export const INPUT_SCHEMA = {
  type: 'object',
  properties: {
    project_id: { type: 'string', minLength: 1, maxLength: 128 },
    date: { type: 'string', format: 'date' },
  },
  required: ['project_id', 'date'],
  additionalProperties: false,
};

/** The JSON schema sent as the response format (non-strict, so extra fields stay allowed). */
export const BRIEFING_JSON_SCHEMA = {
  type: 'object',
  properties: {
    summary: { type: 'string' },
    highlights: { type: 'array', items: { type: 'string' } },
    risks: { type: 'array', items: { type: 'string' } },
    next_steps: { type: 'array', items: { type: 'string' } },
  },
  required: ['summary', 'highlights', 'risks', 'next_steps'],
};

export interface BriefingAnswer {
  summary: string;
  highlights: string[];
  risks: string[];
  next_steps: string[];
  [extra: string]: unknown;
}

/** The stored document: the answer and its provenance (what the model was told is the `prompt` entry). */
export interface BriefingDocument {
  project_id: string;
  date: string;
  briefing: BriefingAnswer;
  thread_id: string;
  work_item_id: string;
  generated_at: number;
}

/** Every text non-empty: the schema says string, a briefing says something. */
export function checkBriefingText(answer: BriefingAnswer): string[] {
  const errors: string[] = [];
  if (answer.summary.trim() === '') errors.push('summary: must not be empty');
  for (const field of ['highlights', 'risks', 'next_steps'] as const) {
    answer[field].forEach((line, i) => {
      if (line.trim() === '') errors.push(`${field}[${i}]: must not be empty`);
    });
  }
  return errors;
}

export function trimBriefing(answer: BriefingAnswer): BriefingAnswer {
  const lines = (l: string[]) => l.map((s) => s.trim());
  return { ...answer, summary: answer.summary.trim(), highlights: lines(answer.highlights), risks: lines(answer.risks), next_steps: lines(answer.next_steps) };
}
