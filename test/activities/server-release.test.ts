/**
 * A ready server counts only if /server_info reports the release its launch was rendered for
 * (server.sglang-version): ours on our port, but another release, is a ConfigError naming the
 * field and the fix, not a foreign server. And on 0.5.4 the info is asked at its old route first.
 */
import { ApplicationFailure } from '@temporalio/activity';
import { describe, expect, it } from 'vitest';
import type { ServerLaunch } from '../../src/activities/server.js';
import { confirmOurs } from '../../src/activities/server-watch.js';
import type { Host } from '../../src/hosts/host.js';
import { SglangClient } from '../../src/sglang/client.js';
import { legacyInfoRoutesFirst } from '../../src/sglang/releases.js';
import { useFakeServers } from '../support/fake-server.js';

const servers = useFakeServers({ each: true });

/** An SGLang-shaped server_info on /server_info (0.5.9 on) or only /get_server_info (0.5.4). */
async function infoServer(version: string, port: number, onlyOld: boolean): Promise<{ base: string; seen: string[] }> {
  const seen: string[] = [];
  const s = await servers.start((_body, res, req) => {
    seen.push(req.url ?? '');
    const ok = req.url === '/get_server_info' || (!onlyOld && req.url === '/server_info');
    res.writeHead(ok ? 200 : 404, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify(
        ok
          ? { model_path: '/models/t', port, tp_size: 1, speculative_algorithm: null, version }
          : { detail: 'Not Found' },
      ),
    );
  });
  return { base: s.baseUrl, seen };
}

/** The port's holder is not visible (no pid): the group check passes, server_info decides. */
const host = { name: 'gpu', portHolder: async () => ({ listening: true }) } as unknown as Host;

function launch(sglangVersion: string | undefined, how = 'server.sglang-version'): ServerLaunch {
  return {
    role: 'deploy',
    port: 30000,
    pid: 4242,
    pgid: 4242,
    modelPath: '/models/t',
    tpSize: 1,
    sglangVersion,
    sglangVersionHow: how,
  } as unknown as ServerLaunch;
}

describe('the ready server reports the release aerie rendered for', () => {
  it('the same release: confirmed', async () => {
    const { base } = await infoServer('0.5.23', 30000, false);
    await expect(
      confirmOurs(host, new SglangClient(base), launch('0.5.23'), new AbortController().signal),
    ).resolves.toBeUndefined();
  });

  it('another release: a non-retryable ConfigError naming server.sglang-version and the fix', async () => {
    const { base } = await infoServer('0.5.4', 30000, false);
    const err = await confirmOurs(host, new SglangClient(base), launch('0.5.23'), new AbortController().signal).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: 'ConfigError', nonRetryable: true });
    expect((err as Error).message).toBe(
      'the deploy server (pid 4242) is ours and up, and server.sglang-version says 0.5.23 but the server reports 0.5.4: the launch was rendered for the wrong release. ' +
        'Fix: set server.sglang-version: 0.5.4 (or auto with a [python, -m, sglang.launch_server] launcher), or point server.launcher at the 0.5.23 environment',
    );
  });

  it('a launch from before releases were recorded is not judged on it', async () => {
    const { base } = await infoServer('0.5.4', 30000, false);
    await expect(
      confirmOurs(host, new SglangClient(base), launch(undefined), new AbortController().signal),
    ).resolves.toBeUndefined();
  });

  it('0.5.4 is asked at /get_server_info first, as the readiness client is built for it', async () => {
    const { base, seen } = await infoServer('0.5.4', 30000, true);
    await confirmOurs(
      host,
      new SglangClient(base, { legacyRoutesFirst: legacyInfoRoutesFirst('0.5.4') }),
      launch('0.5.4'),
      new AbortController().signal,
    );
    expect(seen).toEqual(['/get_server_info']);
  });
});
