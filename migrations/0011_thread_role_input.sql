ALTER TABLE `schedules` ADD `input` text DEFAULT '{}' NOT NULL;--> statement-breakpoint
ALTER TABLE `llm_threads` ADD `role` text DEFAULT 'work' NOT NULL;--> statement-breakpoint
ALTER TABLE `llm_threads` ADD `input` text DEFAULT '{}' NOT NULL;--> statement-breakpoint
-- Hand-written backfill. A thread's input is its target_ref without doc_type (the built-ins' target_ref
-- held exactly their input fields); a thread with no work item is an orchestration (a parent's work is
-- done by its children). Neither needs to know an operation's name.
UPDATE `llm_threads` SET `input` = json_remove(`target_ref`, '$.doc_type');--> statement-breakpoint
UPDATE `llm_threads` SET `role` = 'orchestration'
WHERE NOT EXISTS (SELECT 1 FROM `llm_work_items` `w` WHERE `w`.`thread_id` = `llm_threads`.`id`);
