DROP INDEX `idx_threads_key_created`;--> statement-breakpoint
CREATE INDEX `idx_threads_key_complete` ON `llm_threads` (`idempotency_key`,`created_at`) WHERE status = 'complete';