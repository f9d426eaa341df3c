-- Hand-written: whether a daemon claims bulk work now, written with each renewal (runtime/daemon-registry.ts).
-- Liveness (`seen_at`) and project ownership are apart: a live daemon paused by pressure, or stopping, keeps
-- renewing but owns no project, so the other daemons serve its projects at once (domain/project-owners.ts).
-- 1 by default: a row of a daemon that renews without it (an older process) keeps owning as before.
ALTER TABLE "llm_daemons" ADD COLUMN "claiming" integer DEFAULT 1 NOT NULL;
