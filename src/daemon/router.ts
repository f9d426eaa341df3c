/**
 * The tRPC router: the daemon's whole API. Queries and mutations travel over HTTP on the Unix socket,
 * subscriptions (`follow`) over WebSocket on the same socket. Input is validated here (zod); errors a
 * user caused carry `data.combine` = {kind, code} so the CLI can choose its exit code.
 */
import { initTRPC } from '@trpc/server';
import { z } from 'zod';
import type { App } from './app.js';
import { CommandError } from './commands.js';

export interface RouterContext {
  app: App;
  /** Asks the daemon to shut down gracefully after answering. */
  requestStop: () => void;
}

const t = initTRPC.context<RouterContext>().create({
  errorFormatter({ shape, error }) {
    const cause = error.cause;
    const combine = cause instanceof CommandError ? { kind: cause.kind, code: cause.code ?? null } : null;
    return { ...shape, data: { ...shape.data, combine } };
  },
});

const id = z.string().min(1).max(200);
const generateInput = z.object({
  project_id: id,
  force: z.boolean().default(false),
  deadline_ms: z.number().int().positive().nullable().default(null),
  created_by: z.string().max(200).nullable().default(null),
});

export const appRouter = t.router({
  daemon: t.router({
    status: t.procedure.query(({ ctx }) => ctx.app.status()),
    stop: t.procedure.mutation(({ ctx }) => {
      ctx.requestStop();
      return { stopping: true, pid: process.pid };
    }),
  }),
  health: t.procedure.query(({ ctx }) => ctx.app.health()),
  stats: t.procedure.query(({ ctx }) => ctx.app.stats()),
  metrics: t.procedure.query(({ ctx }) => ctx.app.metrics.text()),

  project: t.router({
    import: t.procedure.input(z.object({ file: z.unknown() })).mutation(({ ctx, input }) => ctx.app.importProject(input.file)),
    list: t.procedure.query(({ ctx }) => ctx.app.projects()),
    show: t.procedure.input(z.object({ project_id: id })).query(({ ctx, input }) => ctx.app.project(input.project_id)),
  }),
  backlog: t.procedure.input(z.object({ project_id: id })).query(({ ctx, input }) => ctx.app.backlog(input.project_id)),

  generate: t.router({
    epic: t.procedure.input(generateInput.extend({ epic_id: id })).mutation(({ ctx, input }) =>
      ctx.app.generateEpic(input.project_id, input.epic_id, {
        force: input.force,
        deadlineAt: input.deadline_ms === null ? null : Date.now() + input.deadline_ms,
        createdBy: input.created_by,
      }),
    ),
    /** What generate-all would cost at most; enqueues nothing. */
    allDryRun: t.procedure.input(z.object({ project_id: id })).query(({ ctx, input }) => ctx.app.dryRunGenerateAll(input.project_id)),
    all: t.procedure.input(generateInput).mutation(({ ctx, input }) =>
      ctx.app.generateAll(input.project_id, {
        force: input.force,
        deadlineAt: input.deadline_ms === null ? null : Date.now() + input.deadline_ms,
        createdBy: input.created_by,
      }),
    ),
  }),

  thread: t.procedure.input(z.object({ thread_id: id })).query(({ ctx, input }) => ctx.app.thread(input.thread_id)),
  threads: t.procedure
    .input(z.object({ active: z.boolean().default(false), project_id: id.nullable().default(null), limit: z.number().int().min(1).max(10_000).default(100) }))
    .query(({ ctx, input }) => ctx.app.threads({ active: input.active, projectId: input.project_id, limit: input.limit })),
  follow: t.procedure.input(z.object({ thread_id: id })).subscription(async function* ({ ctx, input, signal }) {
    yield* ctx.app.follow(input.thread_id, signal);
  }),
  retry: t.procedure.input(z.object({ thread_id: id })).mutation(({ ctx, input }) => ctx.app.retry(input.thread_id)),
  replay: t.procedure
    .input(z.object({ thread_id: id, apply: z.boolean().default(false), response_seq: z.number().int().positive().nullable().default(null) }))
    .mutation(({ ctx, input }) => ctx.app.replay(input.thread_id, { apply: input.apply, responseSeq: input.response_seq })),
  cancel: t.procedure.input(z.object({ thread_id: id })).mutation(({ ctx, input }) => ctx.app.cancel(input.thread_id)),

  usage: t.procedure
    .input(z.object({ project_id: id.nullable().default(null) }))
    .query(({ ctx, input }) => ctx.app.usage(input.project_id)),
  config: t.router({
    show: t.procedure.query(({ ctx }) => ctx.app.configShow()),
  }),
  prune: t.procedure
    .input(z.object({ older_than_ms: z.number().int().min(0), dry_run: z.boolean().default(false) }))
    .mutation(({ ctx, input }) => ctx.app.prune(input.older_than_ms, input.dry_run)),
  schedule: t.router({
    add: t.procedure
      .input(
        z.object({
          project_id: id,
          operation: z.string().min(1).max(50),
          cron: z.string().min(1).max(200),
          timezone: z.string().min(1).max(100).default('UTC'),
          catch_up: z.string().min(1).max(20).default('latest'),
        }),
      )
      .mutation(({ ctx, input }) => ctx.app.schedules.add(input)),
    list: t.procedure
      .input(z.object({ all: z.boolean().default(false) }))
      .query(({ ctx, input }) => ctx.app.schedules.list(input.all)),
    pause: t.procedure.input(z.object({ schedule_id: id })).mutation(({ ctx, input }) => ctx.app.schedules.pause(input.schedule_id)),
    resume: t.procedure.input(z.object({ schedule_id: id })).mutation(({ ctx, input }) => ctx.app.schedules.resume(input.schedule_id)),
    remove: t.procedure.input(z.object({ schedule_id: id })).mutation(({ ctx, input }) => ctx.app.schedules.remove(input.schedule_id)),
    runs: t.procedure
      .input(z.object({ schedule_id: id.nullable().default(null), limit: z.number().int().min(1).max(10_000).default(50) }))
      .query(({ ctx, input }) => ctx.app.schedules.runs(input.schedule_id, input.limit)),
  }),
  briefing: t.procedure
    .input(z.object({ project_id: id, date: z.string().max(20).nullable().default(null) }))
    .query(({ ctx, input }) => ctx.app.schedules.briefing(input.project_id, input.date)),

  ledger: t.router({
    thread: t.procedure.input(z.object({ thread_id: id })).query(({ ctx, input }) => ctx.app.ledger(input.thread_id)),
    verify: t.procedure.query(({ ctx }) => ctx.app.verifyLedger()),
    export: t.procedure
      .input(
        z
          .object({ thread_id: id.nullable().default(null), project_id: id.nullable().default(null) })
          .refine((v) => (v.thread_id === null) !== (v.project_id === null), { message: 'give a thread id or --project, not both' }),
      )
      .query(({ ctx, input }) => ctx.app.exportLedger({ threadId: input.thread_id, projectId: input.project_id })),
    import: t.procedure.input(z.object({ text: z.string() })).mutation(({ ctx, input }) => ctx.app.importLedger(input.text)),
  }),
});

export type AppRouter = typeof appRouter;
