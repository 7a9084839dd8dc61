// aerie run / resume say at the start when the target host's activities go to a site worker's queue.
import { describe, expect, it } from 'vitest';
import { siteWorkerNote } from '../../src/cli/run.js';
import { demoConfig } from '../support/demo-config.js';

describe('site worker note', () => {
  it('names the queue and the command to serve it, only when the host sets one', () => {
    expect(siteWorkerNote(demoConfig('/tmp/w', 1))).toBe('');
    const routed = demoConfig('/tmp/w', 1, (c) => {
      c.hosts.local!['task-queue'] = 'site-b';
    });
    expect(siteWorkerNote(routed)).toBe(
      'activities for host local go to task queue site-b (hosts.local.task-queue): start `aerie worker --task-queue site-b` on a machine that reaches local; until one polls it the run waits\n',
    );
  });
});
