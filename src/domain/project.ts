/** The project import format and the `epic_architecture` document it becomes. */
import { z } from 'zod';

/** Ids appear in idempotency keys and lock scopes (`epic:{project}:{epic}`), so keep them plain. */
export const idSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(128, 'must be at most 128 characters')
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'must start with a letter or digit and use only letters, digits, ".", "_" and "-"');

/**
 * The daemon's own project, holding the canary's document. Imported ids cannot contain ':', so it is
 * never a user's; lists of projects and threads leave it out.
 */
export const SYSTEM_PROJECT_ID = 'combine:system';

export const epicSchema = z.object({
  id: idSchema,
  title: z.string().trim().min(1, 'must not be empty'),
  description: z.string(),
});
export type Epic = z.infer<typeof epicSchema>;

export const projectFileSchema = z
  .object({
    id: idSchema,
    name: z.string().trim().min(1, 'must not be empty'),
    epics: z.array(epicSchema),
  })
  .superRefine((p, ctx) => {
    const seen = new Set<string>();
    p.epics.forEach((e, i) => {
      if (seen.has(e.id)) ctx.addIssue({ code: 'custom', path: ['epics', i, 'id'], message: `duplicate epic id "${e.id}"` });
      seen.add(e.id);
    });
  });
export type ProjectFile = z.infer<typeof projectFileSchema>;

/** The document a project import writes: its epics. */
export const EPIC_ARCHITECTURE = 'epic_architecture';

export const epicArchitectureSchema = z.object({ epics: z.array(epicSchema) });
export type EpicArchitecture = z.infer<typeof epicArchitectureSchema>;

/** Reads a stored `epic_architecture` document (throws if it does not match the schema). */
export function parseEpicArchitecture(content: string): EpicArchitecture {
  return epicArchitectureSchema.parse(JSON.parse(content));
}

export type ParseResult<T> = { ok: true; value: T } | { ok: false; errors: string[] };

/** One line per problem, each naming the field: `epics[2].title: must not be empty`. */
export function describeZodIssues(error: z.ZodError): string[] {
  return error.issues.map((issue) => `${formatPath(issue.path)}: ${issue.message}`);
}

function formatPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '(root)';
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}

/** Validates an import file's parsed JSON; errors name each bad field. */
export function parseProjectFile(json: unknown): ParseResult<ProjectFile> {
  const result = projectFileSchema.safeParse(json);
  return result.success ? { ok: true, value: result.data } : { ok: false, errors: describeZodIssues(result.error) };
}
