ALTER TABLE "document_parts" ADD COLUMN "version" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- The stored parts were written by their document's version at the latest: a reader holding that
-- version has them. 0 (the default) stays for a part written by a build before this column (always read).
UPDATE "document_parts" SET "version" = d."version" FROM "documents" d WHERE d."id" = "document_parts"."document_id";
