/**
 * The acceptance gate on the deploy server: does the drafter pay for itself? A few greedy
 * requests of fixed length, their accept length against stages.deploy.acceptance-threshold;
 * below it the deploy is refused (DrafterRejectedError) before any benchmark runs.
 */
import { SglangClient, acceptLengthOf } from '../sglang/client.js';
import { drafterRejectedMessage, gateAcceptLength, type GateSample } from '../sglang/readiness.js';
import { fatal, keepHeartbeating, type ActivityDeps } from './context.js';
import type { ServerStep } from './server-types.js';
import { watchServer } from './server-watch.js';

/** Tokens per acceptance-gate request. */
const GATE_TOKENS = 256;

export function serverGateActivities({ hosts }: ActivityDeps) {
  return {
    async acceptanceGate(
      input: ServerStep,
    ): Promise<{ acceptLength: number; perRequest: number[]; notes: string[]; warnings: string[] }> {
      const { config, launch } = input;
      const host = hosts.get(config);
      const d = config.stages.deploy;
      const client = new SglangClient(await host.httpBase(launch.port), { generateTimeoutMs: 5 * 60_000 });
      const prompts = [
        'Explain how a hash map works.',
        'Write a haiku about the sea.',
        'List three uses of binary search.',
        'Why is the sky blue?',
      ];
      const samples: GateSample[] = [];
      const stopBeat = keepHeartbeating(() => ({
        gate: 'greedy requests',
        done: samples.length,
        of: d['acceptance-requests'],
      }));
      try {
        await watchServer(
          host,
          launch,
          { pollMs: launch.watchMs, what: () => 'died during the acceptance gate' },
          async (signal) => {
            for (let i = 0; i < d['acceptance-requests']; i++) {
              // Fixed-length greedy outputs: the first token comes from the prefill, not a verify step,
              // so short outputs would inflate the ratio (a drafter that accepts nothing reads 1.00 here).
              const r = await client.generate(
                {
                  text: prompts[i % prompts.length]!,
                  sampling_params: { max_new_tokens: GATE_TOKENS, temperature: 0, ignore_eos: true },
                },
                signal,
              );
              const a = r.meta_info ? acceptLengthOf(r.meta_info) : undefined;
              if (a === undefined)
                throw fatal(
                  'DrafterRejectedError',
                  'the server reports no speculative statistics (spec_verify_ct): is speculative decoding on?',
                );
              samples.push({
                acceptLength: a,
                completionTokens: r.meta_info.completion_tokens,
                verifyCt: r.meta_info.spec_verify_ct,
              });
            }
          },
        );
      } finally {
        stopBeat();
      }
      const perRequest = samples.map((s) => s.acceptLength);
      const acceptLength = gateAcceptLength(samples);
      if (acceptLength < d['acceptance-threshold']) {
        const forced =
          d['allow-algorithm-mismatch'] && launch.notes.some((n) => n.includes('allow-algorithm-mismatch'));
        throw fatal(
          'DrafterRejectedError',
          drafterRejectedMessage(
            acceptLength,
            d['acceptance-threshold'],
            forced ? d['speculative-algorithm'] : undefined,
          ),
          {
            perRequest,
            acceptLength,
          },
        );
      }
      const warnings = launch.warnings ?? [];
      const notes = [...launch.notes, ...warnings.map((w) => `server warning: ${w}`)];
      if (launch.startupRecord) notes.push(`server notes and warnings kept in ${launch.startupRecord}`);
      return { acceptLength, perRequest, notes, warnings };
    },
  };
}
