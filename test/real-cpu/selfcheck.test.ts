/**
 * py/aerie_hs/selfcheck.py on REAL states of the tiny Llama (scripts/real/make_tiny_target.py,
 * random weights), with .venv-real's torch + transformers. The assistant turns are generated
 * greedily BY the tiny model itself, so on the true states the teacher-forced argmax is the
 * next token by construction (a random model's greedy text means nothing, but it is its own).
 * The states come from transformers' output_hidden_states: hidden_states[i] is the input of
 * layer i and hidden_states[L] the post-norm final state (transformers 5.17.0
 * utils/output_capturing.py:115-124, :296-306). Dumps are written by a stdlib safetensors
 * writer in the generator below, as the capture writes them (BF16, aerie-hs/1 metadata).
 */
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { run as runAny, runOk } from '../support/processes.js';
import { useWorkdir } from '../support/workdir.js';

const run = runOk;
const ROOT = resolve(import.meta.dirname, '../..');
const PY = join(ROOT, '.venv-real/bin/python');
const tmp = useWorkdir('aerie-real-selfcheck-');
let dir: string;
let target: string;
let made: { L: number; samples: number; repeats: number };

// Writes, per variant, <dir>/<variant>/<id>.safetensors; ids.jsonl (true and shifted) and greedy.jsonl.
const GEN = String.raw`
import hashlib, json, os, struct, sys
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, AutoTokenizer
torch.set_num_threads(1)  # a shared 2-core machine: one thread is faster than contended many
target, out = sys.argv[1], sys.argv[2]
# At its init scale (std 0.02) the tiny model's residual stream is all layer output and its
# greedy text collapses onto one or two tokens, which no alignment check can tell apart.
# Ten times larger embeddings keep the current token in the stream (measured: 0 repeats
# in 32 greedy tokens, 18-25 distinct ones). The saved weights are what every reader uses.
w = load_file(os.path.join(target, "model.safetensors"))
w["model.embed_tokens.weight"] = (w["model.embed_tokens.weight"].float() * 10).to(torch.bfloat16)
save_file(w, os.path.join(target, "model.safetensors"), metadata={"format": "pt"})
tok = AutoTokenizer.from_pretrained(target)
# float32 like the check's own arithmetic, so "the argmax is the next token" holds by construction
model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
L = model.config.num_hidden_layers
words = "the model reads each token and writes the next one until the answer ends with a short summary of what it said".split()
eot = tok.convert_tokens_to_ids("<|eot_id|>")

def bf16(t):
    return t.detach().to(torch.bfloat16).contiguous().view(torch.int16).numpy().tobytes()

def write(path, aux, final, meta):
    tensors = [("aux_hidden_state", list(aux.shape), bf16(aux)), ("hidden_state", list(final.shape), bf16(final))]
    header, off = {"__metadata__": meta}, 0
    for name, shape, data in tensors:
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path + ".tmp", "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw + b"".join(d for _, _, d in tensors))
    os.replace(path + ".tmp", path)

last_out = {}
model.model.layers[-1].register_forward_hook(lambda m, a, o: last_out.__setitem__("h", (o[0] if isinstance(o, tuple) else o)[0]))
variants = {  # aux: transformers hidden_states indices; final: which state stands for the final one
    "true": ([2, L // 2, L - 3], "final"),
    "layer_later": ([3, L // 2 + 1, L - 2], "prenorm"),   # every capture one layer late
    "layer_earlier": ([1, L // 2 - 1, L - 4], "before_last"),  # every capture one layer early
    "aux_off": ([3, L // 2 + 1, L - 2], "final"),          # only the aux capture points off by one
    "aux_zero": ([2, L // 2, L - 3], "final"),
}
for v in variants:
    os.makedirs(os.path.join(out, v), exist_ok=True)
rows, shifted, greedy, repeats = [], [], [], 0
k = 0
while len(rows) < 6:
    k += 1
    user = " ".join(words[(k * 7 + j * 3) % len(words)] for j in range(6 + k % 5))
    prompt = tok.apply_chat_template([{"role": "user", "content": user}], add_generation_prompt=True, tokenize=True, return_dict=False)
    prompt = list(prompt["input_ids"] if isinstance(prompt, dict) else prompt)
    ids = list(prompt)
    with torch.no_grad():  # greedy by full forwards: the same arithmetic as the states below
        for _ in range(32):
            ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    gen = ids[len(prompt):]
    rep = sum(1 for a, b in zip(gen, gen[1:]) if a == b)
    if rep > 4:  # a random model can fall onto a fixed point; repeats would make every shift agree too
        repeats += 1
        continue
    ids = prompt + gen + [eot]
    mask = [0] * len(prompt) + [1] * (len(gen) + 1)
    rid = "row-%d" % len(rows)
    with torch.no_grad():
        o = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        g = int(o.logits[0, -1].argmax())  # what a max_new_tokens=1 temperature-0 request returns
    hs = [h[0] for h in o.hidden_states]
    assert len(hs) == L + 1
    sha = hashlib.sha256(struct.pack("<%dq" % len(ids), *ids)).hexdigest()
    for v, (aux_idx, fin) in variants.items():
        aux = torch.cat([hs[i] for i in aux_idx], dim=-1)
        if v == "aux_zero":
            H = hs[0].shape[-1]
            aux[:, H:2 * H] = 0
        final = {"final": hs[L], "prenorm": last_out["h"], "before_last": hs[L - 1]}[fin]
        meta = {"format": "aerie-hs/1", "rid": rid, "tokens": str(len(ids)), "tp_rank": "0", "input_ids_sha256": sha,
                "aux_layers": json.dumps([2, L // 2, L - 3])}  # SGLang capture ids: the inputs of these layers
        write(os.path.join(out, v, rid + ".safetensors"), aux, final, meta)
    rows.append({"id": rid, "input_ids": ids, "loss_mask": mask})
    shifted.append({"id": rid, "input_ids": ids[1:] + [eot], "loss_mask": mask[1:] + [1]})
    greedy.append({"id": rid, "greedy_next": g})
for name, data in (("ids.jsonl", rows), ("shifted.jsonl", shifted), ("greedy.jsonl", greedy)):
    with open(os.path.join(out, name), "w") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in data))
print(json.dumps({"L": L, "samples": len(rows), "repeats": repeats}))
`;

