/**
 * Loading operations: the built-ins, every `*.mjs` / `*.js` in `COMBINE_HOME/operations/` (sorted by
 * name), then the files config `operations.modules` lists. A module default-exports one definition
 * (`.mjs` is an ES module; a `.js` here is CommonJS, `module.exports = {…}`). The first bad module stops
 * loading with an OperationDefinitionError naming its file and the field.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BUILTIN_OPERATIONS } from './builtin/index.js';
import { OperationRegistry, type OperationSettings } from './registry.js';
import { validateDefinition, type ValidDefinition } from './validate.js';
import { OperationDefinitionError } from '../core/errors.js';

export const OPERATIONS_DIR = 'operations';
const MODULE_FILE = /\.(mjs|js)$/;

export function builtinDefinitions(): ValidDefinition[] {
  return BUILTIN_OPERATIONS.map((d) => validateDefinition(d, 'builtin'));
}

/** The module files a daemon for `home` loads, in load order. Relative config paths are read from `home`. */
export function operationModuleFiles(home: string, configured: readonly string[]): string[] {
  const dir = join(home, OPERATIONS_DIR);
  const found =
    existsSync(dir) && statSync(dir).isDirectory()
      ? readdirSync(dir)
          .filter((f) => MODULE_FILE.test(f))
          .sort()
          .map((f) => join(dir, f))
      : [];
  const listed = configured.map((p) => (isAbsolute(p) ? p : resolve(home, p)));
  return [...new Set([...found, ...listed])];
}

/** Imports one module and validates its default export. */
export async function loadOperationModule(file: string): Promise<ValidDefinition> {
  if (!existsSync(file)) throw new OperationDefinitionError(file, 'module', 'no such file');
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (err) {
    throw new OperationDefinitionError(file, 'module', `cannot be loaded: ${(err as Error).message}`);
  }
  return validateDefinition(mod.default, file);
}

/** The registry of a daemon: built-ins and the home's modules, resolved against the configuration, plus the daemon's own (`internal`). */
export async function loadOperations(
  home: string,
  modules: readonly string[],
  settings: OperationSettings,
  internal: readonly ValidDefinition[] = [],
): Promise<OperationRegistry> {
  const definitions = builtinDefinitions();
  for (const file of operationModuleFiles(home, modules)) definitions.push(await loadOperationModule(file));
  return new OperationRegistry(definitions, settings, internal);
}
