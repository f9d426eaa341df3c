CREATE INDEX `idx_schedules_id_tail` ON `schedules` (substr("id", 25));--> statement-breakpoint
CREATE INDEX `idx_threads_id_tail` ON `llm_threads` (substr("id", 25));--> statement-breakpoint
CREATE INDEX `idx_work_items_id_tail` ON `llm_work_items` (substr("id", 25));
