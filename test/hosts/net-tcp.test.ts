import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  decodeProcAddress,
  listenersOnPort,
  parseProcNetTcp,
  parseProcNetTcpScan,
} from '../../src/hosts/util/net-tcp.js';
import { useLocalHost } from '../support/local-host.js';

const TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4711 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1061 1 00000000b6f8d7b8 100 0 0 10 0
   2: 0100007F:7530 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 4800 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:D2F0 0100007F:7530 06 00000000:00000000 03:00000F3A 00000000     0        0 0 3 0000000000000000
`;
const TCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 43210 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:7531 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 55555 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:7530 0000000000000000FFFF00000100007F:D2F1 01 00000000:00000000 00:00000000 00000000  1000        0 4900 1 0000000000000000 20 4 30 10 -1
`;

describe('/proc/net/tcp parser (golden)', () => {
  it('parses IPv4 sockets, skipping the header', () => {
    expect(parseProcNetTcp(TCP, 4)).toEqual([
      { family: 4, localAddress: '127.0.0.1', localPort: 30000, state: '0A', uid: 1000, inode: '4711' },
      { family: 4, localAddress: '0.0.0.0', localPort: 22, state: '0A', uid: 0, inode: '1061' },
      { family: 4, localAddress: '127.0.0.1', localPort: 30000, state: '01', uid: 1000, inode: '4800' },
      { family: 4, localAddress: '127.0.0.1', localPort: 54000, state: '06', uid: 0, inode: '0' },
    ]);
  });
  it('parses IPv6 sockets, including v4-mapped addresses', () => {
    expect(parseProcNetTcp(TCP6, 6)).toEqual([
      { family: 6, localAddress: '::', localPort: 8080, state: '0A', uid: 1000, inode: '43210' },
      { family: 6, localAddress: '::1', localPort: 30001, state: '0A', uid: 0, inode: '55555' },
      { family: 6, localAddress: '::ffff:127.0.0.1', localPort: 30000, state: '01', uid: 1000, inode: '4900' },
    ]);
  });
  it('decodes addresses word by word', () => {
    expect(decodeProcAddress('0100007F')).toBe('127.0.0.1');
    expect(decodeProcAddress('0A01A8C0')).toBe('192.168.1.10');
    expect(decodeProcAddress('000080FE000000000000000001000000')).toBe('fe80::1');
    expect(decodeProcAddress('B80D0120000000000000000005000000')).toBe('2001:db8::5');
    expect(() => decodeProcAddress('xyz')).toThrow();
  });
  it('finds only LISTEN sockets on the port', () => {
    const sockets = parseProcNetTcpScan(`${TCP}#tcp6\n${TCP6}`);
    expect(listenersOnPort(sockets, 30000).map((s) => s.inode)).toEqual(['4711']);
    expect(listenersOnPort(sockets, 30001).map((s) => s.inode)).toEqual(['55555']);
    expect(listenersOnPort(sockets, 54000)).toEqual([]);
  });
  it('ignores garbage lines', () => {
    expect(parseProcNetTcp('nonsense\n   0: zz:zz 0 0A\n', 4)).toEqual([]);
  });
});

describe('portHolder on this machine', () => {
  const local = useLocalHost('aerie-net-tcp-');
  // The listeners are the subject: portHolder must name this very process as their holder.
  const servers: Server[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  });
  const listen = (host: string) =>
    new Promise<number>((resolve, reject) => {
      // harness-exception: the listener under test: portHolder must name this very process
      const s = createServer();
      servers.push(s);
      s.once('error', reject);
      s.listen(0, host, () => resolve((s.address() as { port: number }).port));
    });

  it('names this process as the holder of a loopback listener', async () => {
    const port = await listen('127.0.0.1');
    const holder = await local.host.portHolder(port);
    expect(holder.listening).toBe(true);
    expect(holder.pid).toBe(process.pid);
    expect(holder.command).toMatch(/node/);
  });

  it('says not listening once the port is closed', async () => {
    const port = await listen('127.0.0.1');
    await new Promise((r) => servers.pop()!.close(r));
    expect(await local.host.portHolder(port)).toEqual({ listening: false });
  });

  it('gives the base URL on loopback', async () => {
    const { host } = local;
    expect(await host.httpBase(30000)).toBe('http://127.0.0.1:30000');
    await expect(host.httpBase(0)).rejects.toThrow(/port/);
  });
});
