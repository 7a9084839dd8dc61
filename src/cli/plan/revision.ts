/** The SpecForge revision the plan renders for, in one place: both the extract and the train steps depend on it. */
import type { Config } from '../../config/schema.js';
import {
  profileBehaviours,
  profilesFor,
  SPECFORGE_PROFILES,
  type SpecforgeDriver,
  type SpecforgeRevisionPin,
} from '../../stages/common/index.js';

/** Which SpecForge revision the plan is for, and what follows from it; the pin, or what preflight will read. */
export function revisionNotes(driver: SpecforgeDriver, pin: SpecforgeRevisionPin): string[] {
  const ids = profilesFor(driver);
  if (pin !== 'auto')
    return [`SpecForge revision ${pin} (pinned): ${SPECFORGE_PROFILES[pin].label}`, ...profileBehaviours(pin)];
  if (ids.length === 1)
    return [
      `SpecForge revision: detected at preflight (auto); driver ${driver} drives ${ids[0]}: ${SPECFORGE_PROFILES[ids[0]!].label}`,
      ...profileBehaviours(ids[0]!),
    ];
  return [
    `SpecForge revision: detected at preflight (auto) from the launcher's train_eagle3.py: ${ids.join(', ')}; \`aerie doctor\` shows the host's`,
    ...ids.map((id) => `${id}: ${profileBehaviours(id).slice(0, 2).join('; ')}`),
  ];
}

/** The revision the config pins, if any: `auto` is decided at preflight, so the plan shows each driver's default. */
export function pinnedProfile(config: Config) {
  const t = config.stages.train;
  const pin = t.driver === 'command' ? 'auto' : t['specforge-revision'];
  return pin === 'auto' ? undefined : SPECFORGE_PROFILES[pin];
}
