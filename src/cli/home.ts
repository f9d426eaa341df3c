/** The files of a COMBINE_HOME (core/home.ts says where the home is). */
import { join } from 'node:path';

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
