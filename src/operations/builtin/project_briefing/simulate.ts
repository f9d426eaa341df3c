/**
 * The simulator's answer to a briefing request: written from the facts in the prompt (its epic and
 * thread lines), so it reflects the project's state the way a model would.
 */
export function simulatedBriefing(prompt: string) {
  const project = /Project: (.+?) \(id:/.exec(prompt)?.[1] ?? 'the project';
  const date = /Briefing date: (.+)/.exec(prompt)?.[1]?.trim() ?? 'today';
  const epics = [...prompt.matchAll(/^- (\S+) "(.*)": (\d+) stories$/gm)].map((m) => ({ id: m[1]!, title: m[2]!, stories: Number(m[3]) }));
  const failed =
    /Failed threads:\n([\s\S]*?)\nRunning threads:/
      .exec(prompt)?.[1]
      ?.split('\n')
      .filter((l) => l.startsWith('- ')) ?? [];
  const running =
    /Running threads:\n([\s\S]*?)\n\n/
      .exec(prompt)?.[1]
      ?.split('\n')
      .filter((l) => l.startsWith('- ')) ?? [];
  const stories = epics.reduce((n, e) => n + e.stories, 0);
  const done = epics.filter((e) => e.stories > 0);
  return {
    summary: `${project} on ${date}: ${stories} stories across ${done.length} of ${epics.length} epics; ${failed.length} failed and ${running.length} running threads.`,
    highlights: done.map((e) => `${e.title}: ${e.stories} stories ready`),
    risks: failed.map((l) => `Failed: ${l.slice(2)}`),
    next_steps: [
      ...epics.filter((e) => e.stories === 0).map((e) => `Generate the stories of "${e.title}"`),
      ...(failed.length > 0 ? ['Retry the failed threads (combine retry <thread-id>)'] : []),
    ],
  };
}
