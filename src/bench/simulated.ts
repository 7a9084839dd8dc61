// Whether a report's numbers came from aerie's simulator (sim/) rather than a GPU: told by
// what the server itself says, never by aerie's config (a launcher path proves nothing).
// The simulator's /server_info carries `aerie_sim` {name, release} (sim/sglang/http.ts
// serverInfo), a key no SGLang release writes (its /server_info is the resolved server
// arguments plus scheduler state: sglang==0.5.23:srt/entrypoints/http_server.py:863-880).

/** "aerie-sim 0.5.23" when the server_info is the simulator's; null for anything else. */
export function simulatorOf(info: unknown): string | null {
  if (!info || typeof info !== 'object') return null;
  const m = (info as Record<string, unknown>).aerie_sim;
  if (!m || typeof m !== 'object') return null;
  const { name, release } = m as Record<string, unknown>;
  return [typeof name === 'string' ? name : 'aerie-sim', typeof release === 'string' ? release : ''].join(' ').trim();
}

export const SIMULATED_LABEL = 'SIMULATED';
