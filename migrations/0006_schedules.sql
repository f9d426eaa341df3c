CREATE TABLE `schedule_runs` (
	`id` text PRIMARY KEY NOT NULL,
	`schedule_id` text NOT NULL,
	`period_key` text NOT NULL,
	`period_at` integer NOT NULL,
	`status` text NOT NULL,
	`claim_owner` text NOT NULL,
	`claimed_at` integer NOT NULL,
	`claims` integer DEFAULT 1 NOT NULL,
	`thread_id` text,
	`error_message` text,
	`responses` integer,
	`prompt_tokens` integer,
	`completion_tokens` integer,
	`total_tokens` integer,
	`created_at` integer NOT NULL,
	`finished_at` integer,
	FOREIGN KEY (`schedule_id`) REFERENCES `schedules`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`thread_id`) REFERENCES `llm_threads`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `uq_schedule_runs_period` ON `schedule_runs` (`schedule_id`,`period_key`);--> statement-breakpoint
CREATE INDEX `idx_schedule_runs_pending` ON `schedule_runs` (`claimed_at`) WHERE status = 'pending';--> statement-breakpoint
CREATE INDEX `idx_schedule_runs_thread` ON `schedule_runs` (`thread_id`) WHERE thread_id IS NOT NULL;--> statement-breakpoint
CREATE TABLE `schedules` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`operation` text NOT NULL,
	`cron` text NOT NULL,
	`timezone` text NOT NULL,
	`catch_up` text NOT NULL,
	`status` text NOT NULL,
	`active_from` integer NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
DROP INDEX `uq_documents_project_type`;--> statement-breakpoint
ALTER TABLE `documents` ADD `doc_key` text DEFAULT '' NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX `uq_documents_project_type_key` ON `documents` (`project_id`,`doc_type`,`doc_key`);