/**
 * The disk estimate's tokens (src/stages/extract/chat-tokens.ts) from REAL SpecForge preprocessing
 * (PyPI specforge==0.2.0 in .venv-real) and the tiny target's real tokenizer: SpecForge's
 * preprocess_conversations runs for every sampled conversation (its default `tools=[[]]`
 * would stop after the first), and its counts equal an independent rendering with the
 * tokenizer's chat template plus SpecForge's llama3 system prompt.
 */
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { countTokensOnHost } from '../../src/stages/extract/chat-tokens.js';
import { estimateOfflineTokens } from '../../src/stages/extract/offline-estimate.js';
import { useLocalHost } from '../support/local-host.js';
import { runOk } from '../support/processes.js';

const run = runOk;
const ROOT = resolve(import.meta.dirname, '../..');
const PY = join(ROOT, '.venv-real/bin/python');
const fx = useLocalHost('aerie-real-tok-', { sub: 'host' });
let dir: string;
let host: LocalHost;
let target: string;

const chats = [
  [
    { role: 'user', content: 'what is the capital of france' },
    { role: 'assistant', content: 'paris is the capital of france' },
  ],
  [
    { role: 'user', content: 'count to five' },
    { role: 'assistant', content: 'one two three four five' },
    { role: 'user', content: 'and back' },
    { role: 'assistant', content: 'five four three two one' },
  ],
  [
    { role: 'user', content: 'say hi' },
    { role: 'assistant', content: 'hi' },
  ],
];

beforeAll(async () => {
  ({ dir, host } = fx);
  target = join(dir, 'target');
  await run(PY, [join(ROOT, 'scripts/real/make_tiny_target.py'), target, '--draft-config', join(dir, 'draft.json')], {
    cwd: dir,
  });
});
it("counts every conversation with SpecForge's own preprocessing, as the tokenizer's template plus SpecForge's system prompt gives", async () => {
  const r = await countTokensOnHost(host, PY, {
    modelPath: target,
    chatTemplate: 'llama3',
    maxLength: 2048,
    conversations: chats,
  });
  expect(r.method).toBe('specforge');
  expect(r.counts).toHaveLength(3);
  const independent = await run(PY, [
    '-c',
    `
import json, sys
from transformers import AutoTokenizer
from specforge.data.template import TEMPLATE_REGISTRY
tok = AutoTokenizer.from_pretrained(sys.argv[1])
sp = TEMPLATE_REGISTRY.get("llama3").system_prompt
out = []
for c in json.loads(sys.argv[2]):
    text = tok.apply_chat_template([{"role": "system", "content": sp}] + c, tokenize=False, add_generation_prompt=False)
    out.append(len(tok(text, add_special_tokens=False)["input_ids"]))
print(json.dumps(out))
`,
    target,
    JSON.stringify(chats),
  ]);
  expect(r.counts).toEqual(JSON.parse(independent.stdout) as number[]);
  // the default system prompt alone is dozens of tokens: words undercount every row
  for (const [i, c] of chats.entries())
    expect(r.counts[i]).toBeGreaterThan(c.map((m) => m.content.split(' ').length).reduce((a, b) => a + b) + 20);
});

it('the extract estimate scales each row by the measured ratio and says how it was made', async () => {
  const data = join(dir, 'train.jsonl');
  await writeFile(data, chats.map((c, i) => JSON.stringify({ id: `s${i}`, conversations: c })).join('\n') + '\n');
  const est = await estimateOfflineTokens(host, data, 2048, { python: PY, modelPath: target, chatTemplate: 'llama3' });
  expect(est.how).toMatch(
    /tokens\/word, measured on 3 rows with the target's tokenizer through SpecForge's own preprocessing/,
  );
  const exact = (
    await countTokensOnHost(host, PY, {
      modelPath: target,
      chatTemplate: 'llama3',
      maxLength: 2048,
      conversations: chats,
    })
  ).counts;
  const total = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  // the ratio is pooled over the sample: the total matches to within rounding up per row
  expect(Math.abs(total(est.tokens) - total(exact))).toBeLessThanOrEqual(chats.length);
});
