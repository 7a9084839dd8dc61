/**
 * The simulator target's tokenizer, in TypeScript: what the server needs to turn text prompts
 * into ids (a captured warmup, a text /generate) and its generated ids back into text.
 *
 * It reads `<model>/tokenizer.json` when there is one (the byte-level BPE that
 * scripts/sim-model/build_tokenizer.py writes: Llama 3's pre-tokenizer split, `ignore_merges`
 * and no merges, so a pre-token is one token when it is in the vocabulary and one token per byte
 * otherwise; exactly what the `tokenizers` library does with that file). A target without one
 * gets the same layout built here from VOCAB, so the ids of every simulator word are the same
 * either way (test/sim/sim-tokenizer.test.ts checks both against the Python library).
 */
import fs from 'node:fs';
import path from 'node:path';
import { VOCAB } from './text.js';

/** Ids 0..7 of the layout are these; the rest of 0..255 are <|reserved_special_token_N|>. */
const SPECIAL_NAMES = [
  '<|begin_of_text|>',
  '<|end_of_text|>',
  '<|eot_id|>',
  '<|start_header_id|>',
  '<|end_header_id|>',
  '<|eom_id|>',
  '<|python_tag|>',
  '<|finetune_right_pad_id|>',
];
const WHITESPACE = ['ĊĊ', 'ĊĊĊ', 'ĠĠ', 'ĠĠĠ', 'ĠĠĠĠ', 'ĉĉ'];
export const BYTE_BASE = 256;

// Llama 3's split regex; `(?i:'s|...)` spelled out, JavaScript has no inline flags.
const SPLIT =
  /'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;

/** GPT-2's byte-level alphabet: byte -> the character that stands for it in the vocabulary. */
function byteAlphabet(): string[] {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const map: string[] = new Array(256);
  for (const b of bs) map[b] = String.fromCodePoint(b);
  let n = 0;
  for (let b = 0; b < 256; b++) if (map[b] === undefined) map[b] = String.fromCodePoint(256 + n++);
  return map;
}
const BYTE_CHAR = byteAlphabet();
const CHAR_BYTE = new Map(BYTE_CHAR.map((c, b) => [c, b]));

function specialNames(): string[] {
  const out = [...SPECIAL_NAMES];
  for (let i = 0; out.length < 256; i++) out.push(`<|reserved_special_token_${i}|>`);
  return out;
}

/** The layout without tokenizer.json: specials, bytes, whitespace runs, VOCAB's words. */
export function builtinVocab(): Map<string, number> {
  const v = new Map<string, number>();
  specialNames().forEach((s, i) => v.set(s, i));
  BYTE_CHAR.forEach((c, b) => v.set(c, BYTE_BASE + b));
  const add = (s: string) => {
    if (!v.has(s)) v.set(s, v.size);
  };
  WHITESPACE.forEach(add);
  for (const w of VOCAB) for (const form of [w, 'Ġ' + w]) if (form.length > 1) add(form);
  return v;
}

export class SimTokenizer {
  private readonly byId: string[] = [];
  private readonly special = new Set<number>();
  private readonly specialRe: RegExp;

  constructor(
    private readonly vocab: Map<string, number>,
    specials: Map<string, number>,
    readonly source: string,
  ) {
    for (const [s, id] of vocab) this.byId[id] = s;
    for (const [s, id] of specials) {
      this.byId[id] = s;
      this.special.add(id);
      this.vocab.set(s, id);
    }
    const names = [...specials.keys()]
      .sort((a, b) => b.length - a.length)
      .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
    this.specialRe = new RegExp(`(${names.join('|')})`);
  }

  /** The model directory's tokenizer.json, or the built-in layout when it has none. */
  static forModel(dir: string): SimTokenizer {
    const file = path.join(dir, 'tokenizer.json');
    if (fs.existsSync(file)) {
      const j = JSON.parse(fs.readFileSync(file, 'utf8')) as {
        model: { vocab: Record<string, number> };
        added_tokens?: { id: number; content: string; special: boolean }[];
      };
      const vocab = new Map(Object.entries(j.model.vocab));
      const specials = new Map(
        (j.added_tokens ?? []).filter((t) => t.special).map((t) => [t.content, t.id] as [string, number]),
      );
      return new SimTokenizer(vocab, specials, file);
    }
    const v = builtinVocab();
    const specials = new Map(specialNames().map((s, i) => [s, i] as [string, number]));
    return new SimTokenizer(v, specials, 'built-in layout');
  }

  /** `<|begin_of_text|>`'s id (0 in the layout). */
  get bos(): number {
    return this.vocab.get('<|begin_of_text|>') ?? 0;
  }

  /** `<|end_header_id|>`'s id (4 in the layout). */
  get endHeader(): number {
    return this.vocab.get('<|end_header_id|>') ?? 4;
  }

  get size(): number {
    return this.byId.length;
  }

  id(token: string): number | undefined {
    return this.vocab.get(token);
  }

  token(id: number): string | undefined {
    return this.byId[id];
  }

  isSpecial(id: number): boolean {
    return this.special.has(id);
  }

  /** ids of `text`, special-token strings matched first; BOS first when asked (the post-processor's). */
  encode(text: string, addBos = false): number[] {
    const out: number[] = addBos ? [this.bos] : [];
    for (const part of text.split(this.specialRe)) {
      if (part === '') continue;
      const sid = this.vocab.get(part);
      if (sid !== undefined && this.special.has(sid)) {
        out.push(sid);
        continue;
      }
      for (const piece of part.match(SPLIT) ?? []) {
        const mapped = [...Buffer.from(piece, 'utf8')].map((b) => BYTE_CHAR[b]).join('');
        const whole = this.vocab.get(mapped);
        if (whole !== undefined) out.push(whole);
        else for (const ch of mapped) out.push(this.vocab.get(ch)!);
      }
    }
    return out;
  }

  decode(ids: readonly number[], skipSpecial = true): string {
    const bytes: number[] = [];
    let text = '';
    const flush = () => {
      text += Buffer.from(bytes).toString('utf8');
      bytes.length = 0;
    };
    for (const id of ids) {
      const t = this.byId[id];
      if (t === undefined) continue;
      if (this.special.has(id)) {
        flush();
        if (!skipSpecial) text += t;
        continue;
      }
      for (const ch of t) bytes.push(CHAR_BYTE.get(ch) ?? 0x3f);
    }
    flush();
    return text;
  }

  /** Whether a word after this token takes its leading space (Ġ form): after text, not after whitespace or a special. */
  wantsSpaceAfter(id: number): boolean {
    if (this.special.has(id)) return false;
    const t = this.byId[id];
    if (!t) return false;
    const last = t[t.length - 1];
    return !(last === 'Ġ' || last === 'Ċ' || last === 'ĉ' || last === 'č');
  }
}
