CREATE TABLE `document_parts` (
	`document_id` text NOT NULL,
	`part_key` text NOT NULL,
	`ord` real NOT NULL,
	`content` text NOT NULL,
	PRIMARY KEY(`document_id`, `part_key`),
	FOREIGN KEY (`document_id`) REFERENCES `documents`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `idx_document_parts_ord` ON `document_parts` (`document_id`,`ord`);--> statement-breakpoint
ALTER TABLE `documents` ADD `parts_field` text;--> statement-breakpoint
ALTER TABLE `documents` ADD `parts_key` text;--> statement-breakpoint
ALTER TABLE `documents` ADD `parts_chars` integer DEFAULT 0 NOT NULL;