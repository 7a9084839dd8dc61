/**
 * The simulator's causal "language model", in the target tokenizer's id space.
 *
 * Its greedy successor succ(context) is a pure function of the last two ids: a word of VOCAB
 * picked by hash, in its `Ġword` form after text and its bare form after whitespace or a special
 * token (as a real model starts an answer after the header's "\n\n"). Generation follows succ
 * exactly at temperature 0 and with probability followProbability(T) otherwise; extraction
 * (capture.ts) builds hidden states whose argmax through the target's lm_head is succ at every
 * position. So the simulator's answers are its own samples, and the self-check's teacher and
 * greedy checks hold on its dumps for the same reason they hold on a real target's.
 */
import { VOCAB, hash32, makeRng } from './text.js';
import type { SimTokenizer } from './tokenizer.js';

/** How often a sampled token is the greedy one: 1 at T=0, 0.825 at the demo's 0.7, 0.75 at T=1, never below 0.5. */
export function followProbability(temperature: number): number {
  if (temperature <= 0) return 1;
  return Math.max(0.5, 1 - 0.25 * temperature);
}

export class SimLM {
  /** Per VOCAB word: [bare id, Ġ id]. */
  private readonly forms: [number, number][];
  private readonly wordOfIdMap = new Map<number, string>();

  constructor(readonly tok: SimTokenizer) {
    this.forms = VOCAB.map((w) => {
      const bare = tok.id(w);
      const spaced = tok.id('Ġ' + w);
      if (bare === undefined || spaced === undefined) {
        throw new Error(
          `the target's tokenizer (${tok.source}) has no single token for the simulator word '${w}' (both 'w' and 'Ġw' forms needed)`,
        );
      }
      this.wordOfIdMap.set(bare, w).set(spaced, w);
      return [bare, spaced];
    });
  }

  /** The last two ids of any chat prompt under a Llama 3 template: `<|end_header_id|>`, "\n\n". */
  chatTail(): number[] {
    return [this.tok.endHeader, this.tok.id('ĊĊ') ?? this.tok.encode('\n\n')[0]];
  }

  private form(word: number, prev: number): number {
    return this.forms[word][this.tok.wantsSpaceAfter(prev) ? 1 : 0];
  }

  /** The greedy next token after ...prev2, prev1. */
  succ(prev2: number | null, prev1: number): number {
    return this.form(hash32(`succ:${prev2 ?? -1}:${prev1}`) % this.forms.length, prev1);
  }

  /** succ at every position of `ids`: the token position t's final state must predict. */
  successors(ids: readonly number[]): number[] {
    return ids.map((id, t) => this.succ(t > 0 ? ids[t - 1] : null, id));
  }

  /** The word a generated id spells ('' for any other id). */
  wordOf(id: number): string {
    return this.wordOfIdMap.get(id) ?? '';
  }

  /**
   * A request's token generator. `context` holds at least the prompt's last id; with
   * `bareFirst` the first word comes without its leading space whatever precedes it (text
   * prompts, whose ids the simulator only approximates), so `text` reads "w1 w2 ...".
   */
  stream(context: readonly number[], temperature: number, key: string, bareFirst: boolean): () => number {
    const rng = makeRng(hash32('tok:' + key));
    const follow = followProbability(temperature);
    let p2: number | null = context.length > 1 ? context[context.length - 2] : null;
    let p1 = context.length > 0 ? context[context.length - 1] : this.tok.bos;
    let first = true;
    return () => {
      let id: number;
      if (rng() < follow) id = this.succ(p2, p1);
      else id = this.form(Math.floor(rng() * this.forms.length), p1);
      if (first && bareFirst) id = this.forms[VOCAB.indexOf(this.wordOf(id))][0];
      first = false;
      p2 = p1;
      p1 = id;
      return id;
    };
  }
}
