/**
 * Which SpecForge revision a host has, from what preflight read there: pure functions over
 * probe output and source text, so every rule is golden-testable without a host. Preflight
 * (activities/preflight.ts) runs the probes; this file only judges them.
 *
 * Evidence, strongest first:
 *   - the current CLI: `specforge` importable by the launcher's interpreter, its package
 *     version (importlib.metadata), and specforge/cli.py + specforge/config/schema.py present;
 *     the server-only runtime is told apart from the July pre-release by its schema's rule.
 *   - the v0.2 scripts: the train_eagle3.py the launcher names, by the fixes in its source
 *     (version.txt says 0.2.0 at every v0.2 revision, so only the source tells them apart),
 *     and `git rev-parse HEAD` of its checkout, when it is one.
 */
import {
  SPECFORGE_PROFILES,
  type SpecforgeDriver,
  type SpecforgeProfileId,
  type SpecforgeRevisionPin,
} from './specforge-revision.js';

/**
 * Run as `<python> -c CLI_PROBE`: one JSON line. It imports only the `specforge` package
 * itself (an empty __init__ at a6b6b023), never its submodules, so a host without the
 * training dependencies still answers.
 */
export const CLI_PROBE = [
  'import importlib.metadata as m, importlib.util as u, json, os, sys',
  'out = {"python": sys.version.split()[0]}',
  'try:',
  '    out["version"] = m.version("specforge")',
  'except Exception:',
  '    out["version"] = None',
  'try:',
  '    s = u.find_spec("specforge")',
  'except Exception as e:',
  '    s = None; out["error"] = repr(e)',
  'root = os.path.dirname(s.origin) if s is not None and s.origin else None',
  'out["package"] = root',
  'for k, rel in (("cli", "cli.py"), ("schema", os.path.join("config", "schema.py"))):',
  '    p = os.path.join(root, rel) if root else None',
  '    out[k] = p if p and os.path.isfile(p) else None',
  'print(json.dumps(out))',
].join('\n');

export interface CliProbe {
  python?: string;
  /** importlib.metadata's version of the installed distribution; null for a source tree on PYTHONPATH. */
  version: string | null;
  /** The specforge package directory, null when it cannot be imported. */
  package: string | null;
  cli: string | null;
  schema: string | null;
  error?: string;
}

/** The probe's JSON line (the last line that parses: site hooks may print before it). */
export function parseCliProbe(stdout: string): CliProbe | undefined {
  for (const line of stdout.trim().split('\n').reverse()) {
    try {
      const v = JSON.parse(line) as Partial<CliProbe>;
      if (v && typeof v === 'object' && 'package' in v) {
        return {
          python: v.python,
          version: v.version ?? null,
          package: v.package ?? null,
          cli: v.cli ?? null,
          schema: v.schema ?? null,
          error: v.error,
        };
      }
    } catch {
      // not the probe's line
    }
  }
  return undefined;
}

export interface CliSchemaFeatures {
  /** SpecForge@a6b6b023:specforge/config/schema.py:706-710, from 7d1fbf08 (2026-07-14): the server-only runtime. */
  serverOnly: boolean;
  /** SpecForge@a6b6b023:specforge/config/schema.py:54 `target_backend: Literal["sglang"]`, from 97d7880d (2026-07-15). */
  sglangOnlyBackend: boolean;
}

