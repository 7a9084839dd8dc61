/**
 * py/aerie_hs/capture.py's capture_from_hf on the tiny random Llama (scripts/real/make_tiny_target.py)
 * with real torch + transformers (.venv-real): the states taken by forward hooks at SGLang's capture
 * points (the input of layer id+1 for each SpecForge aux layer id) equal transformers' own
 * output_hidden_states[id+1], the final state equals the model's post-norm output (and gives its
 * logits through lm_head), and a dump stitched from two chunks loads with the real safetensors
 * reader bit-equal to the states.
 */
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { runOk } from '../support/processes.js';
import { useWorkdir } from '../support/workdir.js';

const run = runOk;
const ROOT = resolve(import.meta.dirname, '../..');
const PY = join(ROOT, '.venv-real/bin/python');
const tmp = useWorkdir('aerie-real-capture-');
let dir: string;

beforeAll(async () => {
  dir = tmp.path;
  await run(
    PY,
    [join(ROOT, 'scripts/real/make_tiny_target.py'), join(dir, 'target'), '--draft-config', join(dir, 'draft.json')],
    { cwd: dir },
  );
});

const CHECK = String.raw`
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from transformers import AutoModelForCausalLM
from safetensors.torch import load_file
from safetensors import safe_open
from aerie_hs.capture import (CaptureBuffer, capture_from_hf, specforge_default_aux_layers,
                              sglang_capture_ids, input_ids_sha256)
target, out = sys.argv[2], sys.argv[3]
draft = json.load(open(sys.argv[4]))
res = {}
for dtype in (torch.float32, torch.bfloat16):
    model = AutoModelForCausalLM.from_pretrained(target, dtype=dtype).eval()
    L = model.config.num_hidden_layers
    draft_ids = draft.get("eagle_config", {}).get("eagle_aux_hidden_state_layer_ids") or specforge_default_aux_layers(L)
    cap = sglang_capture_ids(draft_ids, L)
    ids = torch.arange(3, 40).tolist()
    aux, fin = capture_from_hf(model, ids, cap)
    with torch.no_grad():
        o = model(input_ids=torch.tensor([ids]), output_hidden_states=True, use_cache=False)
        base = model.model(input_ids=torch.tensor([ids]), use_cache=False).last_hidden_state[0]
    hs = o.hidden_states
    want = torch.cat([hs[d + 1][0] for d in draft_ids], dim=-1)
    key = str(dtype).split(".")[-1]
    res[key] = {
        "L": L, "draft_ids": draft_ids, "capture_ids": cap, "T": len(ids), "H": model.config.hidden_size,
        "aux_shape": list(aux.shape), "aux_equal": bool(torch.equal(aux, want)),
        "final_is_post_norm": bool(torch.equal(fin, base)) and bool(torch.equal(fin, hs[-1][0])),
        "final_differs_from_last_layer_input": not torch.equal(fin, hs[L - 1][0]),
        "logits_from_final": bool(torch.allclose(model.lm_head(fin), o.logits[0], atol=0, rtol=0)),
    }
    if dtype is torch.bfloat16:
        buf = CaptureBuffer(out, cap, model.config.hidden_size, tp_rank=0)
        assert buf.add("r-0", ids, 0, aux[:20], fin[:20]) is None
        path = buf.add("r-0", ids, 20, aux[20:], fin[20:])
        t = load_file(path)
        with safe_open(path, "pt") as f:
            meta = f.metadata()
        res["dump"] = {"aux_equal": bool(torch.equal(t["aux_hidden_state"], aux)),
                       "hidden_equal": bool(torch.equal(t["hidden_state"], fin)),
                       "dtypes": [str(t["aux_hidden_state"].dtype), str(t["hidden_state"].dtype)],
                       "meta": meta, "sha_ok": meta["input_ids_sha256"] == input_ids_sha256(ids)}
print(json.dumps(res))
`;

it('capture_from_hf equals transformers hidden_states at the mapped layers and the post-norm output', async () => {
  const script = join(dir, 'check.py');
  await writeFile(script, CHECK);
  const { stdout } = await run(PY, [script, join(ROOT, 'py'), join(dir, 'target'), dir, join(dir, 'draft.json')], {
    cwd: dir,
  });
  const res = JSON.parse(stdout);
  for (const key of ['float32', 'bfloat16']) {
    const r = res[key];
    expect(r.capture_ids).toEqual(r.draft_ids.map((d: number) => d + 1));
    expect(r.aux_shape).toEqual([r.T, r.capture_ids.length * r.H]);
    expect(r.aux_equal, `${key}: hooks at layer inputs id+1 == hidden_states[id+1]`).toBe(true);
    expect(r.final_is_post_norm, `${key}: final == model.model(...).last_hidden_state == hidden_states[-1]`).toBe(true);
    expect(r.final_differs_from_last_layer_input).toBe(true);
    expect(r.logits_from_final, `${key}: lm_head(final) == logits`).toBe(true);
  }
  expect(res.dump).toMatchObject({
    aux_equal: true,
    hidden_equal: true,
    dtypes: ['torch.bfloat16', 'torch.bfloat16'],
    sha_ok: true,
  });
  expect(res.dump.meta).toMatchObject({
    format: 'aerie-hs/1',
    rid: 'r-0',
    tokens: String(res.bfloat16.T),
    tp_rank: '0',
    aux_layers: JSON.stringify(res.bfloat16.capture_ids).replace(/,/g, ', '),
  });
});
