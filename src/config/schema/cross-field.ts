/**
 * Checks that span fields. They run on the raw (unvalidated) document so they are reported
 * together with every field error, not only once the rest of the file is fixed.
 */
import { poolProblems } from './pool-problems.js';

export function crossFieldProblems(raw: unknown): { path: string[]; message: string }[] {
  const out: { path: string[]; message: string }[] = [];
  const doc = (raw ?? {}) as Record<string, any>;
  const hosts = doc.hosts && typeof doc.hosts === 'object' ? (doc.hosts as Record<string, any>) : {};
  const targetHost = doc.target?.host;
  if (typeof targetHost === 'string' && !(targetHost in hosts)) {
    out.push({
      path: ['target', 'host'],
      message: `names no host: "${targetHost}" is not one of hosts (${Object.keys(hosts).join(', ') || 'none defined'})`,
    });
  }
  for (const [name, h] of Object.entries(hosts)) {
    if (typeof h?.workdir === 'string' && !h.workdir.startsWith('/')) {
      const onHost = h.kind === 'ssh' ? ' on the host (~ and relative paths are not expanded there)' : '';
      out.push({ path: ['hosts', name, 'workdir'], message: `must be an absolute path${onHost}, got "${h.workdir}"` });
    }
    // Each argv word is its own element; "pct exec 129 --" as one string would be one program name.
    const prefix = h?.['exec-prefix'];
    if (Array.isArray(prefix)) {
      prefix.forEach((word: unknown, i: number) => {
        if (typeof word === 'string' && /\s/.test(word.trim())) {
          out.push({
            path: ['hosts', name, 'exec-prefix', String(i)],
            message: `"${word}" holds several words; give each its own element, e.g. [${word
              .trim()
              .split(/\s+/)
              .map((w) => JSON.stringify(w))
              .join(', ')}]`,
          });
        }
      });
    }
  }
  // A forward to a container's address reaches nothing while the server listens on loopback.
  const target = typeof targetHost === 'string' ? hosts[targetHost] : undefined;
  const httpAddress = target?.['http-address'];
  const listenHost = doc.server?.['listen-host'] ?? '127.0.0.1';
  const loopback = (a: unknown) => a === '127.0.0.1' || a === 'localhost' || a === '::1';
  if (typeof httpAddress === 'string' && !loopback(httpAddress) && loopback(listenHost)) {
    out.push({
      path: ['server', 'listen-host'],
      message: `is ${listenHost}, but hosts.${targetHost}.http-address forwards to ${httpAddress}: the server would not listen where aerie connects. Set server.listen-host to ${httpAddress} (or 0.0.0.0)`,
    });
  }
  // One source for the GPU set: a stage env naming other devices would silently win.
  if (Array.isArray(target?.gpus)) {
    const envs: [string[], unknown][] = [
      [['server', 'env'], doc.server?.env],
      [['stages', 'extract', 'env'], doc.stages?.extract?.env],
      [['stages', 'train', 'env'], doc.stages?.train?.env],
    ];
    for (const [path, env] of envs) {
      if (env && typeof env === 'object' && 'CUDA_VISIBLE_DEVICES' in env) {
        out.push({
          path: [...path, 'CUDA_VISIBLE_DEVICES'],
          message: `conflicts with hosts.${targetHost}.gpus, which sets CUDA_VISIBLE_DEVICES for every launch; remove one of them`,
        });
      }
    }
  }
  // D1 (SpecForge@a6b6b023:specforge/config/schema.py:706-710: online CLI training needs the
  // disaggregated deployment) cannot arise: both extract drivers write SpecForge's offline layout.
  // The train stage always produces an EAGLE-3 drafter; serving it with EAGLE starts fine
  // and accepts nothing (incident 3), so the combination is refused before any launch.
  const deploy = doc.stages?.deploy ?? {};
  if (
    deploy['speculative-algorithm'] === 'EAGLE' &&
    !deploy['draft-model-path'] &&
    deploy['allow-algorithm-mismatch'] !== true
  ) {
    out.push({
      path: ['stages', 'deploy', 'speculative-algorithm'],
      message:
        'EAGLE cannot serve the EAGLE-3 drafter (LlamaForCausalLMEagle3) that the train stage produces: ' +
        'SGLang would start, bypass the drafter and accept nothing (accept length 1.00). Fix: set speculative-algorithm: EAGLE3',
    });
  }
  out.push(...poolProblems(doc, hosts));
  out.push(...engineProblems(doc));
  return out;
}

/**
 * What the vLLM engine cannot do that the rest of the config asks of it. aerie's capture rides
 * in an SGLang server and stock SGLang returns hidden states over HTTP; vLLM 0.32's own
 * extract_hidden_states needs CUDA (shared/reference/vllm.md), so a vLLM target's states come
 * from transformers on the host (or SpecForge's own script). SGLang's native /generate and its
 * bench_serving are SGLang's.
 */
function engineProblems(doc: Record<string, any>): { path: string[]; message: string }[] {
  if (doc.server?.engine !== 'vllm') return [];
  const out: { path: string[]; message: string }[] = [];
  const driver = doc.stages?.extract?.driver;
  if (driver === 'patched-server' || driver === 'stock-server')
    out.push({
      path: ['stages', 'extract', 'driver'],
      message: `${driver} reads hidden states from an SGLang server, and server.engine is vllm. Use driver: transformers (the target run by transformers on the host, for targets that fit it) or specforge-offline`,
    });
  const algo = doc.stages?.deploy?.['speculative-algorithm'];
  if (typeof algo === 'string' && algo !== 'EAGLE3' && algo !== 'EAGLE')
    out.push({
      path: ['stages', 'deploy', 'speculative-algorithm'],
      message: `${algo} is not served through aerie's vLLM engine; use EAGLE3 (vLLM's method eagle3)`,
    });
  const b = doc.stages?.benchmark ?? {};
  if (b.api === 'generate')
    out.push({
      path: ['stages', 'benchmark', 'api'],
      message: "generate is SGLang's native /generate; with server.engine vllm use api: chat",
    });
  if (b.driver === 'bench-serving')
    out.push({
      path: ['stages', 'benchmark', 'driver'],
      message: "bench-serving is SGLang's bench_serving; with server.engine vllm use driver: aerie or vllm-bench",
    });
  if (doc.server?.['sglang-version'] !== undefined && doc.server['sglang-version'] !== 'auto')
    out.push({
      path: ['server', 'sglang-version'],
      message:
        'is an SGLang setting and server.engine is vllm: remove it (the vLLM release is read from the ready server)',
    });
  return out;
}