export function cliSchemaFeatures(schemaSource: string): CliSchemaFeatures {
  return {
    serverOnly: schemaSource.includes('online training requires deployment.mode=disaggregated'),
    sglangOnlyBackend: /target_backend:\s*Literal\[\s*["']sglang["']\s*\]/.test(schemaSource),
  };
}

export interface ScriptFeatures {
  /** It is a v0.2 train_eagle3.py at all (its data flags; SpecForge@73e6f808:scripts/train_eagle3.py:96-97). */
  isTrainEagle3: boolean;
  /** SpecForge@03a3dedb:scripts/train_eagle3.py:865-870: a final checkpoint when training ends. */
  finalSave: boolean;
  /** SpecForge@961ca7c3:scripts/train_eagle3.py:401,819-820: --resume restores epoch and step from the checkpoint. */
  resumeWorks: boolean;
}

export function trainScriptFeatures(source: string): ScriptFeatures {
  return {
    isTrainEagle3: source.includes('--train-hidden-states-path') || source.includes('--train-data-path'),
    finalSave: source.includes('saving final checkpoint'),
    resumeWorks: /ckpt_info\s*=\s*get_last_checkpoint\(/.test(source),
  };
}

/** Which aux-state flag a prepare_hidden_states.py defines (none between 7d1fbf08 and ca949555). */
export function prepareAuxFlagIn(source: string): '--enable-aux-hidden-states' | '--draft-model-config' | null {
  // SpecForge@a6b6b023:scripts/prepare_hidden_states.py:111; SpecForge@20e2e3f0:scripts/prepare_hidden_states.py:92
  if (/["']--draft-model-config["']/.test(source)) return '--draft-model-config';
  if (/["']--enable-aux-hidden-states["']/.test(source)) return '--enable-aux-hidden-states';
  return null;
}

/** Commits aerie knows by hash: a checkout at one of them names its profile outright. */
export const KNOWN_COMMITS: Record<string, SpecforgeProfileId> = {
  '73e6f80896d8ac76473646acad2fb5df301312f8': 'v0.2.0',
  '03a3dedbd66319a1b728e9d2bc3b3d39b2b7714a': 'v0.2-final-save',
  '961ca7c3bb9d1d0a7aaf44db35e76e1f227a7be0': 'v0.2-resume',
  '20e2e3f0563f65746566e6da6202cdd3b77e16bc': 'v0.2-resume',
  a6b6b0230009d15ec2a97a57384e6f53f0f96946: 'cli',
};

/** `git rev-parse HEAD` output → the commit, or undefined when it is not a checkout. */
export function parseRevParse(code: number | null, stdout: string): string | undefined {
  const s = stdout.trim();
  return code === 0 && /^[0-9a-f]{40}$/.test(s) ? s : undefined;
}

export interface Detection {
  /** The profile the evidence names; undefined when it names none aerie supports. */
  profile?: SpecforgeProfileId;
  /** One line: what was read and what it showed. */
  evidence: string;
  /** Why the host's SpecForge cannot be driven (unsupported revision, not a SpecForge at all). */
  problem?: string;
  commit?: string;
}

const short = (c: string | undefined) => (c ? ` at ${c.slice(0, 8)}` : '');

export function detectFromScript(scriptPath: string, source: string, commit?: string): Detection {
  const f = trainScriptFeatures(source);
  const known = commit ? KNOWN_COMMITS[commit] : undefined;
  if (!f.isTrainEagle3) {
    return {
      evidence: `${scriptPath}${short(commit)} is not SpecForge's train_eagle3.py (no --train-data-path flag)`,
      problem: `${scriptPath} is not SpecForge's scripts/train_eagle3.py`,
      commit,
    };
  }
  // A patched script with the resume fix but without the final save matches no published revision.
  const profile: SpecforgeProfileId | undefined = f.resumeWorks
    ? f.finalSave
      ? 'v0.2-resume'
      : undefined
    : f.finalSave
      ? 'v0.2-final-save'
      : 'v0.2.0';
  const seen = `${f.finalSave ? 'final save' : 'no final save'}, ${f.resumeWorks ? '--resume fix' : 'no --resume fix'}`;
  if (!profile) {
    return {
      evidence: `${scriptPath}${short(commit)}: ${seen}`,
      problem: `${scriptPath} has the --resume fix (961ca7c3) but not the final save (03a3dedb): no published SpecForge revision looks like that`,
      commit,
    };
  }
  if (known && known !== profile) {
    return {
      evidence: `${scriptPath}${short(commit)}: ${seen}`,
      problem: `${scriptPath} is at ${commit!.slice(0, 8)} (${known}) but its source reads as ${profile}: a locally modified checkout`,
      commit,
    };
  }
  return { profile, evidence: `${scriptPath}${short(commit)}: ${seen} → ${profile}`, commit };
}

export function detectFromCli(
  probe: CliProbe | undefined,
  schemaSource: string | undefined,
  interpreter: string,
  commit?: string,
): Detection {
  if (!probe)
    return {
      evidence: `${interpreter} did not answer the SpecForge probe`,
      problem: `${interpreter} could not run the SpecForge probe`,
    };
  if (!probe.package) {
    return {
      evidence: `${interpreter} cannot import specforge${probe.error ? ` (${probe.error})` : ''}`,
      problem: `${interpreter} cannot import specforge`,
    };
  }
  const version = probe.version ? `specforge ${probe.version}` : 'specforge from a source tree (no package metadata)';
  const where = `${version} in ${probe.package}${short(commit)}`;
  if (!probe.cli || !probe.schema) {
    return {
      evidence: `${where}: no specforge/cli.py`,
      problem: `${where} has no specforge CLI (the v0.2 scripts era): use driver specforge-v0.2, or install PyPI specforge==0.2.0`,
    };
  }
  const f = schemaSource === undefined ? undefined : cliSchemaFeatures(schemaSource);
  if (!f?.serverOnly) {
    return {
      evidence: `${where}: CLI without the server-only runtime`,
      problem: `${where} is a pre-release specforge CLI (86c7d765…7d1fbf08^, July 2026) that aerie does not drive: install PyPI specforge==0.2.0 (a6b6b023)`,
      commit,
    };
  }
  return {
    profile: 'cli',
    evidence: `${where}: CLI, server-only runtime${f.sglangOnlyBackend ? ', target_backend sglang only' : ''} → cli`,
    commit,
  };
}

export interface Resolved {
  /** The profile the drivers use; undefined when none can be chosen. */
  profile?: SpecforgeProfileId;
  checks: string[];
  problems: string[];
}

const FIELD = 'stages.train.specforge-revision';

/**
 * The pin against the host. A pin the host contradicts is a problem (the drivers would
 * render flags that revision does not have); an unprobed host trusts the pin, and `auto`
 * without evidence takes the reading that is safe for the driver.
 */
export function resolveRevision(
  driver: SpecforgeDriver,
  pin: SpecforgeRevisionPin,
  detected: Detection | undefined,
): Resolved {
  const out: Resolved = { checks: [], problems: [] };
  // Unprobed: the CLI driver drives one revision; for the scripts v0.2.0 is the safe reading
  // (aerie's own continuation and no final save hold on every v0.2 revision).
  const fallback: SpecforgeProfileId = driver === 'specforge' ? 'cli' : 'v0.2.0';
  if (detected?.problem) {
    out.problems.push(`stages.train.launcher: ${detected.problem}. Evidence: ${detected.evidence}`);
    return out;
  }
  const found = detected?.profile;
  if (found && SPECFORGE_PROFILES[found].driver !== driver) {
    out.problems.push(
      `stages.train.driver: the host has ${SPECFORGE_PROFILES[found].label} (${detected!.evidence}), which driver ${driver} does not speak. Fix: set stages.train.driver: ${SPECFORGE_PROFILES[found].driver}`,
    );
    return out;
  }
  if (pin === 'auto') {
    out.profile = found ?? fallback;
    if (found) out.checks.push(`SpecForge revision ${found} detected: ${detected!.evidence}`);
    else
      out.checks.push(
        `SpecForge revision not probed (${detected?.evidence ?? 'the launcher is not a Python program'}): assuming ${fallback}; pin ${FIELD} to say otherwise`,
      );
    return out;
  }
  out.profile = pin;
  if (!found)
    out.checks.push(
      `SpecForge revision ${pin} pinned by ${FIELD}; not verified on the host (${detected?.evidence ?? 'launcher is not a Python program'})`,
    );
  else if (found === pin) out.checks.push(`SpecForge revision ${pin} pinned and confirmed: ${detected!.evidence}`);
  else {
    out.profile = undefined;
    out.problems.push(
      `${FIELD}: pinned to ${pin}, but the host has ${found} (${detected!.evidence}). Fix: set ${FIELD}: ${found} (or auto), or point stages.train.launcher at a ${pin} install`,
    );
  }
  return out;
}
