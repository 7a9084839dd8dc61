/**
 * Preflight for the transformers extract driver (py/aerie_hs/hf_extract.py): the extraction
 * loads the target with transformers on the host, so before anything runs, the interpreter must
 * import torch and transformers (and numpy, for the self-check), the model directory must hold a
 * tokenizer and safetensors weights, and the draft's aux layers must be capturable on the target.
 */
import type { Config } from '../config/schema.js';
import { servedHiddenStateIndices } from '../engines/index.js';
import type { Host } from '../hosts/host.js';
import { draftLayerIds, targetLayers } from '../stages/extract/index.js';
import type { Findings } from './preflight-probes.js';

const PROBE = [
  'import json, sys',
  'import numpy, torch, transformers',
  'print(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__, "cuda": bool(torch.cuda.is_available())}))',
].join('\n');

async function readJson(host: Host, path: string): Promise<unknown> {
  try {
    return JSON.parse((await host.readFile(path)).toString('utf8'));
  } catch {
    return undefined;
  }
}

export async function checkHfExtract(host: Host, config: Config, out: Findings): Promise<void> {
  const e = config.stages.extract;
  if (e.driver !== 'transformers') return;
  const r = await host
    .exec([e.python, '-c', PROBE], { timeoutMs: 180_000 })
    .catch((err: Error) => ({ code: -1, stdout: '', stderr: err.message }));
  let found: { torch?: string; transformers?: string; cuda?: boolean } | undefined;
  try {
    found = r.code === 0 ? (JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as typeof found) : undefined;
  } catch {
    found = undefined;
  }
  if (!found) {
    const said = r.stderr.trim().split('\n').pop()?.slice(-240) || `exit ${r.code}`;
    out.problems.push(
      r.code === 127 || /ENOENT|not found/.test(said)
        ? `stages.extract.python: ${e.python} is not on ${host.name} (${said}). Fix: set it to the interpreter of an environment with torch and transformers`
        : `stages.extract.python: ${e.python} on ${host.name} cannot import torch, transformers and numpy (${said}); the transformers extract driver loads the target with them. Fix: install them there, or point stages.extract.python at an interpreter that has them`,
    );
  } else {
    out.checks.push(
      `extract python ${e.python} imports torch ${found.torch}, transformers ${found.transformers} (${found.cuda ? 'a GPU visible' : 'no GPU: the forward runs on the CPU'})`,
    );
    if (e.device === 'cuda' && !found.cuda)
      out.problems.push(
        `stages.extract.device: cuda, but torch in ${e.python} on ${host.name} sees no GPU. Fix: set stages.extract.device: auto (or cpu)`,
      );
  }

  const model = config.target['model-path'];
  const files = new Set((await host.list(model).catch(() => [])).map((f) => f.path.slice(f.path.lastIndexOf('/') + 1)));
  if (!files.has('tokenizer.json') && !files.has('tokenizer_config.json') && !files.has('tokenizer.model'))
    out.problems.push(
      `target.model-path: ${model} on ${host.name} has no tokenizer files; stages.extract (driver transformers) tokenizes with the target's own tokenizer and chat template. Fix: use the full model directory`,
    );
  if (!files.has('model.safetensors') && !files.has('model.safetensors.index.json'))
    out.problems.push(
      `target.model-path: ${model} on ${host.name} has neither model.safetensors nor model.safetensors.index.json; stages.extract (driver transformers) loads the target's weights from it and the self-check reads lm_head there. Fix: point target.model-path at a safetensors checkpoint`,
    );

  const draftPath = e['draft-model-config'] ?? config.stages.train['draft-model-config'];
  const draft = await readJson(host, draftPath);
  if (draft === undefined) {
    out.problems.push(
      `stages.extract.draft-model-config: ${draftPath} is not a readable JSON file on ${host.name}. Fix: point it (or stages.train.draft-model-config) at the draft config.json`,
    );
    return;
  }
  const layers = targetLayers(await readJson(host, `${model}/config.json`));
  const ids = draftLayerIds(draft, layers);
  if ('problem' in ids) out.problems.push(`stages.extract.draft-model-config (${draftPath}): ${ids.problem}`);
  // The states the serving engine feeds: SGLang the input of layer id+1, vLLM the input of layer id.
  const engine = config.server.engine;
  const points = servedHiddenStateIndices(engine, ids && 'ids' in ids ? ids.ids : []);
  if ('problem' in ids) out.problems.push(`stages.extract.draft-model-config (${draftPath}): ${ids.problem}`);
  else if (layers !== undefined && points.some((i) => i > layers - 1))
    out.problems.push(
      `stages.extract.draft-model-config (${draftPath}): aux layer ids ${JSON.stringify(ids.ids)} on a ${layers}-layer target: ${engine} feeds the drafter the inputs of layers ${JSON.stringify(points)}, and the last layer's input is ${layers - 1}. Fix: the draft's eagle_aux_hidden_state_layer_ids`,
    );
  else
    out.checks.push(
      `transformers extraction captures draft layers ${JSON.stringify(ids.ids)} (${ids.how}) at the inputs of layers ${JSON.stringify(points)}, as ${engine} will feed them`,
    );
}
