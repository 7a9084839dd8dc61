/**
 * aerie's host-side tokenization (py/aerie_hs/tokens.py) against REAL SpecForge: the ids and
 * masks PyPI specforge 0.2.0's own preprocess_conversations made for the fixture conversations
 * (test/fixtures/real/specforge-pypi-0.2.0/), with the tiny target's real tokenizer, loaded by
 * transformers in set-up's .venv-specforge. That venv has no torch, so SpecForge's
 * preprocessing is not importable there and aerie's own implementation is what is tested. The
 * cross-check's refusal paths run against a stand-in `specforge` package written here.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseTokensLine, parseTokensSummary } from '../../src/stages/common/sample-tokens.js';
import { SPECFORGE_PYTHON } from '../real/judges.js';
import { useWorkdir } from '../support/workdir.js';
import { CASES, EXPECTED, MAX_LENGTHS, TOKENIZER, casesAt, jsonl, runTokens } from './tokens-run.js';

const tmp = useWorkdir('aerie-tokens-');

const args = (maxLength: number, ...more: string[]) => [
  '--model',
  TOKENIZER,
  '--chat-template',
  'llama3',
  '--max-length',
  String(maxLength),
  ...more,
];

it("reproduces real SpecForge's input_ids and loss_mask exactly for every fixture conversation", async () => {
  const seen = new Map<string, Record<string, unknown>>();
  for (const ml of MAX_LENGTHS) {
    const r = await runTokens(SPECFORGE_PYTHON, args(ml), casesAt(ml));
    expect(r.code, r.stderr).toBe(0);
    expect(r.summary).toMatchObject({ method: 'aerie', malformed: 0, errors: 0, max_length: ml });
    for (const line of r.lines) seen.set(line.id as string, line);
  }
  expect(seen.size).toBe(EXPECTED.length);
  for (const e of EXPECTED) {
    expect(seen.get(e.id), e.id).toEqual({ id: e.id, input_ids: e.input_ids, loss_mask: e.loss_mask });
  }
  // the fixture exercises what it claims: a cut inside an answer and one before it, a mask that ends on eot
  const byId = new Map(EXPECTED.map((e) => [e.id, e]));
  expect(byId.get('truncated-mid-answer')!.input_ids).toHaveLength(320);
  expect(byId.get('truncated-mid-answer')!.loss_mask.at(-1)).toBe(1);
  expect(byId.get('truncated-before-answer')!.loss_mask.every((m) => m === 0)).toBe(true);
  expect(byId.get('no-user-turn')!.loss_mask.every((m) => m === 0)).toBe(true);
  expect(CASES.some((c) => c.conversations.some((t) => typeof t === 'object' && t !== null && 'from' in t))).toBe(true);
});

it('writes one line per input line, in order; lines that are no sample are counted, copied to --rejects and never dropped', async () => {
  const ok = {
    id: 'good',
    conversations: [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
    ],
  };
  const input =
    [
      JSON.stringify(ok),
      '{not json',
      '',
      JSON.stringify({ conversations: ok.conversations }),
      JSON.stringify({ id: 'no-list', conversations: 'hi' }),
      JSON.stringify({ id: 'empty', conversations: [] }),
      JSON.stringify({ id: 'bad-content', conversations: [{ role: 'user', content: ['a'] }] }),
      JSON.stringify({ ...ok, id: 7 }),
    ].join('\n') + '\n';
  const rejects = join(tmp.path, 'rejects.jsonl');
  const r = await runTokens(SPECFORGE_PYTHON, args(2048, '--rejects', rejects, '--batch', '3'), input);
  expect(r.code, r.stderr).toBe(0);
  expect(r.lines.map((l) => [l.id, l.line ?? null, l.error ?? null])).toEqual([
    ['good', null, null],
    [null, 2, expect.stringMatching(/^bad JSON/)],
    [null, 3, 'blank line'],
    [null, 4, expect.stringMatching(/^no id/)],
    [null, 5, 'sample no-list: no conversations list'],
    ['empty', null, 'no turns (empty conversation)'],
    ['bad-content', null, 'turn 1: content is not a string'],
    ['7', null, null],
  ]);
  expect(r.lines[7].input_ids).toEqual(r.lines[0].input_ids);
  expect(r.summary).toMatchObject({ lines: 8, ok: 2, errors: 2, malformed: 4 });
  // aerie's reader (src/stages/common/sample-tokens.ts) takes the script's own output as it is
  expect(
    r.stdout
      .trim()
      .split('\n')
      .map((l) => parseTokensLine(l).kind),
  ).toEqual(['tokens', 'malformed', 'malformed', 'malformed', 'malformed', 'error', 'error', 'tokens']);
  expect(parseTokensSummary(r.stderr)).toEqual({
    lines: 8,
    ok: 2,
    errors: 2,
    malformed: 4,
    method: 'aerie',
    chatTemplate: 'llama3',
    maxLength: 2048,
  });
  expect(readFileSync(rejects, 'utf8')).toBe(
    [
      '{not json',
      '',
      JSON.stringify({ conversations: ok.conversations }),
      JSON.stringify({ id: 'no-list', conversations: 'hi' }),
    ].join('\n') + '\n',
  );
});

it('refuses a template it does not carry, and a required cross-check where SpecForge is not importable', async () => {
  const unknown = await runTokens(
    SPECFORGE_PYTHON,
    ['--model', TOKENIZER, '--chat-template', 'qwen3-thinking', '--max-length', '64'],
    '',
  );
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toMatch(
    /--chat-template: chat template 'qwen3-thinking' is not one aerie tokenizes \(supported: deepseek-v3, kimi-k2-instruct, llama3, qwen, qwen3-instruct\)/,
  );
  const required = await runTokens(SPECFORGE_PYTHON, args(64, '--cross-check', 'require'), '');
  expect(required.code).toBe(2);
  expect(required.stderr).toMatch(
    /--cross-check require: SpecForge is not importable here \((ModuleNotFoundError|ImportError): /,
  );
});

/**
 * A stand-in `specforge` with SpecForge's two names: its preprocess_conversations answers from
 * the fixture (so it agrees), or with one mask bit flipped for the conversation whose first
 * user turn is FLIP; its registry entry can carry another system prompt.
 */
