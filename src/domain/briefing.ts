/**
 * `project_briefing`: the facts a briefing is written from, the LLM's answer, and the `briefing`
 * document (one per project and date) the answer is stored as. Extra fields in the answer are kept.
 */
import { z } from 'zod';
import { describeZodIssues, type ParseResult } from './project.js';

/** What the model is told about the project: gathered from the database when the prompt is built. */
export interface ProjectFacts {
  epics: { epic_id: string; title: string; stories: number }[];
  /** Thread counts by status (briefing threads excluded: a briefing does not report on briefings). */
  threads: Record<string, number>;
  failed: ThreadFact[];
  running: ThreadFact[];
}

export interface ThreadFact {
  thread_id: string;
  kind: string;
  /** The epic, or "all epics". */
  target: string;
  status: string;
  error_code: string | null;
  created_at: string;
}

const line = z.string().trim().min(1, 'must not be empty');

export const briefingAnswerSchema = z.looseObject({
  summary: line,
  highlights: z.array(line),
  risks: z.array(line),
  next_steps: z.array(line),
});
export type BriefingAnswer = z.infer<typeof briefingAnswerSchema>;

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
} as const;

/** Parses the message content of an answer: JSON first, then the schema. Errors name each bad field. */
export function parseBriefingAnswer(content: string | null | undefined): ParseResult<BriefingAnswer> {
  if (content === null || content === undefined || content.trim() === '') {
    return { ok: false, errors: ['(root): the answer is empty'] };
  }
  let json: unknown;
  try {
    json = JSON.parse(content);
  } catch (err) {
    return { ok: false, errors: [`(root): the answer is not JSON (${(err as Error).message})`] };
  }
  const result = briefingAnswerSchema.safeParse(json);
  return result.success ? { ok: true, value: result.data } : { ok: false, errors: describeZodIssues(result.error) };
}

/** The stored `briefing` document: the answer and its provenance (the prompt is in the ledger). */
export const briefingDocumentSchema = z.object({
  project_id: z.string(),
  date: z.string(),
  briefing: briefingAnswerSchema,
  thread_id: z.string(),
  work_item_id: z.string(),
  generated_at: z.number(),
});
export type BriefingDocument = z.infer<typeof briefingDocumentSchema>;

/** Dates are calendar days, YYYY-MM-DD, and must exist (no 2026-02-30). */
export function isCalendarDate(s: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(s)) return false;
  const d = new Date(`${s}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === s;
}
