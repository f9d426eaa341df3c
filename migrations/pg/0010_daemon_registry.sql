CREATE TABLE "llm_daemons" (
	"owner" text COLLATE "C" PRIMARY KEY NOT NULL,
	"settings_hash" text COLLATE "C" NOT NULL,
	"settings" text COLLATE "C" NOT NULL,
	"started_at" bigint NOT NULL,
	"seen_at" bigint NOT NULL
);
