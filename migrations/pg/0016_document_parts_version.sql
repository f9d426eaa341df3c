ALTER TABLE "document_parts" ADD COLUMN "version" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- The stored parts were written by their document's version at the latest: a reader holding that
-- version has them. 0 (the default) stays for a part written by a build before this column (always read).
UPDATE "document_parts" SET "version" = d."version" FROM "documents" d WHERE d."id" = "document_parts"."document_id";
--> statement-breakpoint
-- Several daemons share this database, and during an upgrade one may still run a build before this column:
-- its UPDATE of a part's content leaves the part's version as it was, and a newer daemon holding that version
-- would keep the content it replaced. Such a part goes back to version 0 (always read again). This build's
-- updates change the version with the content, so the condition is false for them and no function is called.
CREATE FUNCTION "combine_document_part_unversioned"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW."version" := 0;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER "document_parts_unversioned" BEFORE UPDATE ON "document_parts"
FOR EACH ROW WHEN (NEW."content" IS DISTINCT FROM OLD."content" AND NEW."version" = OLD."version")
EXECUTE FUNCTION "combine_document_part_unversioned"();
