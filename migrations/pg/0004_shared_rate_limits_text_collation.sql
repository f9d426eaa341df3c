CREATE TABLE "llm_rate_limits" (
	"model" text COLLATE "C" PRIMARY KEY NOT NULL,
	"requests_level" double precision,
	"tokens_level" double precision,
	"updated_at" bigint NOT NULL,
	"parked_until" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
ALTER TABLE "llm_call_records" ALTER COLUMN "thread_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_call_records" ALTER COLUMN "work_item_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_call_records" ALTER COLUMN "model" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_call_records" ALTER COLUMN "outcome" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_call_records" ALTER COLUMN "provider_request_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_charges" ALTER COLUMN "id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_charges" ALTER COLUMN "work_item_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_charges" ALTER COLUMN "thread_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_charges" ALTER COLUMN "project_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_charges" ALTER COLUMN "model" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_charges" ALTER COLUMN "status" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_charges" ALTER COLUMN "day" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "documents" ALTER COLUMN "id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "documents" ALTER COLUMN "project_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "documents" ALTER COLUMN "doc_type" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "documents" ALTER COLUMN "doc_key" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "documents" ALTER COLUMN "doc_key" SET DEFAULT '';--> statement-breakpoint
ALTER TABLE "documents" ALTER COLUMN "content" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_ledger_checkpoints" ALTER COLUMN "hash_before" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_ledger_checkpoints" ALTER COLUMN "hash_after" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_ledger_checkpoints" ALTER COLUMN "prune_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_ledger_entries" ALTER COLUMN "thread_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_ledger_entries" ALTER COLUMN "work_item_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_ledger_entries" ALTER COLUMN "entry_type" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_ledger_entries" ALTER COLUMN "payload" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_ledger_entries" ALTER COLUMN "prev_hash" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_ledger_entries" ALTER COLUMN "hash" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_ledger_head" ALTER COLUMN "hash" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_ledger_imports" ALTER COLUMN "import_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_ledger_imports" ALTER COLUMN "source_prev_hash" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_ledger_imports" ALTER COLUMN "source_hash" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "locks" ALTER COLUMN "scope" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "locks" ALTER COLUMN "owner" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "mutations" ALTER COLUMN "id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "mutations" ALTER COLUMN "work_item_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "mutations" ALTER COLUMN "thread_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "mutations" ALTER COLUMN "document_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "mutations" ALTER COLUMN "summary" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_project_spend" ALTER COLUMN "project_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_project_spend" ALTER COLUMN "day" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "projects" ALTER COLUMN "id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "projects" ALTER COLUMN "name" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_response_cache" ALTER COLUMN "request_hash" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "kind" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "space_type" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "space_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "target_ref" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "status" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "status" SET DEFAULT 'open';--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "parent_thread_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "idempotency_key" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "role" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "role" SET DEFAULT 'work';--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "input" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "input" SET DEFAULT '{}';--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "created_by" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_threads" ALTER COLUMN "traceparent" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_work_items" ALTER COLUMN "id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_work_items" ALTER COLUMN "thread_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_work_items" ALTER COLUMN "status" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_work_items" ALTER COLUMN "status" SET DEFAULT 'queued';--> statement-breakpoint
ALTER TABLE "llm_work_items" ALTER COLUMN "lock_scope" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_work_items" ALTER COLUMN "project_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_work_items" ALTER COLUMN "project_id" SET DEFAULT '';--> statement-breakpoint
ALTER TABLE "llm_work_items" ALTER COLUMN "lease_owner" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_work_items" ALTER COLUMN "error_code" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_work_items" ALTER COLUMN "error_message" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedule_runs" ALTER COLUMN "id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedule_runs" ALTER COLUMN "schedule_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedule_runs" ALTER COLUMN "period_key" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedule_runs" ALTER COLUMN "status" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedule_runs" ALTER COLUMN "claim_owner" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedule_runs" ALTER COLUMN "thread_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedule_runs" ALTER COLUMN "error_message" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedules" ALTER COLUMN "id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedules" ALTER COLUMN "project_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedules" ALTER COLUMN "operation" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedules" ALTER COLUMN "input" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedules" ALTER COLUMN "input" SET DEFAULT '{}';--> statement-breakpoint
ALTER TABLE "schedules" ALTER COLUMN "cron" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedules" ALTER COLUMN "timezone" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedules" ALTER COLUMN "catch_up" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "schedules" ALTER COLUMN "status" SET DATA TYPE text COLLATE "C";