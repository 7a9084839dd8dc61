/**
 * Incident 3: an EAGLE-3 drafter served with --speculative-algorithm EAGLE starts, runs and
 * accepts nothing (accept length exactly 1.00), because only EAGLE3 makes the target capture
 * the auxiliary hidden states the drafter's fc layer expects. The drafter's config.json says
 * which kind it is, so the combination is refused before a 10-minute load.
 */

/** EAGLE-3 drafters: SGLang/SpecForge `LlamaForCausalLMEagle3`, speculators-style `Eagle3LlamaForCausalLM`. */
export function isEagle3Architecture(name: string): boolean {
  return /eagle3/i.test(name);
}

/** The architectures list of a draft config.json (parsed, or its text), or undefined when it has none. */
export function draftArchitectures(draftConfig: unknown): string[] | undefined {
  let config = draftConfig;
  if (typeof config === 'string') {
    try {
      config = JSON.parse(config);
    } catch {
      return undefined;
    }
  }
  if (config === null || typeof config !== 'object' || Array.isArray(config)) return undefined;
  const archs = (config as Record<string, unknown>).architectures;
  if (!Array.isArray(archs) || archs.length === 0 || !archs.every((a) => typeof a === 'string')) return undefined;
  return archs as string[];
}

/**
 * null when the algorithm can serve this drafter, else why not and what to change.
 * Algorithms aerie does not know (newer SGLang versions add some) are not judged.
 */
export function checkDrafterCompat(algorithm: string, draftConfig: unknown): string | null {
  const algo = algorithm.trim().toUpperCase();
  const archs = draftArchitectures(draftConfig);
  const eagle3 = archs?.filter(isEagle3Architecture) ?? [];

  if (algo === 'EAGLE3') {
    if (archs === undefined) {
      return (
        'the draft model config.json has no "architectures" list, so it cannot be confirmed to be an EAGLE-3 drafter; ' +
        'an EAGLE-3 drafter says "architectures": ["LlamaForCausalLMEagle3"]'
      );
    }
    if (eagle3.length === 0) {
      return (
        `--speculative-algorithm EAGLE3 needs an EAGLE-3 drafter, but the draft config.json has architectures ` +
        `${JSON.stringify(archs)}. Serve an EAGLE-3 drafter (architectures ["LlamaForCausalLMEagle3"]), ` +
        `or use the algorithm this drafter was built for (EAGLE for an EAGLE/EAGLE-2 drafter, STANDALONE for an ordinary small model)`
      );
    }
    return null;
  }

  if ((algo === 'EAGLE' || algo === 'NEXTN' || algo === 'STANDALONE') && eagle3.length > 0) {
    return (
      `--speculative-algorithm ${algo} cannot serve an EAGLE-3 drafter (${eagle3.join(', ')}): only EAGLE3 makes the target ` +
      `capture the auxiliary hidden states the drafter's fc layer takes, so SGLang would start, bypass the drafter and ` +
      `accept nothing (accept length 1.00). Fix: use --speculative-algorithm EAGLE3`
    );
  }
  return null;
}
