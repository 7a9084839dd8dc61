/**
 * The acceptance gate on the deploy server: does the drafter pay for itself? A few greedy
 * requests of fixed length on prompts it never trained on (gate-prompts.ts), their accept
 * length against stages.deploy.acceptance-threshold, or against another run's recorded gate
 * less a margin (acceptance-versus); below the bar the deploy is refused
 * (DrafterRejectedError) before any benchmark runs. The figure goes to the benchmark's
 * ledger record with the prompts it was measured on.
 */
import { SglangClient, acceptLengthOf } from '../sglang/client.js';
import { drafterRejectedMessage, gateAcceptLength, type GateSample } from '../sglang/readiness.js';
import { counterDelta, VllmClient, windowAcceptLength } from '../engines/index.js';
import { fatal, keepHeartbeating, type ActivityDeps } from './context.js';
import type { ServerStep } from './server-types.js';
import { watchServer } from './server-watch.js';
import { GateBaselineError, gateFloor, gatePrompts, recordedGate, type GateRecord } from './gate-prompts.js';

/** Tokens per acceptance-gate request. */
const GATE_TOKENS = 256;

export function serverGateActivities({ hosts }: ActivityDeps) {
  return {
    async acceptanceGate(
      input: ServerStep,
    ): Promise<{ acceptLength: number; perRequest: number[]; notes: string[]; warnings: string[]; gate: GateRecord }> {
      const { config, launch } = input;
      const host = hosts.get(config);
      const d = config.stages.deploy;
      const base = await host.httpBase(launch.port);
      const client = new SglangClient(base, { generateTimeoutMs: 5 * 60_000 });
      const vllmClient = launch.engine === 'vllm' ? new VllmClient(base, { generateTimeoutMs: 5 * 60_000 }) : undefined;
      const versus = d['acceptance-versus'];
      let baseline: GateRecord | undefined;
      try {
        baseline = versus ? await recordedGate(host, versus.run) : undefined;
      } catch (err) {
        if (err instanceof GateBaselineError) throw fatal('ConfigError', err.message);
        throw err;
      }
      const gateSet = await gatePrompts(host, config);
      if (baseline && baseline.prompts.kind !== gateSet.kind)
        throw fatal(
          'ConfigError',
          `stages.deploy.acceptance-versus.run: run ${versus!.run}'s gate measured ${baseline.prompts.kind} prompts (${baseline.prompts.source}) and this one measures ${gateSet.kind} prompts (${gateSet.source}): the two accept lengths are not comparable. Set stages.generate.num-samples alike in both runs, or remove the field`,
        );
      const prompts = gateSet.prompts;
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
            if (launch.engine === 'vllm') {
              samples.push(
                ...(await vllmGateSamples(vllmClient!, launch.modelPath, prompts, d['acceptance-requests'], signal)),
              );
              return;
            }
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
      const bar = gateFloor(
        d['acceptance-threshold'],
        baseline && versus
          ? { run: versus.run, margin: versus.margin, acceptLength: baseline.acceptLength }
          : undefined,
      );
      const gate: GateRecord = {
        acceptLength,
        perRequest,
        prompts: { kind: gateSet.kind, source: gateSet.source },
        floor: bar.floor,
        floorFrom: bar.from,
      };
      if (acceptLength < bar.floor) {
        const forced =
          d['allow-algorithm-mismatch'] && launch.notes.some((n) => n.includes('allow-algorithm-mismatch'));
        throw fatal(
          'DrafterRejectedError',
          drafterRejectedMessage(
            acceptLength,
            Number(bar.floor.toFixed(2)),
            forced ? d['speculative-algorithm'] : undefined,
          ) +
            (bar.floor === d['acceptance-threshold'] ? '' : ` (the bar is ${bar.from})`) +
            ` — measured on ${gateSet.source}${launch.engine === 'vllm' ? " by vLLM's own counters (1 + Δaccepted/Δdrafts from /metrics)" : ''}`,
          { perRequest, acceptLength, gate },
        );
      }
      const warnings = launch.warnings ?? [];
      const notes = [
        ...launch.notes,
        `acceptance gate: accept length ${acceptLength.toFixed(2)} ≥ ${bar.floor.toFixed(2)} (${bar.from}) on ${gateSet.source}`,
        ...warnings.map((w) => `server warning: ${w}`),
      ];
      if (launch.startupRecord) notes.push(`server notes and warnings kept in ${launch.startupRecord}`);
      return { acceptLength, perRequest, notes, warnings, gate };
    },
  };
}

/**
 * The gate's requests on a vLLM server, one at a time as chat requests, each measured by the difference of the
 * server's speculative counters around it (engines/vllm/metrics.ts): the deploy server serves
 * nothing else while the gate runs, and /metrics reads do not move the counters
 * (test/fixtures/real/vllm-0.32.0/PROVENANCE.md). Each sample's completionTokens and verifyCt
 * are the tokens its verify steps produced and the steps (drafts), so the pooled figure is
 * 1 + ΣΔaccepted / ΣΔdrafts.
 */
async function vllmGateSamples(
  client: VllmClient,
  model: string,
  prompts: readonly string[],
  requests: number,
  signal: AbortSignal,
): Promise<GateSample[]> {
  const out: GateSample[] = [];
  for (let i = 0; i < requests; i++) {
    const before = await client.specCounters(signal);
    if (!before)
      throw fatal(
        'DrafterRejectedError',
        'the vLLM server exports no speculative counters (vllm:spec_decode_*): is --speculative-config on?',
      );
    // As chat, the way the drafter serves: the prompts are user turns, and a raw-text prompt without the
    // chat template is traffic the drafter never trained on (on the real chain: 1.32 raw against 2.11 as chat).
    await client.chat({ model, user: prompts[i % prompts.length]!, maxTokens: GATE_TOKENS, ignoreEos: true }, signal);
    const after = await client.specCounters(signal);
    const delta = after ? counterDelta(before, after) : undefined;
    const a = delta ? windowAcceptLength(delta) : undefined;
    if (!delta || a === undefined)
      throw fatal(
        'DrafterRejectedError',
        'the vLLM server made no drafts for a gate request (its spec_decode counters did not move): speculative decoding is not running',
      );
    out.push({ acceptLength: a, completionTokens: delta.drafts + delta.accepted, verifyCt: delta.drafts });
  }
  return out;
}
