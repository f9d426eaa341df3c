DROP INDEX "idx_threads_parent";--> statement-breakpoint
CREATE INDEX "idx_threads_parent_status" ON "llm_threads" USING btree ("parent_thread_id","status") WHERE parent_thread_id IS NOT NULL;