CREATE TABLE "llm_rate_limits" (
	"model" text PRIMARY KEY NOT NULL,
	"requests_level" double precision,
	"tokens_level" double precision,
	"updated_at" bigint NOT NULL,
	"parked_until" bigint DEFAULT 0 NOT NULL
);
