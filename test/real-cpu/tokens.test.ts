/**
 * aerie's host-side tokenization (py/aerie_hs/tokens.py) with REAL SpecForge importable (PyPI
 * specforge 0.2.0 in .venv-real): the cross-check path runs SpecForge's own
 * preprocess_conversations beside aerie's implementation and fails on any difference. On the
 * fixture conversations with the tiny target's llama3 tokenizer, the output is also the
 * recorded fixture; for aerie's other templates the tokenizer gets a chat template of that
 * family's shape (headers as plain text to this byte-level BPE, which is all the span
 * arithmetic sees), and for a tokenizer without a chat template SpecForge's fallback rendering.
 */
import { cpSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { expect, it } from 'vitest';
import { CASES, EXPECTED, MAX_LENGTHS, TOKENIZER, casesAt, jsonl, runTokens } from '../py/tokens-run.js';
import { useWorkdir } from '../support/workdir.js';

const PY = join(resolve(import.meta.dirname, '../..'), '.venv-real/bin/python');
const tmp = useWorkdir('aerie-real-tokens-');

it("agrees with real SpecForge's preprocess_conversations on every fixture conversation, and both equal the fixture", async () => {
  const seen = new Map<string, Record<string, unknown>>();
  for (const ml of MAX_LENGTHS) {
    const r = await runTokens(
      PY,
      ['--model', TOKENIZER, '--chat-template', 'llama3', '--max-length', String(ml), '--cross-check', 'require'],
      casesAt(ml),
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.summary).toMatchObject({ method: 'aerie+specforge', errors: 0, malformed: 0 });
    for (const line of r.lines) seen.set(line.id as string, line);
  }
  for (const e of EXPECTED)
    expect(seen.get(e.id), e.id).toEqual({ id: e.id, input_ids: e.input_ids, loss_mask: e.loss_mask });
});

const FAMILIES: Record<string, string> = {
  qwen: "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}",
  'qwen3-instruct': "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}",
  'kimi-k2-instruct':
    "{% for m in messages %}{% if m['role'] == 'assistant' %}<|im_assistant|>assistant<|im_middle|>{% elif m['role'] == 'user' %}<|im_user|>user<|im_middle|>{% else %}<|im_system|>system<|im_middle|>{% endif %}{{ m['content'] }}<|im_end|>{% endfor %}",
  'deepseek-v3':
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}{{ m['content'] }}{% elif m['role'] == 'user' %}<｜User｜>{{ m['content'] }}{% else %}<｜Assistant｜>{{ m['content'] }}<｜end▁of▁sentence｜>{% endif %}{% endfor %}",
};

// The fixture's conversations plus answers with Qwen3's empty think block, which qwen3-instruct unmasks.
const THINK = [
  {
    id: 'think-1',
    conversations: [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: '<think>\n\n</think>\n\nhello there' },
    ],
  },
  {
    id: 'think-2',
    conversations: [
      { role: 'user', content: 'a' },
      { role: 'assistant', content: '<think>\n\n</think>\n\nb' },
      { role: 'user', content: 'c' },
      { role: 'assistant', content: '<think>\n\n</think>\n\nd' },
    ],
  },
];
const input = jsonl([...CASES.map((c) => ({ id: c.id, conversations: c.conversations })), ...THINK]);

for (const [name, jinja] of Object.entries(FAMILIES)) {
  it(`agrees with real SpecForge for the ${name} template`, async () => {
    const dir = join(tmp.path, name);
    cpSync(TOKENIZER, dir, { recursive: true });
    writeFileSync(join(dir, 'chat_template.jinja'), jinja);
    const r = await runTokens(
      PY,
      ['--model', dir, '--chat-template', name, '--max-length', '300', '--cross-check', 'require'],
      input,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.summary).toMatchObject({ method: 'aerie+specforge', ok: CASES.length + THINK.length });
    // the spans were found: answers are masked (a mask of zeros everywhere would agree vacuously)
    expect(r.lines.filter((l) => (l.loss_mask as number[]).includes(1)).length).toBeGreaterThan(CASES.length / 2);
    if (name === 'qwen3-instruct') {
      // same rendering as qwen; only the ignored think blocks come off the mask
      const qwen = await runTokens(
        PY,
        ['--model', dir, '--chat-template', 'qwen', '--max-length', '300', '--cross-check', 'off'],
        jsonl(THINK),
      );
      const ones = (l: Record<string, unknown>) => (l.loss_mask as number[]).filter((m) => m === 1).length;
      const mine = r.lines.slice(CASES.length);
      for (const [i, l] of qwen.lines.entries()) {
        expect(mine[i].input_ids).toEqual(l.input_ids);
        expect(ones(mine[i])).toBeLessThan(ones(l));
      }
    }
  });
}

it("agrees with real SpecForge's fallback rendering for a tokenizer without a chat template", async () => {
  const dir = join(tmp.path, 'no-template');
  cpSync(TOKENIZER, dir, { recursive: true });
  rmSync(join(dir, 'chat_template.jinja'));
  const r = await runTokens(
    PY,
    ['--model', dir, '--chat-template', 'llama3', '--max-length', '2048', '--cross-check', 'require'],
    casesAt(2048),
  );
  expect(r.code, r.stderr).toBe(0);
  expect(r.summary).toMatchObject({ method: 'aerie+specforge' });
  const single = r.lines.find((l) => l.id === 'single-turn')!;
  expect(single.input_ids).not.toEqual(EXPECTED.find((e) => e.id === 'single-turn')!.input_ids);
  expect((single.loss_mask as number[]).includes(1)).toBe(true);
});
