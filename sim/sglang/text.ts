/**
 * Deterministic "language model": output words, token ids and natural lengths are pure
 * functions of the prompt (and the sampling seed), so tests and dry runs can assert exact
 * counts and two runs of the same workload produce the same numbers.
 */

/** 32-bit FNV-1a: a stable seed from any string. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** mulberry32: small, fast, good enough for picking words and accept lengths. */
export function makeRng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const VOCAB: readonly string[] = (
  'the of and to in is that for it as with was on be by this are at from or an which have not ' +
  'but all can they were their has one more when there will so if about what its also into other ' +
  'than some time only these two may first then any new like our could would most over such ' +
  'model token layer draft target server batch speed memory cache value state step train data ' +
  'graph queue request decode prefill length accept verify sample output input hidden weight ' +
  'because while where each through between during after before under again further once here ' +
  'why how both few many much own same very just now well even back still way good great small ' +
  'large long short high low early late right left open close clear simple quick quiet bright ' +
  'river mountain forest ocean island valley desert meadow harbor bridge tower garden village ' +
  'city road path field stone water fire wind light shadow morning evening night summer winter ' +
  'spring autumn rain snow cloud star moon sun tree flower leaf root seed bird fish horse wolf ' +
  'answer question reason result method system process function number example problem idea ' +
  'story history science music language theory practice pattern signal measure report'
).split(' ');

/** Token ids of words start here, leaving room for special tokens below. */
export const WORD_ID_BASE = 1000;

export function wordOfId(id: number): string {
  const w = VOCAB[id - WORD_ID_BASE];
  return w ?? '';
}

/**
 * The length a reply would have if the model were left alone (EOS token included).
 * Spread over roughly 24..520 tokens, like chat answers.
 */
export function naturalLength(seedKey: string): number {
  return 24 + (hash32('len:' + seedKey) % 497);
}

/** The seed key for one request: the prompt, plus the sampling seed and choice index when given. */
export function seedKey(prompt: string, samplingSeed: number | null, choice = 0): string {
  let k = prompt;
  if (samplingSeed !== null) k += `\u0000seed=${samplingSeed}`;
  if (choice > 0) k += `\u0000n=${choice}`;
  return k;
}

/** A generator of word token ids for one request. */
export function tokenStream(key: string): () => number {
  const rng = makeRng(hash32('tok:' + key));
  return () => WORD_ID_BASE + Math.floor(rng() * VOCAB.length);
}

export interface ChatMessage {
  role: string;
  content: string;
}

/**
 * The target's chat template (examples/models/sim-llama-8b/tokenizer_config.json, Llama 3's),
 * rendered with add_generation_prompt as SGLang's chat route asks for it
 * (apply_chat_template(..., tokenize=True, add_generation_prompt=True):
 * sglang==0.5.4:srt/entrypoints/openai/serving_chat.py:318-321). The text starts with the BOS
 * token's string, so its ids are encode(text) without another BOS (transformers tokenizes a
 * rendered template with add_special_tokens=False).
 */
export function renderChat(messages: readonly ChatMessage[]): string {
  return (
    '<|begin_of_text|>' +
    messages.map((m) => `<|start_header_id|>${m.role}<|end_header_id|>\n\n${m.content.trim()}<|eot_id|>`).join('') +
    '<|start_header_id|>assistant<|end_header_id|>\n\n'
  );
}

/** A deterministic pseudo-logprob for reporting, in (-3, 0]. */
export function pseudoLogprob(key: string, position: number): number {
  const r = makeRng(hash32(`lp:${key}:${position}`))();
  return -Math.round(r * 3_0000) / 1_0000;
}
