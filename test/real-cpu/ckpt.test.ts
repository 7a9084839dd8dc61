/**
 * aerie's torch-free converter (py/aerie_hs/ckpt.py, run with the system python3 as on a worker)
 * judged by REAL torch 2.13 and REAL SpecForge (PyPI specforge 0.2.0 in .venv-real): random
 * bf16 states captured through aerie_hs.capture's dump writer come back from
 * `torch.load(weights_only=True)` with the exact dtypes, shapes and values; the files are
 * byte for byte what torch.save writes for the same record; and SpecForge's own offline
 * dataset (SpecForge@a6b6b023:specforge/data/preprocessing.py:569, which loads with
 * weights_only=False, mmap=True at :538) reads them without falling back (at :544-545 a file it
 * cannot load is replaced, silently but for a print, by file 0).
 */
import { join, resolve } from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { runOk } from '../support/processes.js';
import { useWorkdir } from '../support/workdir.js';

const exec = runOk;
const ROOT = resolve(import.meta.dirname, '../..');
const PY = join(ROOT, '.venv-real/bin/python');
const ENV = { ...process.env, PYTHONPATH: join(ROOT, 'py') };
const tmp = useWorkdir('aerie-real-ckpt-');
let dir: string;

beforeAll(async () => {
  dir = tmp.path;
});

const SPECS: [string, number, number][] = [
  ['conv-a', 37, 64],
  ['conv-b', 1, 64],
  ['conv-c', 300, 64],
  ['conv-d', 129, 64],
];

it("gives real torch.load(weights_only=True) the exact tensors, torch.save's own bytes, and SpecForge's dataset its samples", async () => {
  // States from torch (random normals in bf16, with the specials bf16 can hold), through the capture's writer.
  await exec(
    PY,
    [
      '-c',
      String.raw`
import json, os, sys, torch
from aerie_hs.capture import write_safetensors, input_ids_sha256, bf16_bytes
d, specs = sys.argv[1], json.loads(sys.argv[2])
os.makedirs(d + "/dumps"); os.makedirs(d + "/ref")
g = torch.Generator().manual_seed(5)
with open(d + "/ids.jsonl", "w") as f:
    for sid, t, h in specs:
        ids = torch.randint(0, 128256, (t,), generator=g).tolist()
        mask = torch.randint(0, 2, (t,), generator=g).tolist()
        aux = (torch.randn(t, 3 * h, generator=g) * 40).to(torch.bfloat16)
        last = torch.randn(t, h, generator=g).to(torch.bfloat16)
        aux[0, :4] = torch.tensor([float("inf"), float("-inf"), -0.0, 1e-40]).to(torch.bfloat16)
        write_safetensors(d + "/dumps/" + sid + ".safetensors",
            {"aux_hidden_state": ("BF16", [t, 3 * h], bf16_bytes(aux)), "hidden_state": ("BF16", [t, h], bf16_bytes(last))},
            {"format": "aerie-hs/1", "rid": sid, "tokens": str(t), "aux_layers": "[1, 3, 5]", "tp_rank": "0", "input_ids_sha256": input_ids_sha256(ids)})
        torch.save({"ids": torch.tensor(ids), "mask": torch.tensor(mask), "aux": aux, "last": last}, d + "/ref/" + sid + ".pt")
        f.write(json.dumps({"id": sid, "input_ids": ids, "loss_mask": mask}) + "\n")
`,
      dir,
      JSON.stringify(SPECS),
    ],
    { env: ENV },
  );

  // The worker's converter has no torch: the system python3.
  const conv = await exec(
    'python3',
    [
      '-m',
      'aerie_hs.ckpt',
      'convert',
      '--dumps',
      join(dir, 'dumps'),
      '--ids',
      join(dir, 'ids.jsonl'),
      '--out',
      join(dir, 'out'),
      '--file-group-size',
      '3',
    ],
    { env: ENV },
  );
  expect(conv.stdout.trim().split('\n').at(-1)).toBe('END written=4 skipped=0 missing=0 rejected=0 failed=0');

  const judged = await exec(
    PY,
    [
      '-c',
      String.raw`
import io, json, os, sys, contextlib, torch
from specforge.data.preprocessing import build_offline_eagle3_dataset
d = sys.argv[1]
res = {}
for line in open(d + "/out/index.jsonl"):
    e = json.loads(line); i = e["i"]; g = i // 3 * 3
    p = "%s/out/rows_%d-%d/data_%d.ckpt" % (d, g, g + 3, i)
    ref = torch.load(d + "/ref/" + e["id"] + ".pt", weights_only=True)
    want = {"input_ids": ref["ids"], "loss_mask": ref["mask"], "aux_hidden_state": ref["aux"].unsqueeze(0), "hidden_state": ref["last"].unsqueeze(0)}
    r = {}
    for mmap in (False, True):
        got = torch.load(p, weights_only=True, mmap=mmap)
        r["keys"] = list(got)
        r["dtypes"] = [str(got[k].dtype) for k in got]
        r["shapes"] = [list(got[k].shape) for k in got]
        r["equal_mmap" if mmap else "equal"] = all(torch.equal(got[k], want[k]) and got[k].dtype == want[k].dtype for k in want)
    again = os.path.join(d, "resaved", "data_%d.ckpt" % i)
    os.makedirs(os.path.dirname(again), exist_ok=True)
    torch.save({k: want[k].clone() for k in ("input_ids", "loss_mask", "aux_hidden_state", "hidden_state")}, again)
    r["same_bytes_as_torch_save"] = open(again, "rb").read() == open(p, "rb").read()
    res[e["id"]] = r
ds = build_offline_eagle3_dataset(d + "/out", max_len=2048)
out = io.StringIO()
with contextlib.redirect_stdout(out):
    items = [ds[k] for k in range(len(ds))]
res["specforge"] = {"files": len(ds), "printed": out.getvalue(), "tokens": sorted(int(x["input_ids"].shape[1]) for x in items),
                    "target_dtype": str(items[0]["target"].dtype), "hidden_dtype": str(items[0]["hidden_state"].dtype)}
print(json.dumps(res))
`,
      dir,
    ],
    { env: ENV },
  );
  const res = JSON.parse(judged.stdout) as Record<string, Record<string, unknown>>;
  for (const [sid, t, h] of SPECS) {
    expect(res[sid]).toEqual({
      keys: ['input_ids', 'loss_mask', 'aux_hidden_state', 'hidden_state'],
      dtypes: ['torch.int64', 'torch.int64', 'torch.bfloat16', 'torch.bfloat16'],
      shapes: [[t], [t], [1, t, 3 * h], [1, t, h]],
      equal: true,
      equal_mmap: true,
      same_bytes_as_torch_save: true,
    });
  }
  expect(res.specforge).toEqual({
    files: 4,
    printed: '',
    tokens: SPECS.map((s) => s[1]).sort((a, b) => a - b),
    target_dtype: 'torch.bfloat16',
    hidden_dtype: 'torch.bfloat16',
  });
});
