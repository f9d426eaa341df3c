CREATE TABLE `llm_ledger_checkpoints` (
	`from_seq` integer PRIMARY KEY NOT NULL,
	`to_seq` integer NOT NULL,
	`hash_before` text NOT NULL,
	`hash_after` text NOT NULL,
	`prune_id` text NOT NULL,
	`cutoff_at` integer NOT NULL,
	`created_at` integer NOT NULL
);
