// Deterministic prompt sets for benchmark levels: the same seed gives the same
// prompts on every machine, so a baseline and a speculative run see identical input.

/**
 * Common English words. Sampling words (not token ids) keeps prompts readable and
 * tokenizer-independent; a word is roughly 1–1.5 tokens for Llama/Qwen tokenizers.
 */
const WORDS: readonly string[] = (
  'the of and to in is was for on that with as by at from his it an were are which this be ' +
  'or has had first one their its new after but who not they have her she two been other when ' +
  'there all during into school time may years more most only over city some world would where ' +
  'later up such used many can state about national out known university united then made under ' +
  'team three four five river water light house garden market music story paper number system ' +
  'people family country history morning evening village mountain forest ocean island bridge road ' +
  'train station window table chair letter book library teacher student doctor engineer farmer ' +
  'painter writer question answer problem reason method result change energy power signal field ' +
  'simple careful quiet bright early late quick slow warm cold green blue red yellow small large ' +
  'ancient modern public private local central northern southern eastern western open closed ' +
  'write read build carry follow explain describe compare measure consider remember imagine ' +
  'travel return begin finish improve protect discover create design develop support include'
).split(' ');

/** splitmix32: tiny, fast, and well distributed for a 32-bit seed. */
export function seededRandom(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    z = (z ^ (z >>> 16)) >>> 0;
    return z / 4294967296;
  };
}

/** `n` prompts of exactly `inputLenWords` words each, drawn uniformly from a fixed list. */
export function randomPrompts(n: number, inputLenWords: number, seed: number): string[] {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`n must be a non-negative integer, got ${n}`);
  if (!Number.isInteger(inputLenWords) || inputLenWords < 1) {
    throw new RangeError(`inputLenWords must be a positive integer, got ${inputLenWords}`);
  }
  const next = seededRandom(seed);
  const prompts: string[] = [];
  for (let i = 0; i < n; i++) {
    const words: string[] = new Array(inputLenWords);
    for (let w = 0; w < inputLenWords; w++) words[w] = WORDS[Math.floor(next() * WORDS.length)];
    prompts.push(words.join(' '));
  }
  return prompts;
}

/**
 * The first user turn of the first `n` usable rows of SpecForge
 * (`{"conversations": [{"role", "content"}]}`) or ShareGPT
 * (`{"conversations": [{"from": "human", "value"}]}`) JSONL lines. Rows that are not
 * JSON, have no conversations array, or have no non-empty user turn are skipped.
 */
export function promptsFromConversations(lines: readonly string[], n: number): string[] {
  const out: string[] = [];
  for (const line of lines) {
    if (out.length >= n) break;
    if (line.trim().length === 0) continue;
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch {
      continue;
    }
    const prompt = firstUserTurn(row);
    if (prompt !== undefined) out.push(prompt);
  }
  return out;
}

/** `n` prompts from a fixed set, in order, starting over when the set runs out. */
export function cyclePrompts(pool: readonly string[], n: number): string[] {
  if (pool.length === 0) throw new RangeError('cyclePrompts: the prompt set is empty');
  return Array.from({ length: n }, (_, i) => pool[i % pool.length]!);
}

/** The first user turn of one SpecForge / ShareGPT row, or undefined when the row has none. */
export function firstUserTurn(row: unknown): string | undefined {
  if (typeof row !== 'object' || row === null) return undefined;
  const turns = (row as { conversations?: unknown }).conversations;
  if (!Array.isArray(turns)) return undefined;
  for (const t of turns) {
    if (typeof t !== 'object' || t === null) continue;
    const turn = t as Record<string, unknown>;
    const speaker = turn.role ?? turn.from;
    if (speaker !== 'user' && speaker !== 'human') continue;
    const text = turn.content ?? turn.value;
    // The first user turn decides; an empty one makes the row unusable rather than
    // silently promoting a later turn that was written as a follow-up.
    return typeof text === 'string' && text.trim().length > 0 ? text : undefined;
  }
  return undefined;
}