async function check(dumps: string, ids = 'ids.jsonl', extra: string[] = []): Promise<{ code: number; out: any }> {
  const args = [
    '-m',
    'aerie_hs.selfcheck',
    '--model',
    target,
    '--dumps',
    join(dir, dumps),
    '--ids',
    join(dir, ids),
    '--greedy',
    join(dir, 'greedy.jsonl'),
    ...extra,
  ];
  const r = await runAny(PY, args, { env: { PYTHONPATH: join(ROOT, 'py') } });
  if (r.code === 0) return { code: 0, out: JSON.parse(r.stdout) };
  return { code: r.code ?? -1, out: r.stdout ? JSON.parse(r.stdout) : { stderr: r.stderr } };
}

const figures = (out: any) => ({
  agreement: out.checks.teacher.figures,
  normRms: out.checks.final.figures.norm_rms_median,
  greedy: out.checks.greedy.figures,
  reference: out.checks.reference?.figures,
});

beforeAll(async () => {
  dir = tmp.path;
  target = join(dir, 'target');
  await run(PY, [join(ROOT, 'scripts/real/make_tiny_target.py'), target, '--draft-config', join(dir, 'draft.json')], {
    cwd: dir,
  });
  await writeFile(join(dir, 'gen.py'), GEN);
  made = JSON.parse((await run(PY, [join(dir, 'gen.py'), target, dir])).stdout.trim().split('\n').pop()!);
});

