/**
 * A proxy in front of the simulator that rewrites each 200 body, as a provider answering something odd
 * would: `edit` gets the parsed body and the request's text, and changes the body in place. `JSON.stringify`
 * then puts it on the wire (a raw NUL as the JSON escape `\u0000`, as a provider would).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface AnswerProxy {
  /** The base URL to give the daemon as OPENAI_BASE_URL. */
  url: string;
  close(): Promise<void>;
}

/** Starts the proxy in front of the simulator at `simUrl` (its `/v1` URL). */
export async function startAnswerProxy(simUrl: string, edit: (body: any, request: string) => void): Promise<AnswerProxy> {
  const target = simUrl.replace(/\/v1\/?$/, '');
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'content-length') headers[k] = v;
    const r = await fetch(`${target}${req.url}`, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
    let text = await r.text();
    if (r.status === 200) {
      const body = JSON.parse(text);
      edit(body, Buffer.concat(chunks).toString());
      text = JSON.stringify(body);
    }
    res.writeHead(r.status, { 'content-type': 'application/json' }).end(text);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
