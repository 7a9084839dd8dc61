/** A config text's problems as aerie words them (the ConfigError's list); none for a config that loads. */
import { expect } from 'vitest';
import { ConfigError, parseConfigText } from '../../src/config/load.js';

export function configProblems(text: string, env: NodeJS.ProcessEnv = {}): string[] {
  try {
    parseConfigText(text, 'test.yaml', env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  return [];
}
