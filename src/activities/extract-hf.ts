/**
 * The extract stage's transformers driver: aerie's capture on a transformers forward on the
 * host (py/aerie_hs/hf_extract.py), no model server. For targets whose serving engine cannot
 * extract there (vLLM 0.32 on a CPU) and that fit a transformers forward.
 */
import { Context } from '@temporalio/activity';
import { withRunGpus } from '../config/gpus.js';
import { shipAeriePy, superviseJob } from '../stages/common/index.js';
import {
  describeVerdict,
  hfExtractHooks,
  runSelfCheck,
  type HfProgress,
  type HfResult,
} from '../stages/extract/index.js';
import { hfExtractSpec } from '../stages/launch-specs.js';
import {
  cancelRequested,
  expandEnv,
  fatal,
  keepHeartbeating,
  runPaths,
  type ActivityDeps,
  type RunRef,
} from './context.js';
import { extractFailure, modelHiddenSize, type ExtractOutcome } from './extract.js';

export function extractHfActivities({ hosts }: ActivityDeps) {
  return {
    /**
     * aerie's capture on a transformers forward on the host (py/aerie_hs/hf_extract.py), launched
     * detached and followed like prepare_hidden_states.py; then aerie's self-check over the
     * samples it kept aside.
     */
    async extractTransformers(input: RunRef & { dataPath: string }): Promise<ExtractOutcome> {
      const { config, runId } = input;
      const host = hosts.get(config);
      const e = config.stages.extract;
      if (e.driver !== 'transformers')
        throw fatal('ConfigError', `extractTransformers runs the transformers driver, not ${e.driver}`);
      const ctx = Context.current();
      const paths = runPaths(host, runId);
      const outDir = paths.hidden;
      let details: Record<string, unknown> = { phase: 'staging' };
      const stopBeat = keepHeartbeating(() => details);
      try {
        const hiddenSize = e['hidden-size'] ?? (await modelHiddenSize(host, config.target['model-path']));
        const py = await shipAeriePy(host, e.python);
        const launch = hfExtractSpec(config, input.dataPath, outDir);
        await host.mkdirp(outDir);
        let verified = '';
        details = { phase: 'starting' };
        const { result, launches, argv } = await superviseJob<HfResult, HfProgress>(
          {
            host,
            prefix: `${runId}.extract.`,
            logPath: (gen) => `${paths.logs}/extract-${gen}.log`,
            // python -m aerie_hs.hf_extract finds the staged package in its working directory.
            cwd: py.root,
            env: { PYTHONUNBUFFERED: '1', ...expandEnv(withRunGpus(config, e.env)) },
            crashRetries: e['crash-retries'],
            pollMs: 2000,
            signal: ctx.cancellationSignal,
            stopJob: cancelRequested,
            heartbeat: (d) => {
              const p = d.progress;
              details = {
                phase: p?.phase === 'loaded' ? 'extracting' : (p?.phase ?? 'loading the target'),
                launchId: d.launchId,
                pid: d.pid,
                argv: d.argv,
                done: p?.done,
                total: p?.total,
                ok: p?.ok,
                skipped: p?.skipped,
                errors: p?.errors,
                bytes: p?.bytes,
                rate: p?.rate,
                verified,
                ...(d.note ? { note: d.note } : {}),
              };
            },
            what: 'aerie_hs.hf_extract',
            crashType: 'ExtractCrashed',
          },
          hfExtractHooks({
            host,
            launch,
            hiddenSize,
            redoLimit: e['crash-retries'],
            onVerified: (r, removed) =>
              (verified = `${r.ok.size} files good${removed ? `, ${removed} bad removed` : ''}`),
          }),
        );
        details = { phase: 'self-check', done: result.samples, total: result.samples };
        const verdict = await runSelfCheck({
          host,
          py,
          outDir,
          modelPath: config.target['model-path'],
          minAgreement: e['self-check']['min-agreement'],
          when: 'before the stage counts as good',
        });
        const s = result.summary;
        const manifest = {
          samples: input.dataPath,
          layout: `specforge: rows_{g}-{g+${e['file-group-size']}}/data_{i}.ckpt (input_ids, loss_mask int64 [T]; aux_hidden_state bf16 [1,T,3H]; hidden_state bf16 [1,T,H]); index.jsonl maps i to the sample id`,
          hiddenSize,
          producer: `transformers forward on ${host.name} (${s.device}, ${s.dtype}); aux = inputs of layers ${JSON.stringify(s.capture_ids)}, for draft layer ids ${JSON.stringify(s.draft_layer_ids)} (${s.layers_from}) as ${config.server.engine} reads them; final = post-norm`,
          tokens: { method: s.tokens_method, chatTemplate: e['chat-template'], maxLength: e['max-length'] },
          counts: { input: result.samples, ok: result.ok, error: result.errors, resumed: s.skipped },
          totalTokens: result.totalTokens,
          totalBytes: result.totalBytes,
          selfCheck: { final: describeVerdict(verdict) },
          argv,
          launches,
        };
        await host.writeFileAtomic(`${outDir}/manifest.json`, JSON.stringify(manifest, null, 2) + '\n');
        return {
          hidden: { dir: outDir, layout: 'specforge' },
          count: result.ok,
          bytes: result.totalBytes,
          argv,
          outputs: [outDir],
          note:
            `${result.ok} of ${result.samples} samples, ${(result.totalBytes / 2 ** 20).toFixed(1)} MiB in SpecForge's layout (transformers on ${s.device})` +
            `${result.errors ? `, ${result.errors} errors (extract_error.jsonl)` : ''}${s.skipped ? `, ${s.skipped} from before a relaunch` : ''}` +
            `${launches > 1 ? `; ${launches} launches` : ''}; self-check: ${describeVerdict(verdict)}`,
        };
      } catch (err) {
        throw extractFailure(err);
      } finally {
        stopBeat();
      }
    },
  };
}
