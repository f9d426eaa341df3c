ALTER TABLE `llm_threads` ADD `traceparent` text;--> statement-breakpoint
ALTER TABLE `llm_work_items` ADD `escalated` integer DEFAULT 0 NOT NULL;