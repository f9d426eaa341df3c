/**
 * `combine operations check <file>`: validates one module as the daemon would load it, without a
 * daemon — its definition, its schemas, and its name against the built-ins. Its `child`, when it is
 * not a built-in, must be loaded beside it; that is reported, not refused.
 */
import { BUILTIN_OPERATIONS } from './builtin/index.js';
import { loadOperationModule } from './loader.js';
import { OperationDefinitionError } from '../core/errors.js';

export type CheckResult =
  | { ok: true; file: string; name: string; description: string; role: 'call' | 'orchestration'; warnings: string[] }
  | { ok: false; file: string; error: string };

export async function checkOperationModule(file: string): Promise<CheckResult> {
  try {
    const { definition: d } = await loadOperationModule(file);
    if (BUILTIN_OPERATIONS.some((b) => b.name === d.name)) throw new OperationDefinitionError(file, 'name', `"${d.name}" is already defined by builtin`);
    const warnings: string[] = [];
    if (d.child !== undefined && !BUILTIN_OPERATIONS.some((b) => b.name === d.child)) {
      warnings.push(`child: "${d.child}" is not a built-in; the daemon refuses to start unless a module defines it`);
    }
    return { ok: true, file, name: d.name, description: d.description, role: d.children ? 'orchestration' : 'call', warnings };
  } catch (err) {
    if (err instanceof OperationDefinitionError) return { ok: false, file, error: err.message };
    throw err;
  }
}