function standIn(mode: { flip?: string; systemPrompt?: string }): string {
  const root = join(tmp.path, `sf-${Math.random().toString(36).slice(2)}`);
  mkdirSync(join(root, 'specforge', 'data'), { recursive: true });
  writeFileSync(join(root, 'specforge', '__init__.py'), '');
  writeFileSync(join(root, 'specforge', 'data', '__init__.py'), '');
  const answers = Object.fromEntries(
    CASES.map((c, i) => [JSON.stringify(c.conversations), [EXPECTED[i].input_ids, EXPECTED[i].loss_mask]]),
  );
  writeFileSync(join(root, 'answers.json'), JSON.stringify(answers));
  writeFileSync(
    join(root, 'specforge', 'data', 'preprocessing.py'),
    `
import json, os
ANSWERS = json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "answers.json")))
FLIP = json.loads(${JSON.stringify(JSON.stringify(mode.flip ?? null))})
class Vec(list):
    def tolist(self):
        return list(self)
def preprocess_conversations(tokenizer, conversations, chat_template, max_length=2048, tools=[[]]):
    out = {"input_ids": [], "loss_mask": []}
    for conv, _ in zip(conversations, tools):
        ids, mask = ANSWERS[json.dumps(conv, separators=(",", ":"), ensure_ascii=False)]
        mask = list(mask)
        if FLIP is not None and conv[0].get("content") == FLIP:
            mask[-1] = 1 - mask[-1]
        out["input_ids"].append([Vec(ids)])
        out["loss_mask"].append([Vec(mask)])
    return out
`,
  );
  writeFileSync(
    join(root, 'specforge', 'data', 'template.py'),
    `
import json
from types import SimpleNamespace
SP = json.loads(${JSON.stringify(JSON.stringify(mode.systemPrompt ?? null))})
class Registry:
    def get(self, name):
        assert name == "llama3"
        from aerie_hs.tokens import TEMPLATES
        t = TEMPLATES[name]
        return SimpleNamespace(assistant_header=t.assistant_header, user_header=t.user_header,
            system_prompt=SP if SP is not None else t.system_prompt, end_of_turn_token=t.end_of_turn,
            ignore_token=None, parser_type="general", assistant_pattern_type="general")
TEMPLATE_REGISTRY = Registry()
`,
  );
  return root;
}

describe('with SpecForge importable (a stand-in)', () => {
  const input = jsonl(
    CASES.filter((c) => c.max_length === 2048).map((c) => ({ id: c.id, conversations: c.conversations })),
  );

  it("uses SpecForge's preprocessing beside its own and writes when they agree", async () => {
    const r = await runTokens(SPECFORGE_PYTHON, args(2048), input, [standIn({})]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.summary).toMatchObject({
      method: 'aerie+specforge',
      ok: CASES.filter((c) => c.max_length === 2048).length,
    });
  });

  it('fails loudly on a mask that differs, naming the sample and the position, and writes nothing of that batch', async () => {
    const r = await runTokens(SPECFORGE_PYTHON, args(2048), input, [standIn({ flip: 'count to five' })]);
    expect(r.code).toBe(3);
    const len = EXPECTED.find((e) => e.id === 'multi-turn')!.loss_mask.length;
    expect(r.stderr).toContain(
      `sample 'multi-turn': loss_mask differs from SpecForge's at position ${len - 1}: aerie 1, SpecForge 0`,
    );
    expect(r.stdout).toBe('');
  });

  it("fails loudly when the host's SpecForge carries other template data than aerie", async () => {
    const r = await runTokens(SPECFORGE_PYTHON, args(2048), input, [
      standIn({ systemPrompt: 'You are a helpful assistant.' }),
    ]);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(
      /chat template 'llama3': the host's SpecForge has system_prompt='You are a helpful assistant.', aerie has ["']You are a helpful, respectful/,
    );
    expect(r.stdout).toBe('');
  });
});
