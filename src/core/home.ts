/**
 * Where combine keeps its state: COMBINE_HOME, else $XDG_STATE_HOME/combine, else ~/.local/state/combine.
 * Shared by the CLI and the daemon's own entry (daemon/daemon-run.ts), which runs without the CLI.
 */
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

export function resolveHome(env: NodeJS.ProcessEnv = process.env): string {
  if (env.COMBINE_HOME) return resolve(env.COMBINE_HOME);
  if (env.XDG_STATE_HOME) return join(resolve(env.XDG_STATE_HOME), 'combine');
  return join(homedir(), '.local', 'state', 'combine');
}
