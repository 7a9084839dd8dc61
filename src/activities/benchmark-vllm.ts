/**
 * The benchmark's load generator against a vLLM server (server.engine vllm): aerie's driver with
 * vLLM's control calls, its tokenizer and its spec-decode counters.
 */
import type { Config } from '../config/schema.js';
import { counterDelta, VllmClient, windowAcceptLength, type SpecCounters } from '../engines/index.js';
import { benchServingDatasetName, type PromptPool } from '../bench/dataset.js';
import { aerieDriver, type MeasureLevel, type Variant } from '../bench/sweep.js';

/**
 * aerie's load generator against a vLLM server: the same closed loop over the OpenAI chat API;
 * prompt and answer lengths by vLLM's /tokenize; the accept length of each level's measured
 * requests from vLLM's counters read just before and just after them (no cache to flush:
 * vLLM's /reset_prefix_cache exists only in its dev mode).
 */
export function vllmAerieDriver(config: Config, variant: Variant, baseUrl: string, pool: PromptPool): MeasureLevel {
  const b = config.stages.benchmark;
  const model = config.target['model-path'];
  const client = new VllmClient(baseUrl, { timeoutMs: 60_000 });
  return aerieDriver({
    baseUrl,
    api: b.api,
    outputLen: b['output-len'],
    warmup: b.warmup,
    model,
    // Only the simulator's mark is passed on: vLLM's version is not an SGLang release for bench_serving's rules.
    control: {
      flushCache: async () => 'vLLM: nothing flushed',
      serverInfo: async (signal) => {
        const { aerie_sim } = await client.versionInfo(signal);
        return aerie_sim === undefined ? {} : { aerie_sim };
      },
    },
    countTokens: (texts, addSpecialTokens, signal) => client.countTokens(model, texts, addSpecialTokens, signal),
    acceptWindow:
      variant === 'eagle3'
        ? {
            open: (signal) => client.specCounters(signal),
            close: async (opened, signal) => {
              const after = await client.specCounters(signal);
              return opened && after ? windowAcceptLength(counterDelta(opened as SpecCounters, after)) : undefined;
            },
          }
        : undefined,
    meta: {
      backend: 'openai-chat',
      datasetName: benchServingDatasetName(pool.kind),
      randomInputLen: b['input-len'],
      randomOutputLen: b['output-len'],
      randomRangeRatio: pool.kind === 'random' ? 1 : undefined,
      sharegptOutputLen: pool.kind === 'random' ? undefined : b['output-len'],
    },
  });
}
