/** The extract stage's steps, per driver: tokenize, the capture server(s), aerie's transformers job or SpecForge's script, conversion, checks. */
import { withRunGpus } from '../../config/gpus.js';
import type { Config } from '../../config/schema.js';
import { renderHfExtractArgv, runDumpDir } from '../../stages/extract/index.js';
import { renderPrepareArgv } from '../../stages/extract/index.js';
import { hfExtractSpec, prepareSpec } from '../../stages/launch-specs.js';
import { pinnedProfile } from './revision.js';
import { serverStep } from './server.js';
import { describePlace, placeConfig, poolPlaces } from '../../config/pool.js';
import type { PlanPaths, PlanStep } from './step.js';

export function extractSteps(config: Config, p: PlanPaths, dataPath: string, runId: string): PlanStep[] {
  const host = config.target.host;
  const steps: PlanStep[] = [];
  const e = config.stages.extract;
  if (e.driver !== 'specforge-offline') {
    steps.push({
      host,
      stage: 'extract',
      step: 'tokenize as SpecForge does, then check free space',
      argv: [
        e.python,
        '-m',
        'aerie_hs.tokens',
        '--model',
        config.target['model-path'],
        '--chat-template',
        e['chat-template'],
        '--max-length',
        String(e['max-length']),
        '--cross-check',
        e['cross-check'],
        // The tokenizer loads as the server loads the model (stages/extract/tokens.ts reads the same flag).
        ...(config.server['extra-args'].includes('--trust-remote-code') ? ['--trust-remote-code'] : []),
      ],
      notes: [
        `stdin ${dataPath}, stdout ${p.hidden}/ids.jsonl ({id, input_ids, loss_mask}); run in aerie's staged package; SpecForge's own preprocess_conversations cross-checks where importable (${e['cross-check']})`,
        `refuse unless ${p.hidden} can hold Σ tokens × (8 × hidden_size + 16) bytes`,
      ],
    });
  }
  if (e.driver === 'stock-server') {
    const dump = e['dump-dir'] ? runDumpDir(e['dump-dir'], runId) : `${p.hidden}/.stock`;
    // Both passes run aerie's client on the host against the extraction server; only --pass and what follows differ.
    const stockClient = (pass: 'aux' | 'final') => [
      e.python,
      '-m',
      'aerie_hs.stock_client',
      '--host',
      config.server['listen-host'],
      '--port',
      String(config.server.port),
      '--ids',
      '<batch>',
      '--dumps',
      dump,
      '--pass',
      pass,
    ];
    steps.push(serverStep(config, 'extract', 'extract', undefined, runId, 'aux'));
    steps.push({
      host,
      stage: 'extract',
      step: "aux pass: aerie's client on the host",
      argv: [...stockClient('aux'), '--concurrency', String(e.concurrency)],
      notes: [
        `POST /generate {input_ids, rid, return_hidden_states: true, max_new_tokens 1} from the host itself: every response carries T × 3H floats as JSON (~10× their bf16 size), so it never crosses the SSH link`,
        `cost: a second launch of the target, and ${dump} holds 6 × hidden bytes a token of every sample until the final pass (on the output disk by default); for small targets and tests — large ones want patched-server`,
      ],
    });
    steps.push(serverStep(config, 'extract', 'extract', undefined, runId, 'final'));
    steps.push({
      host,
      stage: 'extract',
      step: 'final pass, conversion and self-check',
      argv: [...stockClient('final'), '--greedy', '<batch greedy>'],
      notes: [
        `each sample's final rows merged with its aux part into <id>.safetensors, then python -m aerie_hs.ckpt convert --remove-dumps → ${p.hidden}/rows_<g>-<g+${e['file-group-size']}>/data_<i>.ckpt`,
        `self-check as for patched-server: the first ${e['self-check'].samples} samples, then ${e['self-check']['final-samples']} spread over the run`,
      ],
    });
  }
  if (e.driver === 'patched-server') {
    const places = poolPlaces(config, 'extract');
    if (!places) steps.push(serverStep(config, 'extract', 'extract', undefined, runId));
    for (const place of places ?? []) {
      const step = serverStep(placeConfig(config, place, 'extract'), 'extract', 'extract', undefined, runId);
      steps.push({ ...step, step: `launch extract server s${place.index} (${describePlace(place)})` });
    }
    if (places)
      steps.push({
        host,
        stage: 'extract',
        step: 'extraction pool',
        notes: [
          `${places.length} servers, each taking the next batch of samples (${e['batch-size'] ? `${e['batch-size']}` : 'max(8 × concurrency, samples ÷ (16 × servers))'}) as it frees up; each batch is a whole extraction as below, into ${p.hidden}/pool/b-<n>/ (a dump folder of its own per server: <dump-dir>/s<n>/<run>)`,
          "SpecForge's trainer reads the folder recursively; one manifest.json and extract_error.jsonl for the pool",
        ],
      });
    steps.push({
      host,
      stage: 'extract',
      step: 'prefill every sample',
      notes: [
        `POST /generate {input_ids, rid: <sample id>, max_new_tokens 1, temperature 0} with ${e.concurrency} in flight; meta_info.prompt_tokens must equal the ids sent; ` +
          `the capture writes ${runDumpDir(e['dump-dir'], runId)}/<id>.safetensors (aux [T,3H] + final [T,H], bf16) on the host`,
        `batches of dumps → python -m aerie_hs.ckpt convert --remove-dumps → ${p.hidden}/rows_<g>-<g+${e['file-group-size']}>/data_<i>.ckpt (SpecForge's offline layout; index.jsonl maps i to the sample id); no state crosses the link`,
        `self-check (python -m aerie_hs.selfcheck with ${e.python}): the first ${e['self-check'].samples} samples before the rest, ${e['self-check']['final-samples']} spread over the run before the stage counts; ` +
          `lm_head over the final states must predict the assistant tokens at ≥ ${e['self-check']['min-agreement']} and the server's greedy token`,
      ],
    });
  }
  if (e.driver === 'transformers') {
    const launch = hfExtractSpec(config, dataPath, p.hidden);
    steps.push({
      host,
      stage: 'extract',
      step: 'transformers forward on the host (detached)',
      argv: renderHfExtractArgv(launch),
      env: { PYTHONUNBUFFERED: '1', ...withRunGpus(config, e.env) },
      notes: [
        `no extraction server: ${e.python} loads ${config.target['model-path']} with transformers (dtype ${e.dtype}, device ${e.device}) and runs one unpadded forward per sample in aerie's staged package (<workdir>/aerie-py/<version>); log ${p.logs}/extract-<n>.log`,
        `aux = the inputs of layers id+1 for the draft's eagle_aux_hidden_state_layer_ids (${launch.draftModelConfig}), final = post-norm; ${p.hidden}/rows_<g>-<g+${e['file-group-size']}>/data_<i>.ckpt (temp name, then rename), index.jsonl maps i to the sample id; a relaunch skips complete files (crash-retries ${e['crash-retries']})`,
        `after it exits: every data_<i>.ckpt checked with ${e.python} (bad ones deleted and redone), then the self-check (python -m aerie_hs.selfcheck) over the ${e['self-check'].samples} first and up to ${e['self-check']['final-samples']} spread samples it kept; ` +
          `lm_head over the final states must predict the assistant tokens at ≥ ${e['self-check']['min-agreement']} and the model's greedy token`,
      ],
    });
  }
  if (e.driver === 'specforge-offline') {
    steps.push({
      host,
      stage: 'extract',
      step: 'check free space',
      notes: [`refuse unless ${p.hidden} can hold ~tokens × 8 × hidden_size bytes`],
    });
    const launch = prepareSpec(config, dataPath, p.hidden, pinnedProfile(config));
    steps.push({
      host,
      stage: 'extract',
      step: 'prepare_hidden_states (detached)',
      argv: renderPrepareArgv(launch),
      env: withRunGpus(config, e.env),
      notes: [
        `log ${p.logs}/extract-<n>.log; every data_{i}.ckpt checked with ${e.python} (zip directory, tensor sizes); bad files deleted and redone`,
      ],
    });
  }
  return steps;
}
