/**
 * The transformers extract driver end to end on the CPU, with .venv-real's torch + transformers:
 * the extractTransformers activity (in @temporalio/testing's activity environment) launches
 * `python -m aerie_hs.hf_extract` through a real LocalHost as a detached job on the tiny random
 * Llama (scripts/real/make_tiny_target.py), on conversations whose assistant turns the tiny model
 * generated greedily itself (kept only as far as the text tokenizes back to the same ids), so the
 * self-check's teacher test means something. Checked independently in Python: every sample has a
 * file of SpecForge's record and shapes; its aux states are exactly transformers' own
 * output_hidden_states[id+1] for the draft's layer ids and its final state hidden_states[L]
 * (post-norm); its ids and mask are aerie_hs.tokens'. Then: a rerun after one file is deleted
 * rewrites that file only; and a model directory without weights fails naming stages.extract and
 * target.model-path (and preflight says so before).
 */
import { readFileSync } from 'node:fs';
import { copyFile, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import YAML from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { extractHfActivities } from '../../src/activities/extract-hf.js';
import { checkHfExtract } from '../../src/activities/preflight-hf.js';
import { AERIE_HOME, parseConfigText } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import type { HostPool } from '../../src/hosts/index.js';
import { runDir } from '../../src/shared.js';
import { inActivity } from '../bench/activity-context.js';
import { useLocalHost } from '../support/local-host.js';
import { runOk } from '../support/processes.js';

const ROOT = resolve(import.meta.dirname, '../..');
const PY = join(ROOT, '.venv-real/bin/python');
const fx = useLocalHost('aerie-real-hf-extract-', { sub: 'host' });
let dir: string;
let data: string;

// Greedy answers of the tiny model, truncated where their text would tokenize to other ids.
const GEN = String.raw`
import json, os, sys
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, AutoTokenizer
torch.set_num_threads(2)
target, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
# At init scale the tiny model's greedy text collapses onto one token (test/real-cpu/selfcheck.test.ts):
# ten times larger embeddings keep the current token in the residual stream.
w = load_file(os.path.join(target, "model.safetensors"))
w["model.embed_tokens.weight"] = (w["model.embed_tokens.weight"].float() * 10).to(torch.bfloat16)
save_file(w, os.path.join(target, "model.safetensors"), metadata={"format": "pt"})
tok = AutoTokenizer.from_pretrained(target)
model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
words = "the model reads each token and writes the next one until the answer ends with a short summary of what it said".split()
eot = tok.convert_tokens_to_ids("<|eot_id|>")
rows, k = [], 0
while len(rows) < n:
    k += 1
    user = " ".join(words[(k * 7 + j * 3) % len(words)] for j in range(6 + k % 5))
    msgs = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": user}]
    prompt = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=False)
    prompt = list(prompt["input_ids"] if isinstance(prompt, dict) else prompt)
    gen = []
    with torch.no_grad():
        for _ in range(24):
            nxt = int(model(input_ids=torch.tensor([prompt + gen])).logits[0, -1].argmax())
            text = tok.decode(gen + [nxt])
            if nxt == eot or text != text.strip() or tok(text, add_special_tokens=False)["input_ids"] != gen + [nxt]:
                break
            gen.append(nxt)
    if len(gen) < 6 or sum(1 for a, b in zip(gen, gen[1:]) if a == b) > 2:
        continue
    rows.append({"id": "row-%d" % len(rows), "conversations": msgs + [{"role": "assistant", "content": tok.decode(gen)}]})
rows.insert(2, {"id": "empty-1", "conversations": []})  # tokens.py refuses it: an error row, no file
with open(out, "w") as fh:
    fh.write("".join(json.dumps(r) + "\n" for r in rows))
print(json.dumps({"samples": len(rows), "tries": k}))
`;

// Independent: transformers' own hidden states and aerie_hs.tokens' ids against each file.
const CHECK = String.raw`
import glob, json, os, sys
import torch
sys.path.insert(0, sys.argv[1])
from transformers import AutoModelForCausalLM, AutoTokenizer
from aerie_hs.chat_templates import template
from aerie_hs.tokens import tokenize
target, out, data, draft = sys.argv[2:6]
model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
tok = AutoTokenizer.from_pretrained(target)
L, H = model.config.num_hidden_layers, model.config.hidden_size
ids_cfg = (json.load(open(draft)).get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids") or [1, L // 2 - 1, L - 4]
index = [json.loads(l) for l in open(os.path.join(out, "index.jsonl"))]
convs = {r["id"]: r["conversations"] for r in map(json.loads, open(data))}
res = {"L": L, "H": H, "draft_ids": ids_cfg, "files": {}}
for row in index:
    paths = glob.glob(os.path.join(out, "rows_*", "data_%d.ckpt" % row["i"]))
    f = torch.load(paths[0], weights_only=True)
    ids, mask = tokenize(tok, convs[row["id"]], template("llama3"), 256)
    with torch.no_grad():
        hs = model(input_ids=torch.tensor([ids]), output_hidden_states=True, use_cache=False).hidden_states
    aux = torch.cat([hs[d + 1] for d in ids_cfg], dim=-1).to(torch.bfloat16)
    res["files"][row["id"]] = {
        "path": os.path.relpath(paths[0], out), "keys": list(f),
        "shapes": {k: list(v.shape) for k, v in f.items()}, "dtypes": {k: str(v.dtype) for k, v in f.items()},
        "T": len(ids), "ids_equal": f["input_ids"].tolist() == ids, "mask_equal": f["loss_mask"].tolist() == mask,
        "aux_equal": bool(torch.equal(f["aux_hidden_state"], aux)),
        "final_equal": bool(torch.equal(f["hidden_state"], hs[L].to(torch.bfloat16))),
        "aux_is_not_layer_input_of_id": not torch.equal(f["aux_hidden_state"][..., :H], hs[ids_cfg[0]].to(torch.bfloat16)),
    }
print(json.dumps(res))
`;

function configFor(modelPath: string, workdir: string): Config {
  const doc = YAML.parse(readFileSync(join(AERIE_HOME, 'examples', 'demo.yaml'), 'utf8')) as {
    stages: Record<string, Record<string, unknown>>;
    target: Record<string, unknown>;
  };
  doc.target['model-path'] = modelPath;
  doc.stages.train!['draft-model-config'] = join(dir, 'draft.json');
  doc.stages.extract = {
    driver: 'transformers',
    python: PY,
    'chat-template': 'llama3',
    'max-length': 256,
    'file-group-size': 2,
    dtype: 'float32',
    device: 'cpu',
    'batch-size': 2,
    'crash-retries': 1,
    'self-check': { samples: 2, 'final-samples': 5 },
  };
  const c = parseConfigText(YAML.stringify(doc), 'hf-extract.yaml');
  c.hosts.local!.workdir = workdir;
  return c;
}

function activities() {
  return extractHfActivities({ hosts: { get: () => fx.host } as unknown as HostPool });
}

async function mtimes(hidden: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const g of (await readdir(hidden)).filter((n) => n.startsWith('rows_')))
    for (const f of await readdir(join(hidden, g))) out.set(`${g}/${f}`, (await stat(join(hidden, g, f))).mtimeMs);
  return out;
}

