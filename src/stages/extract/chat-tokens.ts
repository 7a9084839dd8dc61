/**
 * How many tokens SpecForge will make of the training conversations, measured on the GPU host
 * with the target's own tokenizer: the disk a hidden-state extraction needs is counted in
 * those tokens, not in whitespace words (conformance.md D8). SpecForge renders each
 * conversation with the tokenizer's chat template after injecting its template's default
 * system prompt and dropping turns before the first user turn, tokenizes with
 * add_special_tokens=False and truncates to max-length
 * (SpecForge@a6b6b023:specforge/data/parse.py:187-247), so a short chat costs a few hundred
 * tokens more than its words. Where SpecForge is importable on the host the script calls
 * SpecForge's own `preprocess_conversations` (SpecForge@a6b6b023:specforge/data/preprocessing.py:109;
 * the same name and arguments at 73e6f808:113 and 20e2e3f0:119); otherwise it renders with
 * transformers alone and says so (no SpecForge system prompt: an underestimate).
 *
 * Only a sample of the rows is tokenized (loading a tokenizer and rendering 100k chats would
 * make every check take minutes); the tokens-per-word ratio it gives scales every row's word
 * count. Padding is bounded separately (paddedTokenBound).
 */
import type { Host } from '../../hosts/host.js';

/** One conversation as SpecForge's parser takes it: [{role, content}, ...]. */
export type ChatMessages = { role: string; content: string }[];

export interface TokenRequest {
  modelPath: string;
  chatTemplate: string;
  maxLength: number;
  trustRemoteCode?: boolean;
  conversations: ChatMessages[];
}

export interface TokenCounts {
  method: 'specforge' | 'transformers';
  counts: number[];
}

// `tools` is passed per conversation: preprocess_conversations zips conversations with it, and
// its default `[[]]` would stop after the first conversation (SpecForge@a6b6b023:specforge/data/preprocessing.py:116,154).
export const TOKEN_COUNT_SCRIPT = String.raw`
import json, sys, warnings
warnings.simplefilter("ignore")
req = json.load(sys.stdin)
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(req["model"], trust_remote_code=bool(req.get("trust_remote_code")))
convs = req["conversations"]
ml = int(req["max_length"])
try:
    from specforge.data.preprocessing import preprocess_conversations
    from specforge.data.template import TEMPLATE_REGISTRY
except ImportError:
    preprocess_conversations = None
if preprocess_conversations is not None:
    tpl = TEMPLATE_REGISTRY.get(req["chat_template"])
    out = preprocess_conversations(tok, convs, tpl, ml, tools=[[] for _ in convs])
    counts = [int(t.shape[-1]) for t in out["input_ids"]]
    method = "specforge"
else:
    counts = []
    for c in convs:
        while c and c[0]["role"] not in ("user", "system"):
            c = c[1:]
        text = tok.apply_chat_template(c, tokenize=False, add_generation_prompt=False)
        counts.append(len(tok(text, add_special_tokens=False, truncation=True, max_length=ml)["input_ids"]))
    method = "transformers"
print(json.dumps({"method": method, "counts": counts}))
`;

export function parseTokenCounts(stdout: string, expected: number): TokenCounts {
  const last = stdout.trim().split('\n').pop() ?? '';
  let parsed: unknown;
  try {
    parsed = JSON.parse(last);
  } catch {
    throw new Error(`the token count script printed no result (last line: ${last.slice(0, 200) || '(nothing)'})`);
  }
  const r = parsed as Partial<TokenCounts>;
  if (
    (r.method !== 'specforge' && r.method !== 'transformers') ||
    !Array.isArray(r.counts) ||
    r.counts.some((c) => !Number.isInteger(c) || c < 0)
  ) {
    throw new Error(`the token count script printed an unexpected result: ${last.slice(0, 200)}`);
  }
  if (r.counts.length !== expected)
    throw new Error(`the token count script counted ${r.counts.length} conversations of ${expected}`);
  return { method: r.method, counts: r.counts };
}

/** Tokenize conversations on the host with the target's tokenizer, through `python` there. */
export async function countTokensOnHost(host: Host, python: string, req: TokenRequest): Promise<TokenCounts> {
  const body = JSON.stringify({
    model: req.modelPath,
    chat_template: req.chatTemplate,
    max_length: req.maxLength,
    trust_remote_code: req.trustRemoteCode ?? false,
    conversations: req.conversations,
  });
  const r = await host.exec([python, '-c', TOKEN_COUNT_SCRIPT], { stdin: body, timeoutMs: 10 * 60_000 });
  if (r.code !== 0) {
    throw new Error(
      `counting tokens with ${python} on ${host.name} failed (exit ${r.code}): ${r.stderr.trim().slice(-400)}`,
    );
  }
  return parseTokenCounts(r.stdout, req.conversations.length);
}

/**
 * Tokens per whitespace word over the sampled rows that were not truncated (a truncated row
 * says nothing about the ratio). Falls back to 1 when there is nothing to learn from.
 */
export function tokensPerWord(words: number[], tokens: number[], maxLength: number): number {
  let w = 0;
  let t = 0;
  words.forEach((wi, i) => {
    const ti = tokens[i]!;
    if (ti < maxLength && wi > 0) {
      w += wi;
      t += ti;
    }
  });
  return w > 0 ? t / w : 1;
}

/** A row's estimated tokens from its word count and the measured ratio, capped at max-length. */
export function rowTokens(words: number, ratio: number, maxLength: number): number {
  return Math.min(maxLength, Math.max(1, Math.ceil(words * ratio)));
}

/**
 * An upper bound on the tokens stored when rows are padded to the longest row of their batch
 * (SpecForge@a6b6b023:specforge/data/utils.py:122-141) and the batches' composition is not
 * known (SpecForge shuffles): each batch stores batchSize × its longest row, and the longest
 * rows of ⌈N/B⌉ distinct batches can sum to no more than the ⌈N/B⌉ longest rows.
 */
export function paddedTokenBound(lengths: number[], batchSize: number): number {
  if (batchSize <= 1) return lengths.reduce((a, b) => a + b, 0);
  const batches = Math.ceil(lengths.length / batchSize);
  const longest = [...lengths].sort((a, b) => b - a).slice(0, batches);
  return Math.min(
    batchSize * longest.reduce((a, b) => a + b, 0),
    // never more than every row padded to the longest of all
    lengths.length * (longest[0] ?? 0),
  );
}

/**
 * Bytes per stored token of SpecForge's offline features: hidden_state H and aux 3H in the
 * target dtype (bf16: 2 bytes) plus int64 input_ids and loss_mask
 * (SpecForge@a6b6b023:specforge/algorithms/eagle3/providers.py:141-150 — see conformance.md).
 */
export function featureBytesPerToken(hiddenSize: number, dtypeBytes = 2): number {
  return 4 * hiddenSize * dtypeBytes + 16;
}
