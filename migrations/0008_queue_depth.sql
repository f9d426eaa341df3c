CREATE TABLE `llm_queue_depth` (
	`id` integer PRIMARY KEY NOT NULL,
	`queued` integer NOT NULL
);
