/**
 * The simulator's own CPU per call (issue 18 target 9: it shares the cores with the daemons in bench target 9 and
 * diag-pg): the simulator in a child process (src/sim/main.ts's server, latency 200 ms), and calls like the
 * daemons' — the built-in epic operation's request, through the daemon's own provider (daemon/openai-provider.ts,
 * keep-alive) at 96 in flight — sent from this process. Prints the child's CPU µs per call (/proc), after a warm-up.
 *
 *   npx tsx bench/sim-cost.ts [calls=6000] [warm-up=3000]
 */
import { fork } from 'node:child_process';
import type { ProviderConfig } from '../src/daemon/config/config.js';
import { processCpuMicros } from './lib/proc.js';
import { createOpenAIProvider } from '../src/daemon/openai-provider.js';
import type { ChatRequest } from '../src/domain/prompts.js';
import { STORIES_JSON_SCHEMA } from '../src/operations/builtin/story_generate_epic/schema.js';
import { storyMessages } from '../src/operations/builtin/story_generate_epic/prompt.js';

const IN_FLIGHT = 96;

if (process.argv[2] === '--child') {
  const { createSimulator } = await import('../src/sim/simulator.js');
  const sim = await createSimulator({ latencyMs: 200 });
  // Exits when told (not by a signal), so that a --cpu-prof profile is written.
  process.once('message', () => void sim.close().then(() => process.exit(0)));
  process.send!(sim.url);
} else {
  const child = fork(new URL(import.meta.url).pathname, ['--child'], {
    execArgv: [...process.execArgv, ...(process.env.SIM_COST_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.SIM_COST_PROFILE_DIR}`] : [])],
  });
  // Stopped however the run ends: a failed call must not leave the simulator running.
  try {
    const CALLS = Number(process.argv[2] ?? 6000);
    const WARMUP = Number(process.argv[3] ?? 3000);
    const url = await new Promise<string>((resolve) => child.once('message', (m) => resolve(String(m))));
    const config: ProviderConfig = {
      baseURL: url,
      apiKey: 'bench',
      model: 'bench',
      temperature: 0.2,
      maxTokens: 2000,
      callTimeoutMs: 60_000,
      responseFormat: 'json_schema',
      maxAnswerBytes: 10 * 2 ** 20,
    };
    const provider = createOpenAIProvider(config, IN_FLIGHT);
    const cpuMs = () => processCpuMicros(child.pid!) / 1000;
    let n = 0;
    const run = async (count: number) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          while (next < count) {
            const i = next++;
            n++;
            const messages = storyMessages(
              { id: 'p1', name: 'Project p1' },
              { id: `E${n}`, title: `Epic ${n} of the bench`, description: `What epic ${n} is about, in a sentence or two.` },
            );
            const request: ChatRequest = {
              model: 'bench',
              messages,
              response_format: { type: 'json_schema', json_schema: { name: 'story_generate_epic', strict: false, schema: STORIES_JSON_SCHEMA } },
              temperature: 0.2,
              max_tokens: 2000,
            };
            const res = await provider.send(request, new AbortController().signal, {});
            if (res.httpStatus !== 200) throw new Error(`status ${res.httpStatus} (${i})`);
          }
        }),
      );
    };
    await run(WARMUP);
    const c0 = cpuMs();
    const t0 = performance.now();
    await run(CALLS);
    const ms = cpuMs() - c0;
    const secs = (performance.now() - t0) / 1000;
    console.log(
      `simulator: ${((ms * 1000) / CALLS).toFixed(0)} µs CPU per call over ${CALLS} calls (${(CALLS / secs).toFixed(0)} calls/s, ${(ms / 1000 / secs).toFixed(2)} cores)`,
    );
  } finally {
    if (child.connected) child.send('stop');
  }
}
