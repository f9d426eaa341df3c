-- Hand-written (as drizzle-kit generates a column's type change): a schedule run's token counts are the sums
-- of its thread's and all its children's response usage (db/schedules.ts, written at the thread-ending
-- COMMIT). Each count fits an integer (domain/completion.ts bounds it at 2^31-1), their sum need not: over
-- 2^31-1 Postgres refused the write (22003) where SQLite stores it (64-bit), and the thread could not end.
-- `bigint`, as llm_project_spend.tokens already is. The table is small (one row per schedule period): the
-- rewrite under its lock is brief.
ALTER TABLE "schedule_runs" ALTER COLUMN "prompt_tokens" SET DATA TYPE bigint;--> statement-breakpoint
ALTER TABLE "schedule_runs" ALTER COLUMN "completion_tokens" SET DATA TYPE bigint;--> statement-breakpoint
ALTER TABLE "schedule_runs" ALTER COLUMN "total_tokens" SET DATA TYPE bigint;
