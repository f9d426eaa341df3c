-- Issue 20: one row per call instead of three writes (as SQLite's 0017_merge_call_records, which says why).
ALTER TABLE "llm_charges" ADD COLUMN "outcome" text COLLATE "C";--> statement-breakpoint
ALTER TABLE "llm_charges" ADD COLUMN "http_status" integer;--> statement-breakpoint
ALTER TABLE "llm_charges" ADD COLUMN "latency_ms" integer;--> statement-breakpoint
ALTER TABLE "llm_charges" ADD COLUMN "provider_request_id" text COLLATE "C";--> statement-breakpoint
ALTER TABLE "mutations" ADD COLUMN "response_seq" bigint;--> statement-breakpoint
CREATE INDEX "idx_mutations_response" ON "mutations" USING btree ("response_seq") WHERE response_seq IS NOT NULL;--> statement-breakpoint
UPDATE "llm_charges" SET
  "outcome" = r."outcome", "http_status" = r."http_status", "latency_ms" = r."latency_ms",
  "provider_request_id" = r."provider_request_id"
FROM "llm_call_records" r
WHERE r."work_item_id" = "llm_charges"."work_item_id" AND r."created_at" = "llm_charges"."settled_at";--> statement-breakpoint
UPDATE "mutations" SET "response_seq" = (
  SELECT max(c."response_seq") FROM "llm_charges" c WHERE c."thread_id" = "mutations"."thread_id" AND c."applied" = 1
);--> statement-breakpoint
DROP TABLE "llm_call_records" CASCADE;--> statement-breakpoint
ALTER TABLE "llm_charges" DROP COLUMN "applied";
