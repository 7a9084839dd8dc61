/** The demo config, moved into a test's own temp dir and free port, and made quicker. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AERIE_HOME, parseConfigText } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';

export function demoConfig(workdir: string, port: number, tweak: (c: Config) => void = () => undefined): Config {
  const c = parseConfigText(readFileSync(join(AERIE_HOME, 'examples', 'demo.yaml'), 'utf8'), 'demo.yaml');
  c.hosts.local!.workdir = workdir;
  c.server.port = port;
  if (c.stages.extract.driver === 'patched-server') c.stages.extract['dump-dir'] = join(workdir, 'shm');
  c.stages.benchmark.concurrencies = [1, 4, 16];
  c.stages.benchmark['output-len'] = 32;
  c.run.label = 'test';
  tweak(c);
  return c;
}
