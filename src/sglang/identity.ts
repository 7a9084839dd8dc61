/**
 * Is the server answering on our port the one we launched? (Incident 1: a leftover server
 * answered health checks while ours had died at once.) server_info carries the server args
 * the process was started with, so we compare them with what we launched.
 */

export interface ExpectedServer {
  modelPath: string;
  port: number;
  /** What we passed to --speculative-algorithm; undefined = launched without speculation. */
  speculativeAlgorithm?: string;
  /** What we passed to --speculative-draft-model-path; undefined = not passed. */
  draftModelPath?: string;
  tpSize?: number;
}

/** Paths are compared as written, except that a trailing slash does not make a different directory. */
function samePath(a: string, b: string): boolean {
  const norm = (p: string) => (p.length > 1 ? p.replace(/\/+$/, '') : p);
  return norm(a) === norm(b);
}

/** SGLang rewrites NEXTN to EAGLE while parsing its args, so server_info never says NEXTN. */
function normalizeAlgorithm(a: string): string {
  const up = a.trim().toUpperCase();
  return up === 'NEXTN' ? 'EAGLE' : up;
}

/** server_info reports "no speculation" as null (older: the field is absent entirely). */
function isNoAlgorithm(v: unknown): boolean {
  return (
    v === undefined || v === null || (typeof v === 'string' && (v.trim() === '' || v.trim().toUpperCase() === 'NONE'))
  );
}

function show(v: unknown): string {
  if (v === undefined) return '(absent)';
  if (v === null) return 'null';
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function sameNumber(v: unknown, n: number): boolean {
  return (typeof v === 'number' && v === n) || (typeof v === 'string' && v.trim() !== '' && Number(v) === n);
}

/**
 * Every way server_info disagrees with what we launched, in plain words; empty = it is our
 * server. model_path and port have been in server_info in every version, so their absence
 * is a mismatch. The speculative fields are only required when we launched speculation:
 * a version too old to report them cannot be running it.
 */
export function checkServerIdentity(serverInfo: Record<string, unknown>, expected: ExpectedServer): string[] {
  const out: string[] = [];

  const modelPath = serverInfo.model_path;
  if (typeof modelPath !== 'string') {
    out.push(
      `server_info has no model_path (${show(modelPath)}): cannot tell that it is the server we launched with ${expected.modelPath}`,
    );
  } else if (!samePath(modelPath, expected.modelPath)) {
    out.push(`server_info says model_path=${modelPath}, we launched ${expected.modelPath}`);
  }

  if (serverInfo.port === undefined || serverInfo.port === null) {
    out.push(`server_info has no port: cannot tell that it is the server we launched on port ${expected.port}`);
  } else if (!sameNumber(serverInfo.port, expected.port)) {
    out.push(`server_info says port=${show(serverInfo.port)}, we launched ${expected.port}`);
  }

  if (expected.tpSize !== undefined && !sameNumber(serverInfo.tp_size, expected.tpSize)) {
    out.push(`server_info says tp_size=${show(serverInfo.tp_size)}, we launched ${expected.tpSize}`);
  }

  const algorithm = serverInfo.speculative_algorithm;
  if (expected.speculativeAlgorithm === undefined) {
    if (!isNoAlgorithm(algorithm)) {
      out.push(`server_info says speculative_algorithm=${show(algorithm)}, we launched without speculative decoding`);
    }
  } else if (isNoAlgorithm(algorithm)) {
    out.push(`server_info says speculative_algorithm=${show(algorithm)}, we launched ${expected.speculativeAlgorithm}`);
  } else if (
    typeof algorithm !== 'string' ||
    normalizeAlgorithm(algorithm) !== normalizeAlgorithm(expected.speculativeAlgorithm)
  ) {
    out.push(`server_info says speculative_algorithm=${show(algorithm)}, we launched ${expected.speculativeAlgorithm}`);
  }

  // Without an explicit draft path SGLang may fill in one itself (MTP models use the target's
  // own path), so only a path we passed is checked.
  if (expected.draftModelPath !== undefined) {
    const draft = serverInfo.speculative_draft_model_path;
    if (typeof draft !== 'string' || !samePath(draft, expected.draftModelPath)) {
      out.push(`server_info says speculative_draft_model_path=${show(draft)}, we launched ${expected.draftModelPath}`);
    }
  }
  return out;
}
