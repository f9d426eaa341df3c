/**
 * The "durable LLM step" the peers run for target 1 (issue 20): a job awaits an instant fake provider
 * (in process, resolves at once with a fixed answer), then writes a result row and an audit row in one
 * transaction. The answer is the one combine's instant provider returns (engine-run.ts), so the peers'
 * result rows carry the same bytes as combine's response entries.
 */
import { simulatedStories } from '../../src/operations/builtin/story_generate_epic/simulate.js';

const ANSWER = JSON.stringify({ stories: simulatedStories('E1', 'Checkout') });

/** What the fake provider answers: the model's content and its token count. */
export interface StepAnswer {
  content: string;
  totalTokens: number;
}

/** The fake provider: an async call that resolves at once, from memory, with the same answer each time. */
export async function callInstantProvider(): Promise<StepAnswer> {
  return { content: ANSWER, totalTokens: 420 };
}

/** The step's two tables (SQLite and Postgres both accept this text). */
export const STEP_TABLES_SQL = `
  CREATE TABLE bench_step_result (job_id BIGINT PRIMARY KEY, answer TEXT NOT NULL, created_at BIGINT NOT NULL);
  CREATE TABLE bench_step_audit (job_id BIGINT NOT NULL, event TEXT NOT NULL, tokens INTEGER NOT NULL, at BIGINT NOT NULL);
`;
