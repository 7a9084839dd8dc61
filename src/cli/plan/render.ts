/** The plan as the terminal shows it: per host, each step with the files, environment, argv and notes it comes with. */
import type { Config } from '../../config/schema.js';
import { shJoin } from '../../hosts/index.js';
import type { PlanStep } from './step.js';

export function renderPlan(config: Config, steps: PlanStep[], source: string): string {
  const out = [`aerie plan ${source} — nothing is run; \${VAR} in env is expanded on the worker at launch`, ''];
  const hosts = [...new Set(steps.map((s) => s.host))];
  for (const h of hosts) {
    const hc = config.hosts[h]! as Record<string, unknown>;
    const ssh = (hc.ssh ?? {}) as { host?: string; user?: string; port?: number; 'proxy-jump'?: string };
    const target = `${ssh.user ? `${ssh.user}@` : ''}${ssh.host ?? '?'}${ssh.port ? `:${ssh.port}` : ''}${ssh['proxy-jump'] ? ` via ${ssh['proxy-jump']}` : ''}`;
    const how =
      hc.kind === 'ssh'
        ? `ssh ${target}${hc['exec-prefix'] ? `, every command through: ${shJoin(hc['exec-prefix'] as string[])}` : ''}`
        : 'this machine';
    const http =
      typeof hc['http-address'] === 'string' && hc['http-address'] !== '127.0.0.1'
        ? `, HTTP forwarded to ${hc['http-address']}`
        : '';
    const gpus = Array.isArray(hc.gpus) ? `, GPUs ${(hc.gpus as number[]).join(',')} only` : '';
    out.push(`host ${h} (${how}${http}), workdir ${String(hc.workdir)}${gpus}`);
    for (const s of steps.filter((x) => x.host === h)) {
      out.push('', `  ${s.stage} · ${s.step}`);
      for (const [path, content] of Object.entries(s.files ?? {})) {
        out.push(
          `    writes ${path}:`,
          ...content
            .trimEnd()
            .split('\n')
            .map((l) => `      ${l}`),
        );
      }
      if (s.env && Object.keys(s.env).length)
        out.push(
          `    env  ${Object.entries(s.env)
            .map(([k, v]) => `${k}=${v}`)
            .join(' ')}`,
        );
      if (s.argv) out.push(`    argv ${shJoin(s.argv)}`);
      for (const n of s.notes ?? []) out.push(`    ${n}`);
    }
  }
  return out.join('\n') + '\n';
}
