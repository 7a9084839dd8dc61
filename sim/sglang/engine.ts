/**
 * The scheduler: one loop that either prefills newly admitted requests or advances every
 * running request by one decode step (one verify when speculative), paying the latency
 * model's cost for each. Batches are real: step time grows with the running batch, and
 * --max-running-requests caps it while the rest queue — which is how incident 7 shows up.
 */
import { setImmediate as yieldLoop, setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import {
  type LatencyParams,
  H100_8B,
  type SpecShape,
  chainAcceptProbability,
  decodeStepMs,
  drawAcceptLength,
  prefillMs,
} from './latency.js';
import type { SimLog } from './log.js';
import type { AcceptPlan } from './model.js';
import { PrefixCache } from './radix.js';
import type { SamplingParams } from './sampling.js';
import type { SimLM } from './lm.js';
import { hash32, makeRng, naturalLength } from './text.js';

export type FinishReason =
  { type: 'stop'; matched: number | string } | { type: 'length'; length: number } | { type: 'abort'; message: string };

export type RequestKind = 'real' | 'warmup' | 'health';

export interface GenRequest {
  rid: string;
  /** Seeds the words, the natural length and the accept draws. */
  key: string;
  promptTokens: number;
  /** The prompt's token ids as strings: what the prefix cache matches on, so cached_tokens counts in the same ids as prompt_tokens. */
  promptUnits: string[];
  params: SamplingParams & { max_new_tokens: number };
  kind: RequestKind;
  /** The prompt's ids as the model sees them (at least the last two); none = a BOS-only context. */
  context?: number[];
  /** First word without its leading space (text and chat prompts); false for input_ids prompts. */
  bareFirst?: boolean;
  onPrefill?: (r: ReqState) => void;
  onProgress?: (r: ReqState) => void;
}

export class ReqState {
  outputIds: number[] = [];
  words: string[] = [];
  cachedTokens = 0;
  finishReason: FinishReason | null = null;
  verifyCt = 0;
  acceptedDrafts = 0;
  proposedDrafts = 0;
  /** [k] = verify steps that accepted k drafts (SGLang's meta_info histogram, profile.ts specMeta). */
  acceptHistogram: number[] = [];
  readonly createdAt = performance.now();
  finishedAt = 0;
  readonly done: Promise<void>;
  resolveDone!: () => void;
  readonly nextToken: () => number;
  readonly naturalLen: number;
  readonly acceptRand: () => number;

  constructor(
    readonly req: GenRequest,
    readonly lm: SimLM,
  ) {
    this.done = new Promise((r) => (this.resolveDone = r));
    this.nextToken = lm.stream(req.context ?? [], req.params.temperature, req.key, req.bareFirst ?? true);
    this.naturalLen = req.params.ignore_eos ? Infinity : naturalLength(req.key);
    this.acceptRand = makeRng(hash32('acc:' + req.key));
  }

  get text(): string {
    return this.words.join(' ');
  }

  get e2eLatency(): number {
    return ((this.finishedAt || performance.now()) - this.createdAt) / 1000;
  }
}

export interface EngineOptions {
  log: SimLog;
  lm: SimLM;
  spec: SpecShape | null;
  accept: AcceptPlan | null;
  maxRunning: number;
  maxPrefillTokens: number;
  maxTotalTokens: number;
  cudaGraphMaxBs: number;
  disableCudaGraph: boolean;
  disableRadixCache: boolean;
  decodeLogInterval: number;
  decodeScale: number;
  /** Multiplies prefill steps; defaults to decodeScale. */
  prefillScale?: number;
  eosTokenId: number;
  latency?: LatencyParams;
  /** Called before a decode step that carries a real request; return true to halt the scheduler. */
  beforeRealDecode?: () => boolean;
}

export class Engine {
  private waiting: ReqState[] = [];
  private running: ReqState[] = [];
  private wakeUp: (() => void) | null = null;
  private started = false;
  private halted = false;
  private readonly cache: PrefixCache;
  private readonly q: number;
  private decodeSteps = 0;
  private window = { tokens: 0, verifies: 0, accepted: 0, proposed: 0, generated: 0, since: performance.now() };
  private cum = { tokens: 0, verifies: 0 };
  /** performance.now() of the last step that produced output (health probes look at it). */
  lastOutputAt = 0;
  lastGenThroughput = 0;

  constructor(private readonly o: EngineOptions) {
    this.cache = new PrefixCache(o.maxTotalTokens);
    this.q = o.accept ? chainAcceptProbability(o.accept.mean, o.accept.cap) : 0;
  }

  get numRunning(): number {
    return this.running.length;
  }

  get numWaiting(): number {
    return this.waiting.length;
  }

  /** Running average accept length since start or the last flush; null before the first decode log. */
  get avgSpecAcceptLength(): number | null {
    return this.o.spec && this.cum.verifies > 0 ? this.cum.tokens / this.cum.verifies : null;
  }

  /** Whether a request with this rid is waiting or running (the tokenizer manager's rid_to_state). */
  hasRid(rid: string): boolean {
    return this.waiting.some((r) => r.req.rid === rid) || this.running.some((r) => r.req.rid === rid);
  }

  submit(req: GenRequest): ReqState {
    const r = new ReqState(req, this.o.lm);
    this.waiting.push(r);
    this.wake();
    return r;
  }

  abort(r: ReqState, message = 'Abort request'): void {
    if (r.finishReason) return;
    this.waiting = this.waiting.filter((x) => x !== r);
    this.running = this.running.filter((x) => x !== r);
    this.finish(r, { type: 'abort', message });
  }

  /** SGLang refuses to flush while anything is running or waiting. */
  flush(): boolean {
    if (this.running.length > 0 || this.waiting.length > 0) {
      this.o.log.warning(
        `Cache not flushed because there are pending requests. #queue-req: ${this.waiting.length}, #running-req: ${this.running.length}`,
        0,
      );
      return false;
    }
    this.cache.clear();
    this.cum = { tokens: 0, verifies: 0 };
    this.o.log.info('Cache flushed successfully!', 0);
    return true;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.window.since = performance.now();
    void this.loop();
  }

  halt(): void {
    this.halted = true;
    this.wake();
  }

  private wake(): void {
    const w = this.wakeUp;
    this.wakeUp = null;
    w?.();
  }

  private async loop(): Promise<void> {
    const lat = this.o.latency ?? H100_8B;
    let clock = performance.now();
    while (!this.halted) {
      if (this.waiting.length === 0 && this.running.length === 0) {
        await new Promise<void>((r) => (this.wakeUp = r));
        clock = performance.now();
        continue;
      }
      let apply: () => void;
      let cost: number;
      if (this.waiting.length > 0 && this.running.length < this.o.maxRunning) {
        const batch = this.admit();
        cost =
          prefillMs(
            batch.reduce((s, r) => s + r.req.promptTokens - r.cachedTokens, 0),
            this.o.spec,
            lat,
          ) * (this.o.prefillScale ?? this.o.decodeScale);
        apply = () => this.applyPrefill(batch);
      } else {
        if (this.o.beforeRealDecode && this.running.some((r) => r.req.kind === 'real') && this.o.beforeRealDecode()) {
          this.halted = true;
          return;
        }
        cost = decodeStepMs(this.running.length, this.o.spec, this.cudaGraph(), lat) * this.o.decodeScale;
        apply = () => this.applyDecode();
      }
      clock += cost;
      const ahead = clock - performance.now();
      if (ahead >= 1) await sleep(ahead);
      else await yieldLoop();
      // Behind schedule (a busy machine): catch up a little, never in a burst.
      if (performance.now() - clock > 100) clock = performance.now();
      if (this.halted) return;
      apply();
    }
  }

  private cudaGraph(): boolean {
    return !this.o.disableCudaGraph && this.running.length <= this.o.cudaGraphMaxBs;
  }

  /** Take waiting requests into one prefill batch, as far as the running cap and prefill budget allow. */
  private admit(): ReqState[] {
    const batch: ReqState[] = [];
    let tokens = 0;
    while (this.waiting.length > 0 && this.running.length + batch.length < this.o.maxRunning) {
      const r = this.waiting[0];
      const cached = this.o.disableRadixCache
        ? 0
        : Math.min(this.cache.match(r.req.promptUnits), r.req.promptTokens - 1);
      const fresh = r.req.promptTokens - cached;
      if (batch.length > 0 && tokens + fresh > this.o.maxPrefillTokens) break;
      r.cachedTokens = Math.max(0, cached);
      tokens += fresh;
      batch.push(this.waiting.shift()!);
    }
    const cachedSum = batch.reduce((s, r) => s + r.cachedTokens, 0);
    this.o.log.info(
      `Prefill batch. #new-seq: ${batch.length}, #new-token: ${tokens}, #cached-token: ${cachedSum}, ` +
        `token usage: ${this.tokenUsage().toFixed(2)}, #running-req: ${this.running.length}, #queue-req: ${this.waiting.length}`,
      0,
    );
    return batch;
  }

  private applyPrefill(batch: ReqState[]): void {
    this.lastOutputAt = performance.now();
    for (const r of batch) {
      if (r.finishReason) continue; // aborted while its prefill ran
      r.req.onPrefill?.(r);
      if (r.req.params.max_new_tokens === 0) {
        this.finish(r, { type: 'length', length: 0 });
        continue;
      }
      this.produce(r);
      r.req.onProgress?.(r);
      if (r.finishReason) this.finish(r, r.finishReason);
      else this.running.push(r);
    }
  }

  private applyDecode(): void {
    this.lastOutputAt = performance.now();
    const accept = this.o.accept;
    const proposedPerVerify = this.o.spec ? Math.max(0, this.o.spec.numDraftTokens - 1) : 0;
    for (const r of this.running) {
      let made = 0;
      if (accept) {
        const len = drawAcceptLength(this.q, accept.cap, r.acceptRand);
        while (made < len && !r.finishReason) {
          this.produce(r);
          made++;
        }
        r.verifyCt++;
        r.acceptedDrafts += made - 1;
        r.acceptHistogram[made - 1] = (r.acceptHistogram[made - 1] ?? 0) + 1;
        r.proposedDrafts += proposedPerVerify;
        this.window.verifies++;
        this.window.tokens += made;
        this.window.accepted += made - 1;
        this.window.proposed += proposedPerVerify;
      } else {
        this.produce(r);
        made = 1;
      }
      this.window.generated += made;
      r.req.onProgress?.(r);
    }
    const done = this.running.filter((r) => r.finishReason);
    this.running = this.running.filter((r) => !r.finishReason);
    for (const r of done) this.finish(r, r.finishReason!);
    this.decodeSteps++;
    if (this.decodeSteps % Math.max(1, this.o.decodeLogInterval) === 0) this.logDecode();
  }

  /** One output token: EOS at the natural length, a stop match, or a word; then the length cap. */
  private produce(r: ReqState): void {
    const p = r.req.params;
    const position = r.outputIds.length + 1;
    const mayStop = position > p.min_new_tokens;
    if (mayStop && position >= r.naturalLen) {
      r.outputIds.push(this.o.eosTokenId);
      r.finishReason = { type: 'stop', matched: this.o.eosTokenId };
      return;
    }
    const id = r.nextToken();
    const word = r.lm.wordOf(id);
    r.outputIds.push(id);
    if (mayStop && p.stop_token_ids.includes(id)) {
      r.finishReason = { type: 'stop', matched: id };
    } else if (mayStop && p.stop.includes(word)) {
      if (p.no_stop_trim) r.words.push(word);
      r.finishReason = { type: 'stop', matched: word };
    } else {
      r.words.push(word);
    }
    if (!r.finishReason && r.outputIds.length >= p.max_new_tokens) {
      r.finishReason = { type: 'length', length: p.max_new_tokens };
    }
  }

  private finish(r: ReqState, reason: FinishReason): void {
    r.finishReason = reason;
    r.finishedAt = performance.now();
    // Prompt and output ids but the last output, whose KV is never computed
    // (sglang==0.5.4:srt/mem_cache/radix_cache.py:340,349 caches origin_input_ids + output_ids[:-1]).
    if (!this.o.disableRadixCache && reason.type !== 'abort')
      this.cache.insert([...r.req.promptUnits, ...r.outputIds.slice(0, -1).map(String)]);
    r.resolveDone();
  }

  private tokenUsage(): number {
    const used = this.running.reduce((s, r) => s + r.req.promptTokens + r.outputIds.length, 0);
    return used / this.o.maxTotalTokens;
  }

  private logDecode(): void {
    const now = performance.now();
    const gap = (now - this.window.since) / 1000;
    this.lastGenThroughput = gap > 0 ? this.window.generated / gap : 0;
    const numTokens = this.running.reduce((s, r) => s + r.req.promptTokens + r.outputIds.length, 0);
    let spec = '';
    if (this.o.spec && this.window.verifies > 0) {
      const len = this.window.tokens / this.window.verifies;
      const rate = this.window.proposed > 0 ? this.window.accepted / this.window.proposed : 0;
      spec = `accept len: ${len.toFixed(2)}, accept rate: ${rate.toFixed(2)}, `;
      // internal_states' running average moves only here, every decode_log_interval steps.
      this.cum.tokens += this.window.tokens;
      this.cum.verifies += this.window.verifies;
    }
    this.o.log.info(
      `Decode batch. #running-req: ${this.running.length}, #token: ${numTokens}, token usage: ${this.tokenUsage().toFixed(2)}, ` +
        `${spec}cuda graph: ${this.cudaGraph() ? 'True' : 'False'}, gen throughput (token/s): ${this.lastGenThroughput.toFixed(2)}, ` +
        `#queue-req: ${this.waiting.length}`,
      0,
    );
    this.window = { tokens: 0, verifies: 0, accepted: 0, proposed: 0, generated: 0, since: now };
  }
}
