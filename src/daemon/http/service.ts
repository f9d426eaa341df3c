/**
 * The HTTP server's lifecycle inside the daemon: started at start-up when a port is configured, or
 * later on request (`combine ui`), at most once; the port it got is what `daemon status` reports.
 */
import { startHttpServer, type HttpServer, type HttpServerOptions } from './server.js';

/** `combine ui`'s port when neither the command nor config.json names one. */
export const DEFAULT_HTTP_PORT = 7878;

export interface HttpAddress {
  port: number;
  url: string;
}

export class HttpService {
  private starting: Promise<HttpServer> | null = null;
  private server: HttpServer | null = null;

  constructor(
    private readonly o: Omit<HttpServerOptions, 'port'>,
    /** config.json's http.port, if set: used when a request names no port. */
    private readonly configuredPort: number | null,
  ) {}

  /** Serves HTTP (on `port`, else the configured port, else 7878) unless it already does; resolves to where. */
  async serve(port: number | null): Promise<HttpAddress> {
    this.starting ??= startHttpServer({ ...this.o, port: port ?? this.configuredPort ?? DEFAULT_HTTP_PORT }).then(
      (s) => {
        this.o.logger.info({ component: 'http', url: s.url }, 'serving the HTTP API and dashboard');
        return (this.server = s);
      },
      (err: Error) => {
        this.starting = null;
        throw new Error(`cannot serve HTTP on 127.0.0.1:${port ?? this.configuredPort ?? DEFAULT_HTTP_PORT}: ${err.message}`);
      },
    );
    const s = await this.starting;
    return { port: s.port, url: s.url };
  }

  current(): HttpAddress | null {
    return this.server ? { port: this.server.port, url: this.server.url } : null;
  }

  async close(): Promise<void> {
    const s = await this.starting?.catch(() => null);
    await s?.close();
  }
}
