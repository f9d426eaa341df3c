ALTER TABLE "llm_threads" ADD COLUMN "traceparent" text;--> statement-breakpoint
ALTER TABLE "llm_work_items" ADD COLUMN "escalated" integer DEFAULT 0 NOT NULL;