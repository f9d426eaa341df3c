-- Generated (npm run db:generate:pg), then named: the id-tail indexes of SQLite migration 0012, and the status
-- checks of 0014 as real CHECK constraints (SQLite uses triggers there only because it cannot add a CHECK to an
-- existing table). Lists from src/domain (states.ts, schedule.ts); test/integration/postgres-schema.test.ts
-- checks that Postgres refuses exactly what SQLite refuses. 0013 (a data fix of old rows) has no Postgres rows to fix.
CREATE INDEX "idx_schedules_id_tail" ON "schedules" USING btree (substr("id", 25));--> statement-breakpoint
CREATE INDEX "idx_threads_id_tail" ON "llm_threads" USING btree (substr("id", 25));--> statement-breakpoint
CREATE INDEX "idx_work_items_id_tail" ON "llm_work_items" USING btree (substr("id", 25));--> statement-breakpoint
ALTER TABLE "llm_charges" ADD CONSTRAINT "llm_charges_status_check" CHECK ("llm_charges"."status" IN ('reserved', 'settled', 'in_doubt', 'released'));--> statement-breakpoint
ALTER TABLE "schedule_runs" ADD CONSTRAINT "schedule_runs_status_check" CHECK ("schedule_runs"."status" IN ('pending', 'complete', 'failed', 'canceled'));--> statement-breakpoint
ALTER TABLE "schedules" ADD CONSTRAINT "schedules_status_check" CHECK ("schedules"."status" IN ('active', 'paused', 'removed'));--> statement-breakpoint
ALTER TABLE "llm_threads" ADD CONSTRAINT "llm_threads_status_check" CHECK ("llm_threads"."status" IN ('open', 'running', 'complete', 'failed', 'canceled'));--> statement-breakpoint
ALTER TABLE "llm_work_items" ADD CONSTRAINT "llm_work_items_status_check" CHECK ("llm_work_items"."status" IN ('queued', 'claimed', 'running', 'applied', 'failed', 'dead_letter'));