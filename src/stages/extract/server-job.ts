/**
 * What a server-driven extraction (patched-server or stock-server) is given and reports: the
 * job, its progress, and the stock server's address on the host. Types only, so the drivers
 * and the stock producer share them without importing each other.
 */
import type { Host } from '../../hosts/host.js';
import type { AeriePy } from '../common/index.js';

export interface StockServer {
  /** The server's address and port as the host reaches it (server.listen-host, server.port). */
  address: string;
  port: number;
  /** Samples per client run (default 64) and requests it keeps in flight. */
  batch?: number;
  concurrency: number;
}

export interface ExtractProgress {
  phase: 'tokenizing' | 'checking files' | 'extracting' | 'self-check';
  done: number;
  total: number;
  ok: number;
  errors: number;
  /** Finished in an earlier run and re-verified. */
  resumed: number;
  bytes: number;
  /** Samples finished per second in this run. */
  rate: number;
}

export interface ExtractJob {
  host: Host;
  baseUrl: string;
  py: AeriePy;
  samplesPath: string;
  /** The run's own dump folder (AERIE_HS_DUMP_DIR of its server). */
  dumpDir: string;
  outDir: string;
  modelPath: string;
  hiddenSize: number;
  chatTemplate: string;
  maxLength: number;
  fileGroupSize: number;
  crossCheck: 'auto' | 'require' | 'off';
  trustRemoteCode: boolean;
  concurrency: number;
  selfCheck: { samples: number; finalSamples: number; minAgreement: number };
  /** Extra attempts per sample after a bad capture or a failed request (default 2). */
  retries?: number;
  /** How long the capture's file may lag the answer (default 60 s). */
  dumpWaitMs?: number;
  requestTimeoutMs?: number;
  convertBatch?: number;
  convertLingerMs?: number;
  /**
   * Stock SGLang's final pass instead of the capture plugin: aerie's client on the host asks
   * the server for the final states of each batch and completes the dumps the aux pass began
   * (stock-server.ts). The aux pass (runStockAux) must have run.
   */
  stock?: StockServer & { captureIds: number[] };
  signal?: AbortSignal;
  onProgress?: (p: ExtractProgress) => void;
}