beforeAll(async () => {
  dir = fx.dir;
  await runOk(
    PY,
    [join(ROOT, 'scripts/real/make_tiny_target.py'), join(dir, 'target'), '--draft-config', join(dir, 'draft.json')],
    { cwd: dir },
  );
  await writeFile(join(dir, 'gen.py'), GEN);
  data = join(dir, 'conv.jsonl');
  await runOk(PY, [join(dir, 'gen.py'), join(dir, 'target'), data, '5'], { cwd: dir });
  // Finding five clean greedy answers takes ~150 short generations: minutes on a busy 2-core machine.
}, 900_000);

describe('stages.extract.driver: transformers', () => {
  let hidden: string;
  let first: Awaited<ReturnType<ReturnType<typeof activities>['extractTransformers']>>;
  const heartbeats: unknown[] = [];

  it('writes every sample in SpecForge offline layout, equal to transformers own hidden states, and self-checks', async () => {
    const config = configFor(join(dir, 'target'), fx.host.workdir);
    first = await inActivity(() => activities().extractTransformers({ runId: 'r1', config, dataPath: data }), {
      heartbeats,
      abort: new AbortController(),
    });
    hidden = join(runDir(fx.host.workdir, 'r1'), 'hidden_states');
    expect(first.count).toBe(5);
    expect(first.hidden).toEqual({ dir: hidden, layout: 'specforge' });
    expect(first.argv?.slice(0, 3)).toEqual([PY, '-m', 'aerie_hs.hf_extract']);
    expect(first.note).toMatch(
      /^5 of 6 samples, .* 1 errors \(extract_error\.jsonl\).*self-check: 4 samples, next-token agreement/,
    );
    // The self-check keeps lines 0, 1 and a spread of 3 of the other 4 (line 2, the error, among them): 4 samples.
    // The job's progress reached the heartbeats.
    expect(heartbeats.some((h) => (h as { total?: number }).total === 6)).toBe(true);

    const errors = (await readFile(join(hidden, 'extract_error.jsonl'), 'utf8')).trim().split('\n');
    expect(errors.map((l) => JSON.parse(l) as { id: string; line: number })).toEqual([
      expect.objectContaining({ id: 'empty-1', line: 3 }),
    ]);
    const manifest = JSON.parse(await readFile(join(hidden, 'manifest.json'), 'utf8')) as {
      counts: unknown;
      selfCheck: { final: string };
    };
    expect(manifest.counts).toEqual({ input: 6, ok: 5, error: 1, resumed: 0 });
    const agreement = Number(/agreement ([\d.]+)/.exec(manifest.selfCheck.final)![1]);
    expect(agreement).toBeGreaterThan(0.8);

    const { stdout } = await runOk(PY, [
      '-c',
      CHECK,
      join(ROOT, 'py'),
      join(dir, 'target'),
      hidden,
      data,
      join(dir, 'draft.json'),
    ]);
    const r = JSON.parse(stdout) as {
      L: number;
      H: number;
      draft_ids: number[];
      files: Record<string, Record<string, unknown> & { T: number; path: string }>;
    };
    expect(r.draft_ids).toEqual([1, 3, 4]);
    expect(Object.keys(r.files).sort()).toEqual(['row-0', 'row-1', 'row-2', 'row-3', 'row-4']);
    const paths = Object.values(r.files)
      .map((f) => f.path)
      .sort();
    expect(paths).toEqual([
      'rows_0-2/data_0.ckpt',
      'rows_0-2/data_1.ckpt',
      'rows_2-4/data_2.ckpt',
      'rows_2-4/data_3.ckpt',
      'rows_4-6/data_4.ckpt',
    ]);
    for (const [id, f] of Object.entries(r.files)) {
      expect(f, id).toMatchObject({
        keys: ['input_ids', 'loss_mask', 'aux_hidden_state', 'hidden_state'],
        shapes: {
          input_ids: [f.T],
          loss_mask: [f.T],
          aux_hidden_state: [1, f.T, 3 * r.H],
          hidden_state: [1, f.T, r.H],
        },
        dtypes: {
          input_ids: 'torch.int64',
          loss_mask: 'torch.int64',
          aux_hidden_state: 'torch.bfloat16',
          hidden_state: 'torch.bfloat16',
        },
        ids_equal: true,
        mask_equal: true,
        aux_equal: true,
        final_equal: true,
        aux_is_not_layer_input_of_id: true,
      });
    }
  });

  it('a rerun after one file is deleted rewrites that file only', async () => {
    const before = await mtimes(hidden);
    await rm(join(hidden, 'rows_2-4/data_3.ckpt'));
    const config = configFor(join(dir, 'target'), fx.host.workdir);
    const again = await inActivity(() => activities().extractTransformers({ runId: 'r1', config, dataPath: data }));
    expect(again.count).toBe(5);
    expect(again.note).toMatch(/4 from before a relaunch; 2 launches/);
    const after = await mtimes(hidden);
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    for (const [f, t] of after) {
      if (f === 'rows_2-4/data_3.ckpt') expect(t, f).toBeGreaterThan(before.get(f)!);
      else expect(t, f).toBe(before.get(f));
    }
    const summary = JSON.parse(await readFile(join(hidden, 'hf_extract.json'), 'utf8')) as Record<string, number>;
    expect(summary).toMatchObject({ ok: 5, written: 1, skipped: 4, errors: 1 });
  });

  it('a model directory without weights fails naming stages.extract and target.model-path', async () => {
    const bare = join(dir, 'no-weights');
    await mkdir(bare, { recursive: true });
    for (const f of await readdir(join(dir, 'target')))
      if (!f.endsWith('.safetensors') && !f.endsWith('.index.json'))
        await copyFile(join(dir, 'target', f), join(bare, f));
    const config = configFor(bare, fx.host.workdir);

    const findings = { checks: [] as string[], problems: [] as string[] };
    await checkHfExtract(fx.host, config, findings);
    expect(findings.problems.join('\n')).toMatch(/^target\.model-path: .*no-weights .* neither model\.safetensors/m);

    const err = await inActivity(() =>
      activities().extractTransformers({ runId: 'r-bare', config, dataPath: data }),
    ).then(
      () => undefined,
      (e: unknown) => e as { type?: string; message: string },
    );
    expect(err?.type).toBe('ConfigError');
    expect(err?.message).toMatch(
      /stages\.extract \(driver transformers\): target\.model-path .*no-weights cannot be loaded/,
    );
    expect(err?.message).toMatch(/Fix: point target\.model-path at the full model directory/);
  });
});
