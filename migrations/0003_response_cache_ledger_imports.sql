CREATE TABLE `llm_ledger_imports` (
	`seq` integer PRIMARY KEY NOT NULL,
	`import_id` text NOT NULL,
	`source_seq` integer NOT NULL,
	`source_prev_hash` text NOT NULL,
	`source_hash` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `idx_ledger_imports_import` ON `llm_ledger_imports` (`import_id`);--> statement-breakpoint
CREATE TABLE `llm_response_cache` (
	`request_hash` text PRIMARY KEY NOT NULL,
	`prompt_seq` integer NOT NULL,
	`response_seq` integer NOT NULL,
	`created_at` integer NOT NULL
);
