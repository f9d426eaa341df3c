/** Where combine keeps its state: COMBINE_HOME, else $XDG_STATE_HOME/combine, else ~/.local/state/combine. */
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

export function resolveHome(env: NodeJS.ProcessEnv = process.env): string {
  if (env.COMBINE_HOME) return resolve(env.COMBINE_HOME);
  if (env.XDG_STATE_HOME) return join(resolve(env.XDG_STATE_HOME), 'combine');
  return join(homedir(), '.local', 'state', 'combine');
}

export function homeFiles(home: string) {
  return {
    socket: join(home, 'combine.sock'),
    pid: join(home, 'daemon.pid'),
    log: join(home, 'daemon.log'),
    db: join(home, 'combine.db'),
    /** The HTTP API's bearer token (made by the daemon when it first serves HTTP). */
    httpToken: join(home, 'http.token'),
  };
}
