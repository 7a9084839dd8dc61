/**
 * The vLLM drafter check on the host, before a deploy launch: the drafter's and the target's
 * config.json and the tensor names in the drafter's safetensors headers (read by a standard
 * library Python one-liner, so gigabytes of weights never cross the link), judged by vLLM's
 * loader rules (engines/vllm/drafter.ts).
 */
import type { Config } from '../config/schema.js';
import type { Host } from '../hosts/host.js';
import { moduleLaunch } from '../stages/extract/index.js';
import { safetensorsNamesScript, vllmLoaderProblems } from '../engines/index.js';
import { readJson } from './server-launches.js';

export async function vllmDrafterCheck(
  host: Host,
  config: Config,
  drafterDir: string,
  draftConfig: unknown,
): Promise<string[]> {
  const targetConfig = await readJson(host, `${config.target['model-path']}/config.json`);
  const files = (await host.list(drafterDir).catch(() => []))
    .map((e) => e.path)
    .filter((p) => p.endsWith('.safetensors'));
  let tensorNames: string[] | undefined;
  if (files.length > 0) {
    const python = moduleLaunch(config.server.launcher)?.interpreter ?? 'python3';
    const r = await host.exec([python, '-c', safetensorsNamesScript, ...files], { timeoutMs: 60_000 });
    if (r.code === 0) tensorNames = JSON.parse(r.stdout.trim()) as string[];
  }
  return vllmLoaderProblems({ draftConfig, targetConfig, tensorNames });
}
