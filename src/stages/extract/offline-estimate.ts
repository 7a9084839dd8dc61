/**
 * How much disk SpecForge's prepare_hidden_states.py will write, in SpecForge's own tokens
 * (conformance.md D8): each row's whitespace words scaled by the tokens-per-word ratio that the
 * target's tokenizer gives a sample of rows on the host (chat-tokens.ts: the chat template,
 * SpecForge's default system prompt), capped at max-length, then padded as prepare pads
 * them: each file holds its batch's longest row (the collator pads, and capture stores the
 * whole padded row; SpecForge@a6b6b023:specforge/data/utils.py:122-141). When the host cannot
 * tokenize (no transformers in stages.extract.python), the words stand in and the note says so.
 */
import type { Host } from '../../hosts/host.js';
import {
  countTokensOnHost,
  featureBytesPerToken,
  paddedTokenBound,
  rowTokens,
  tokensPerWord,
  type ChatMessages,
} from './chat-tokens.js';
import { estimateTokens, parseSampleLine, renderForExtraction, streamLines } from '../common/index.js';

export interface TokenizerOnHost {
  python: string;
  modelPath: string;
  chatTemplate: string;
  trustRemoteCode?: boolean;
}

export interface OfflineTokenEstimate {
  /** Estimated SpecForge tokens per row of the data file, before padding. */
  tokens: number[];
  /** How the figure was made, for notes and errors. */
  how: string;
}

const SAMPLE = 256;

export async function estimateOfflineTokens(
  host: Host,
  dataPath: string,
  maxLength: number,
  tokenizer?: TokenizerOnHost,
): Promise<OfflineTokenEstimate> {
  const words: number[] = [];
  // every stride-th row, the stride doubling whenever the sample fills up: spread evenly over
  // the whole file in one streaming pass, and the same rows on every attempt
  let sample: { row: number; messages: ChatMessages }[] = [];
  let stride = 1;
  for await (const { text } of streamLines(host, dataPath)) {
    const parsed = parseSampleLine(text);
    const row = words.length;
    words.push(parsed.ok ? Math.max(1, estimateTokens(renderForExtraction(parsed.sample))) : 1);
    if (!parsed.ok || !tokenizer) continue;
    if (row % stride !== 0) continue;
    sample.push({ row, messages: parsed.sample.turns.map((t) => ({ role: t.role, content: t.content })) });
    if (sample.length > SAMPLE) {
      stride *= 2;
      sample = sample.filter((s) => s.row % stride === 0);
    }
  }
  const capped = (ratio: number) => words.map((w) => rowTokens(w, ratio, maxLength));
  if (!tokenizer || sample.length === 0) return { tokens: capped(1), how: 'whitespace words as tokens' };
  try {
    const r = await countTokensOnHost(host, tokenizer.python, {
      modelPath: tokenizer.modelPath,
      chatTemplate: tokenizer.chatTemplate,
      maxLength,
      trustRemoteCode: tokenizer.trustRemoteCode,
      conversations: sample.map((s) => s.messages),
    });
    const ratio = tokensPerWord(
      sample.map((s) => words[s.row]!),
      r.counts,
      maxLength,
    );
    const by =
      r.method === 'specforge'
        ? "SpecForge's own preprocessing"
        : "the tokenizer's chat template (SpecForge not importable there: no default system prompt, an underestimate)";
    return {
      tokens: capped(ratio),
      how: `${ratio.toFixed(2)} tokens/word, measured on ${sample.length} rows with the target's tokenizer through ${by}`,
    };
  } catch (err) {
    return {
      tokens: capped(1),
      how: `whitespace words as tokens (tokenizing on ${host.name} failed: ${(err as Error).message.slice(0, 200)})`,
    };
  }
}

/**
 * Bytes the rows still to write need, padding included. Which rows the files already written
 * hold is unknown (SpecForge shuffles), so the rows left are taken to be the longest ones.
 */
export function offlineBytesNeeded(
  tokens: number[],
  rowsLeft: number,
  batchSize: number,
  hiddenSize: number,
): { tokens: number; bytes: number } {
  const left = [...tokens].sort((a, b) => b - a).slice(0, Math.max(0, rowsLeft));
  const padded = paddedTokenBound(left, batchSize);
  return { tokens: padded, bytes: padded * featureBytesPerToken(hiddenSize) };
}
