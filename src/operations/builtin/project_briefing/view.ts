/** What `combine briefing` prints: the stored `briefing` document of a date, in its public JSON shape. */
import type { BriefingDocument } from './schema.js';

const iso = (ms: number) => new Date(ms).toISOString();

export function briefingView(doc: { version: number; content: string }) {
  const content = JSON.parse(doc.content) as BriefingDocument;
  return {
    project_id: content.project_id,
    date: content.date,
    version: doc.version,
    generated_at: iso(content.generated_at),
    thread_id: content.thread_id,
    briefing: content.briefing,
  };
}
export type BriefingView = ReturnType<typeof briefingView>;
