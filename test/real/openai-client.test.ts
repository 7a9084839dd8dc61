/**
 * The `openai` Python client (openai==1.99.1, SGLang 0.5.4's own pin; scripts/setup-sglang-client.sh)
 * as the judge of the simulator's /v1 chat routes: chat.completions.create without and with
 * stream=True. The client parses leniently (it builds models without validating), so the script
 * also validates every body and chunk against the client's own pydantic types, which is what
 * a strict consumer of the same types sees. Usage counts are checked against the local
 * tokenizer (transformers, from disk) where the client's view allows it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../support/processes.js';
import { startSim, stopSim, type Sim } from '../support/sim.js';
import { OFFLINE_ENV, SIM_TARGET, sglangBenchPython } from './sglang-client.js';

const MAX_TOKENS = 12;

// Runs inside .venv-sglang-bench; prints one JSON object. Any exception (a parse or a
// validation error in the client's own types) exits non-zero with the traceback.
const SCRIPT = String.raw`
import json, sys
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from transformers import AutoTokenizer

base_url, target, max_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = openai.OpenAI(base_url=base_url + "/v1", api_key="sk-unused", max_retries=0, timeout=30)
messages = [{"role": "user", "content": "Tell me about the river and the mountain."}]
tok = AutoTokenizer.from_pretrained(target)

raw = client.chat.completions.with_raw_response.create(
    model="default", messages=messages, max_tokens=max_tokens, temperature=0)
plain = raw.parse()
ChatCompletion.model_validate(raw.http_response.json())  # strict: types and literals

chunks = []
for chunk in client.chat.completions.create(
        model="default", messages=messages, max_tokens=max_tokens, temperature=0,
        stream=True, stream_options={"include_usage": True}):
    ChatCompletionChunk.model_validate(chunk.to_dict())
    chunks.append(chunk)

content_chunks = [c for c in chunks if c.choices and c.choices[0].delta.content]
finish_chunks = [c for c in chunks if c.choices and c.choices[0].finish_reason is not None]
usage_chunks = [c for c in chunks if c.usage is not None]
streamed = "".join(c.choices[0].delta.content for c in content_chunks)
print(json.dumps({
    "openai": openai.__version__,
    "plain": {
        "object": plain.object, "id": plain.id, "model": plain.model,
        "role": plain.choices[0].message.role, "content": plain.choices[0].message.content,
        "finish_reason": plain.choices[0].finish_reason, "n_choices": len(plain.choices),
        "usage": plain.usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"}),
    },
    "stream": {
        "objects": sorted({c.object for c in chunks}),
        "ids": sorted({c.id for c in chunks}),
        "first_role": chunks[0].choices[0].delta.role if chunks and chunks[0].choices else None,
        "n_chunks": len(chunks), "n_content": len(content_chunks),
        "finish": [c.choices[0].finish_reason for c in finish_chunks],
        "usage_positions": [i for i, c in enumerate(chunks) if c.usage is not None],
        "last_choices": len(chunks[-1].choices) if chunks else None,
        "usage": usage_chunks[-1].usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"}) if usage_chunks else None,
        "content": streamed,
    },
    "tokenizer": {
        "prompt_tokens": len(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)),
        "content_tokens": len(tok.encode(plain.choices[0].message.content, add_special_tokens=False)),
    },
}))
`;

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}
interface Verdict {
  openai: string;
  plain: {
    object: string;
    id: string;
    model: string;
    role: string;
    content: string;
    finish_reason: string;
    n_choices: number;
    usage: Usage;
  };
  stream: {
    objects: string[];
    ids: string[];
    first_role: string | null;
    n_chunks: number;
    n_content: number;
    finish: string[];
    usage_positions: number[];
    last_choices: number | null;
    usage: Usage | null;
    content: string;
  };
  tokenizer: { prompt_tokens: number; content_tokens: number };
}

async function runPython(
  python: string,
  args: string[],
  timeoutMs: number,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // test/support's run: its own process group, so a timeout stops the interpreter and anything it started.
  const { code, stdout, stderr } = await run(python, ['-c', SCRIPT, ...args], { env: OFFLINE_ENV, timeoutMs });
  return { code, stdout, stderr };
}

// The simulator as the oldest and the newest release it imitates: the chat routes' shapes are the
// same in both (sim/sglang/profile.ts has no chat rule but the streamed ValueError's).
describe.each(['0.5.4', '0.5.23'])('the openai client against the simulator at SGLang %s', (version) => {
  let sim: Sim | undefined;
  let verdict: Verdict;

  beforeAll(async () => {
    const python = sglangBenchPython();
    sim = await startSim({}, [], { version });
    const res = await runPython(python, [sim.baseUrl, SIM_TARGET, String(MAX_TOKENS)], 45_000);
    if (res.code !== 0)
      throw new Error(
        `the openai client failed against the simulator (exit ${res.code}):\n${res.stderr}\n${res.stdout}`,
      );
    verdict = JSON.parse(res.stdout.trim().split('\n').pop()!) as Verdict;
  }, 90_000);

  afterAll(async () => {
    if (sim) await stopSim(sim);
  });

  it('is the pinned client', () => {
    expect(verdict.openai).toBe('1.99.1');
  });

  it('chat.completions.create: one assistant choice with content and consistent usage', () => {
    const p = verdict.plain;
    expect(p.object).toBe('chat.completion');
    expect(p.n_choices).toBe(1);
    expect(p.role).toBe('assistant');
    expect(p.content.length).toBeGreaterThan(0);
    expect(['length', 'stop']).toContain(p.finish_reason);
    expect(p.usage.completion_tokens).toBeGreaterThan(0);
    expect(p.usage.completion_tokens).toBeLessThanOrEqual(MAX_TOKENS);
    if (p.finish_reason === 'length') expect(p.usage.completion_tokens).toBe(MAX_TOKENS);
    expect(p.usage.total_tokens).toBe(p.usage.prompt_tokens + p.usage.completion_tokens);
    // The generated ids are the tokenizer's own, so re-encoding the text gives their count back.
    expect(verdict.tokenizer.content_tokens).toBe(p.usage.completion_tokens);
  });

  it("prompt_tokens: the templated conversation's tokens, as the target's own tokenizer counts them", () => {
    // SGLang counts a chat request's prompt as apply_chat_template(..., tokenize=True,
    // add_generation_prompt=True) of the target's tokenizer (sglang==0.5.4:srt/entrypoints/openai/serving_chat.py:318-321);
    // the simulator renders the target's Llama 3 template and encodes it with tokenizer.json's ids
    // (sim/sglang/api-openai.ts handleChat, sim/sglang/text.ts renderChat). The transformers tokenizer is the judge.
    expect(verdict.plain.usage.prompt_tokens).toBe(verdict.tokenizer.prompt_tokens);
  });

  it('stream=True: chunk objects the client parses and validates, role first, one finish, usage last', () => {
    const s = verdict.stream;
    expect(s.objects).toEqual(['chat.completion.chunk']);
    expect(s.ids).toHaveLength(1); // one id across the stream
    expect(s.first_role).toBe('assistant');
    expect(s.n_content).toBeGreaterThan(0);
    expect(s.finish).toHaveLength(1);
    expect(s.finish[0]).toBe(verdict.plain.finish_reason);
    // include_usage: exactly one usage chunk, the last, with no choices (OpenAI's shape).
    expect(s.usage_positions).toEqual([s.n_chunks - 1]);
    expect(s.last_choices).toBe(0);
  });

  it('stream=True gives the same greedy text and usage as the plain call', () => {
    expect(verdict.stream.content).toBe(verdict.plain.content);
    expect(verdict.stream.usage).toEqual(verdict.plain.usage);
  });
});
