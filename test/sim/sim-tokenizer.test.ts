/**
 * The simulator target's tokenizer: the committed files are what scripts/sim-model/build_tokenizer.py
 * builds, every word the simulator generates is one token in both forms, and the simulator's own
 * TypeScript tokenizer (sim/sglang/tokenizer.ts) gives the ids the `tokenizers` library gives.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimLM } from '../../sim/sglang/lm.js';
import { VOCAB } from '../../sim/sglang/text.js';
import { SimTokenizer, builtinVocab } from '../../sim/sglang/tokenizer.js';
import { ROOT, VENV_PY, run } from '../support/sim-capture.js';
import { MODEL } from '../support/sim-sglang.js';

const HF = `
import json, sys
from transformers import AutoTokenizer
t = AutoTokenizer.from_pretrained(sys.argv[1])
req = json.load(sys.stdin)
out = {"words": {w: [t.encode(w, add_special_tokens=False), t.encode(" " + w, add_special_tokens=False)] for w in req["words"]},
       "texts": [t.encode(s, add_special_tokens=False) for s in req["texts"]],
       "bos": t.encode("hi"), "eos": t.eos_token_id, "bos_id": t.bos_token_id,
       "chat": t.apply_chat_template([{"role": "user", "content": "hello"}], tokenize=False, add_generation_prompt=True)}
print(json.dumps(out))
`;

const TEXTS = [
  '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nExplain TCP congestion control, please!<|eot_id|>',
  "It's 2026: naïve café — 12345 tokens\n\n\tand   spaces  ",
  'the river in the valley',
];

async function hf(words: readonly string[], texts: string[]) {
  const r = await run(VENV_PY, ['-c', HF, MODEL], { stdin: JSON.stringify({ words, texts }) });
  if (r.code !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as {
    words: Record<string, [number[], number[]]>;
    texts: number[][];
    bos: number[];
    eos: number;
    bos_id: number;
    chat: string;
  };
}

describe('the simulator target tokenizer', () => {
  it('is exactly what scripts/sim-model/build_tokenizer.py builds', async () => {
    const r = await run(VENV_PY, [path.join(ROOT, 'scripts', 'sim-model', 'build_tokenizer.py'), '--check']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  }, 60_000);

  it('makes every simulator word one token, bare and with its space, at the ids the simulator reports', async () => {
    const ts = SimTokenizer.forModel(MODEL);
    const got = await hf(VOCAB, TEXTS);
    const builtin = builtinVocab();
    for (const w of VOCAB) {
      const [bare, spaced] = got.words[w];
      expect(bare, w).toEqual([ts.id(w)]);
      expect(spaced, w).toEqual([ts.id('Ġ' + w)]);
      expect([builtin.get(w), builtin.get('Ġ' + w)]).toEqual([bare[0], spaced[0]]);
      expect(Math.max(bare[0], spaced[0])).toBeLessThan(32000);
    }
    expect(got.texts).toEqual(TEXTS.map((t) => ts.encode(t)));
    expect(got.bos).toEqual(ts.encode('hi', true));
    expect(got.eos).toBe(2);
    expect(got.chat).toBe(
      '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
    );
  }, 60_000);

  it('re-tokenizes a generated answer to the very ids the simulator generated', async () => {
    const ts = SimTokenizer.forModel(MODEL);
    const lm = new SimLM(ts);
    const next = lm.stream(lm.chatTail(), 0.7, 'answer', true);
    const ids = Array.from({ length: 80 }, () => next());
    const text = ids.map((id) => lm.wordOf(id)).join(' ');
    expect(ts.decode(ids)).toBe(text);
    const got = await hf([], [text]);
    expect(got.texts[0]).toEqual(ids);
  }, 60_000);
});
