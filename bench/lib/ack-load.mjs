// A load-generator process for the concurrent-ack target: `node ack-load.mjs <socket> <concurrency> <json list of [project, epic]>`
// on stdin. Sends generate.epic over keep-alive connections, `concurrency` at a time, and prints
// {"started":<ms>,"ended":<ms>,"acks":<n>} (wall-clock ms, comparable across processes).
// Plain JS: spawning it must not cost a TypeScript loader's start-up.
import http from 'node:http';

const [socketPath, concurrencyArg] = process.argv.slice(2);
const concurrency = Number(concurrencyArg);
let input = '';
process.stdin.setEncoding('utf8');
for await (const chunk of process.stdin) input += chunk;
const targets = JSON.parse(input);
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });

function generate([project_id, epic_id]) {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ project_id, epic_id, created_by: 'bench' });
    const req = http.request(
      { socketPath, agent, method: 'POST', path: '/generate.epic', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (data += c));
        res.on('end', () => {
          if (res.statusCode !== 200) return reject(new Error(`${res.statusCode} ${data}`));
          if (JSON.parse(data).result.data.deduplicated) return reject(new Error('a command was deduplicated: it did not write'));
          resolve();
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

// Open the connections before the clock starts.
await Promise.all(
  Array.from(
    { length: Math.min(concurrency, targets.length) },
    () => new Promise((r) => http.get({ socketPath, agent, path: '/health' }, (res) => res.resume().on('end', r))),
  ),
);
let next = 0;
const t0 = performance.timeOrigin + performance.now();
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (next < targets.length) await generate(targets[next++]);
  }),
);
const t1 = performance.timeOrigin + performance.now();
agent.destroy();
process.stdout.write(JSON.stringify({ started: t0, ended: t1, acks: targets.length }));
