CREATE TABLE "document_parts" (
	"document_id" text COLLATE "C" NOT NULL,
	"part_key" text COLLATE "C" NOT NULL,
	"ord" double precision NOT NULL,
	"content" text COLLATE "C" NOT NULL,
	CONSTRAINT "document_parts_document_id_part_key_pk" PRIMARY KEY("document_id","part_key")
);
--> statement-breakpoint
ALTER TABLE "documents" ADD COLUMN "parts_field" text COLLATE "C";--> statement-breakpoint
ALTER TABLE "documents" ADD COLUMN "parts_key" text COLLATE "C";--> statement-breakpoint
ALTER TABLE "documents" ADD COLUMN "parts_chars" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "document_parts" ADD CONSTRAINT "document_parts_document_id_documents_id_fk" FOREIGN KEY ("document_id") REFERENCES "public"."documents"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "idx_document_parts_ord" ON "document_parts" USING btree ("document_id","ord");