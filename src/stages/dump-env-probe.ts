/**
 * Does the extraction server's SGLang read the dump variable at all? No SGLang release reads
 * `SGLANG_HS_DUMP_DIR` (0.5.1–0.5.23, conformance.md S1): the field run's server was patched
 * by hand, so a stock install served every extraction request and wrote no dump, and each
 * sample failed only after its prefill. The probe looks through the installed package's
 * Python source for the variable's name, through the server launcher's own interpreter, before
 * anything is launched.
 */
import type { Host } from '../hosts/host.js';

/** Run as `<python> -c DUMP_ENV_PROBE <VAR>`: one JSON line. Imports nothing of SGLang itself. */
export const DUMP_ENV_PROBE = String.raw`
import importlib.metadata as m, importlib.util as u, json, os, sys
needle = sys.argv[1].encode()
out = {"version": None, "package": None, "mentions": [], "files": 0}
try:
    out["version"] = m.version("sglang")
except Exception:
    pass
try:
    s = u.find_spec("sglang")
except Exception:
    s = None
root = os.path.dirname(s.origin) if s is not None and s.origin else None
out["package"] = root
if root:
    for d, _dirs, files in os.walk(root):
        for f in files:
            if not f.endswith(".py"):
                continue
            out["files"] += 1
            p = os.path.join(d, f)
            try:
                with open(p, "rb") as fh:
                    if needle in fh.read():
                        out["mentions"].append(os.path.relpath(p, root))
            except OSError:
                pass
print(json.dumps(out))
`;

export interface DumpEnvProbe {
  version: string | null;
  package: string | null;
  /** Package files (relative) whose source names the variable. */
  mentions: string[];
  files: number;
}

export function parseDumpEnvProbe(stdout: string): DumpEnvProbe | undefined {
  for (const line of stdout.trim().split('\n').reverse()) {
    try {
      const v = JSON.parse(line) as Partial<DumpEnvProbe>;
      if (v && typeof v === 'object' && Array.isArray(v.mentions)) {
        return { version: v.version ?? null, package: v.package ?? null, mentions: v.mentions, files: v.files ?? 0 };
      }
    } catch {
      // a site hook's output, not the probe's line
    }
  }
  return undefined;
}

/** The preflight verdict: a check line, or the problem with its fix. */
export function judgeDumpEnv(p: DumpEnvProbe | undefined, env: string, interpreter: string): { check?: string; problem?: string } {
  if (!p) return { check: `stages.extract.dump-env: could not probe ${interpreter} for ${env}` };
  if (!p.package) return {}; // no SGLang there at all: the server launcher's own check reports that
  const which = `sglang${p.version ? `==${p.version}` : ''} at ${p.package}`;
  if (p.mentions.length > 0) return { check: `stages.extract.dump-env: ${which} reads ${env} (${p.mentions.slice(0, 3).join(', ')})` };
  return {
    problem:
      `stages.extract.dump-env: the extraction server's SGLang (${which}, through ${interpreter}) never reads ${env} in any of its ${p.files} Python files: ` +
      `no SGLang release writes hidden-state dumps (conformance.md S1), so it would serve every extraction request and write nothing. ` +
      `Fix: launch a server patched to dump into ${env}, or set stages.extract.driver: specforge-offline (SpecForge's prepare_hidden_states.py)`,
  };
}

/** Probe the interpreter on the host (a minute at most: it reads the package's sources once). */
export async function probeDumpEnv(host: Host, interpreter: string, env: string): Promise<{ check?: string; problem?: string }> {
  const r = await host.exec([interpreter, '-c', DUMP_ENV_PROBE, env], { timeoutMs: 60_000 }).catch(() => null);
  return judgeDumpEnv(r && r.code === 0 ? parseDumpEnvProbe(r.stdout) : undefined, env, interpreter);
}
