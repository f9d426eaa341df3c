CREATE TABLE `llm_charges` (
	`id` text PRIMARY KEY NOT NULL,
	`work_item_id` text NOT NULL,
	`thread_id` text NOT NULL,
	`project_id` text NOT NULL,
	`model` text NOT NULL,
	`attempt` integer NOT NULL,
	`repair` integer NOT NULL,
	`status` text NOT NULL,
	`day` text NOT NULL,
	`reserved_tokens` integer NOT NULL,
	`reserved_cost_usd` real NOT NULL,
	`prompt_tokens` integer,
	`completion_tokens` integer,
	`total_tokens` integer,
	`cost_usd` real,
	`response_seq` integer,
	`applied` integer DEFAULT 0 NOT NULL,
	`created_at` integer NOT NULL,
	`settled_at` integer,
	FOREIGN KEY (`work_item_id`) REFERENCES `llm_work_items`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`thread_id`) REFERENCES `llm_threads`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `uq_charges_response` ON `llm_charges` (`response_seq`) WHERE response_seq IS NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX `uq_charges_open_reservation` ON `llm_charges` (`work_item_id`) WHERE status = 'reserved';--> statement-breakpoint
CREATE INDEX `idx_charges_project_day` ON `llm_charges` (`project_id`,`day`);--> statement-breakpoint
CREATE INDEX `idx_charges_thread` ON `llm_charges` (`thread_id`);--> statement-breakpoint
CREATE TABLE `llm_project_spend` (
	`project_id` text NOT NULL,
	`day` text NOT NULL,
	`tokens` integer NOT NULL,
	`cost_usd` real NOT NULL,
	PRIMARY KEY(`project_id`, `day`)
);
--> statement-breakpoint
ALTER TABLE `llm_work_items` ADD `project_id` text DEFAULT '' NOT NULL;--> statement-breakpoint
CREATE INDEX `idx_work_items_fair` ON `llm_work_items` (`project_id`,`priority`,`not_before`) WHERE status = 'queued';--> statement-breakpoint
-- Backfill: a work item's project is its thread's space.
UPDATE `llm_work_items` SET `project_id` = (SELECT t.`space_id` FROM `llm_threads` t WHERE t.`id` = `llm_work_items`.`thread_id`);
