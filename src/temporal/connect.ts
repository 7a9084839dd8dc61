/**
 * Where Temporal is: TEMPORAL_ADDRESS / an envconfig profile when one is set (the same
 * conventions as the `temporal` CLI), otherwise aerie's own local dev server, started on
 * first use. Search attributes are registered on every server aerie talks to.
 */
import { Client, Connection } from '@temporalio/client';
import { loadClientConnectConfig, loadClientConfigProfile } from '@temporalio/envconfig';
import { NativeConnection } from '@temporalio/worker';
import proto from '@temporalio/proto';
import { SEARCH_ATTRIBUTES } from '../shared.js';
import { ensureDevServer, type DevServerRecord } from './dev-server.js';

export interface TemporalTarget {
  address: string;
  namespace: string;
  /** Present when aerie runs the server itself (the Web UI lives there). */
  devServer?: DevServerRecord;
  connectionOptions: Record<string, unknown>;
}

export async function resolveTemporal(opts: { stateDir?: string } = {}): Promise<TemporalTarget> {
  let profile: ReturnType<typeof loadClientConfigProfile> = {};
  try {
    profile = loadClientConfigProfile();
  } catch {
    // No config file and nothing in the environment: the local dev server it is.
  }
  if (profile.address) {
    const cfg = loadClientConnectConfig();
    return {
      address: profile.address,
      namespace: cfg.namespace ?? 'default',
      connectionOptions: cfg.connectionOptions as Record<string, unknown>,
    };
  }
  const devServer = await ensureDevServer({ dir: opts.stateDir });
  return {
    address: devServer.address,
    namespace: 'default',
    devServer,
    connectionOptions: { address: devServer.address },
  };
}

export function webUiUrl(target: TemporalTarget, workflowId?: string): string | undefined {
  if (!target.devServer) return undefined;
  const base = `http://127.0.0.1:${target.devServer.uiPort}/namespaces/${target.namespace}`;
  return workflowId ? `${base}/workflows/${encodeURIComponent(workflowId)}` : `${base}/workflows`;
}

export async function connectClient(target: TemporalTarget): Promise<Client> {
  const connection = await Connection.connect(target.connectionOptions as Parameters<typeof Connection.connect>[0]);
  await ensureSearchAttributes(connection, target.namespace);
  return new Client({ connection, namespace: target.namespace });
}

export async function connectWorker(target: TemporalTarget): Promise<NativeConnection> {
  return NativeConnection.connect(target.connectionOptions as Parameters<typeof NativeConnection.connect>[0]);
}

/**
 * A persisted dev-server DB keeps its namespace, so --search-attribute on a later start is
 * ignored: register what is missing through the operator API instead.
 */
export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<void> {
  const want = Object.entries(SEARCH_ATTRIBUTES);
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const have = new Set(Object.keys(existing.customAttributes ?? {}));
  const missing = want.filter(([name]) => !have.has(name));
  if (missing.length === 0) return;
  const type = proto.temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(missing.map(([name]) => [name, type])),
  });
}
