DROP INDEX "idx_threads_key_created";--> statement-breakpoint
CREATE INDEX "idx_threads_key_complete" ON "llm_threads" USING btree ("idempotency_key","created_at") WHERE status = 'complete';