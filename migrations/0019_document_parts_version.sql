ALTER TABLE `document_parts` ADD `version` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- The stored parts were written by their document's version at the latest: a reader holding that
-- version has them. 0 (the default) stays for a part written by a build before this column (always read).
UPDATE `document_parts` SET `version` = (SELECT `version` FROM `documents` WHERE `documents`.`id` = `document_parts`.`document_id`);