describe('selfcheck on the tiny Llama', () => {
  it('passes the true states: teacher-forced agreement near 1, greedy exact, the reference finds the configured layers', async () => {
    const { code, out } = await check('true');
    console.log('true states:', JSON.stringify(figures(out)));
    expect(out.messages).toEqual([]);
    expect(code).toBe(0);
    expect(out.samples).toBe(6);
    expect(out.checks.teacher.figures.agreement_next).toBeGreaterThanOrEqual(0.9);
    expect(out.checks.greedy.figures).toMatchObject({ checked: 6, exact: 6 });
    expect(out.checks.final.figures.norm_rms_median).toBeCloseTo(1, 2);
    expect(out.checks.reference.figures).toMatchObject({
      aux_expected_layer_input: [2, 4, 5],
      aux_best_layer_input: [2, 4, 5],
      final_best: made.L,
    });
  });

  it('fails tokens shifted by one: agreement collapses and the states predict each token at its own position', async () => {
    const { code, out } = await check('true', 'shifted.jsonl');
    console.log('shifted tokens:', JSON.stringify(figures(out)));
    expect(code).toBe(1);
    expect(out.checks.teacher.figures.agreement_next).toBeLessThan(0.2);
    expect(out.checks.teacher.figures.distinct_same).toBeGreaterThanOrEqual(0.9);
    expect(out.checks.teacher.messages.join('\n')).toMatch(/states sit one token later than the ids/);
  });

  // Random init leaves every norm weight at 1, so the last layer's un-normed output has the
  // post-norm state's argmax (agreement stays ~0.96) and the state one layer early still
  // scores ~0.6: the agreement is no layer detector; the post-norm RMS is.
  for (const [v, shift] of [
    ['layer_later', 1],
    ['layer_earlier', -1],
  ] as const) {
    it(`fails states taken one layer off (${v}): the final state is not post-norm and the reference names each layer`, async () => {
      const { code, out } = await check(v);
      console.log(`${v}:`, JSON.stringify(figures(out)));
      expect(code).toBe(1);
      expect(out.checks.final.figures.norm_rms_median).toBeLessThan(0.5);
      expect(out.checks.final.messages[0]).toMatch(
        /row-0: hidden_state is not the final post-norm state: rms\(h \/ norm.weight\) is 0\.\d+ per token/,
      );
      expect(out.checks.reference.figures.aux_best_layer_input).toEqual([2, 4, 5].map((i) => i + shift));
      expect(out.checks.reference.figures.final_best).not.toBe(made.L);
      expect(out.checks.reference.messages[0]).toMatch(
        new RegExp(
          `aux block 0 matches the input of layer ${2 + shift} .*not the configured input of layer 2 \\(aux layer id 1`,
        ),
      );
    });
  }

  it('fails aux states one layer off under a true final state through the reference forward alone', async () => {
    const { code, out } = await check('aux_off');
    console.log('aux one layer off:', JSON.stringify(figures(out)));
    expect(code).toBe(1);
    expect(out.checks.teacher.ok && out.checks.final.ok && out.checks.aux.ok).toBe(true);
    expect(out.checks.reference.figures.aux_best_layer_input).toEqual([3, 5, 6]);
    expect(out.checks.reference.messages).toHaveLength(3);
  });

  it('fails a zeroed aux block', async () => {
    const { code, out } = await check('aux_zero');
    expect(code).toBe(1);
    expect(out.checks.aux.messages).toContain('row-0: aux block 1 is all zeros: that layer was never captured');
  });

  it('with the reference off (a large target), the numpy checks alone still fail the one-layer-off states', async () => {
    const off = await check('layer_earlier', 'ids.jsonl', ['--reference', 'off']);
    expect(off.code).toBe(1);
    expect(off.out.checks.greedy.ok).toBe(false);
    expect(off.out.checks.reference).toBeUndefined();
    expect(off.out.checks.final.ok).toBe(false);
    expect((await check('true', 'ids.jsonl', ['--reference', 'off', '--samples', '2'])).code).toBe(0);
  });
});
