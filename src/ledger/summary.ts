/** One-line human summaries of ledger entries, for `combine ledger`, `--follow` and logs. */

export function summarizeLedgerEntry(entryType: string, payload: Record<string, any>): string {
  switch (entryType) {
    case 'prompt': {
      const msgs = payload.request?.messages?.length ?? 0;
      const repair = payload.repair ? ` (repair ${payload.repair})` : '';
      return `asked ${payload.request?.model ?? '?'} (${msgs} messages)${repair}`;
    }
    case 'response': {
      const u = payload.usage;
      const tokens = u ? `, ${u.prompt_tokens}+${u.completion_tokens} tokens` : '';
      if (payload.replay_of) return `HTTP ${payload.http_status}, replay of #${payload.replay_of} (no call, not paid again)`;
      if (payload.cached_from) return `HTTP ${payload.http_status}, cached from #${payload.cached_from} (no call, not paid again)`;
      return `HTTP ${payload.http_status} in ${payload.latency_ms} ms${tokens}`;
    }
    case 'parse_report': {
      const resumed = payload.resumed
        ? ' (resumed after restart from the recorded response)'
        : payload.replay_of
          ? ` (replay of #${payload.replay_of})`
          : payload.cached_from
            ? ` (cached from #${payload.cached_from})`
            : '';
      return payload.ok
        ? `valid: ${payload.items ?? 0} ${payload.item_noun ?? 'items'}${resumed}`
        : `invalid: ${(payload.errors ?? []).slice(0, 3).join('; ')}${resumed}`;
    }
    case 'mutation_report':
      return `${payload.doc_type} v${payload.from_version} → v${payload.to_version}${payload.replay_of ? ` (replay of #${payload.replay_of})` : ''}`;
    case 'error': {
      const next =
        payload.next === 'retry' ? `retry in ${payload.delay_ms} ms` : payload.next === 'repair' ? 'asking for a repair' : String(payload.next ?? '');
      return `${payload.code} (${payload.class}): ${payload.message}${next ? ` → ${next}` : ''}`;
    }
    default:
      return entryType;
  }
}
