/**
 * Parsing /proc/net/tcp and /proc/net/tcp6: who is listening on a port. Addresses are
 * printed as hex of the kernel's in-memory words (little-endian on x86 and arm64), so
 * each 32-bit word is byte-reversed.
 */

export interface TcpSocket {
  family: 4 | 6;
  localAddress: string;
  localPort: number;
  /** Kernel state code in hex, e.g. "0A" = LISTEN, "01" = ESTABLISHED. */
  state: string;
  uid: number;
  /** Socket inode: the link target of the owner's fd is "socket:[<inode>]". */
  inode: string;
}

export const TCP_LISTEN = '0A';

function wordBytes(hex8: string): number[] {
  // "0100007F" → [0x7f, 0x00, 0x00, 0x01]
  const b = [0, 2, 4, 6].map((i) => parseInt(hex8.slice(i, i + 2), 16));
  return b.reverse();
}

function formatV6(bytes: number[]): string {
  const isV4Mapped = bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  if (isV4Mapped) return `::ffff:${bytes.slice(12).join('.')}`;
  const groups = Array.from({ length: 8 }, (_, i) => ((bytes[2 * i] << 8) | bytes[2 * i + 1]).toString(16));
  // Compress the longest run of zero groups (length >= 2) as "::".
  let best = { at: -1, len: 0 };
  for (let i = 0; i < 8;) {
    if (groups[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > best.len) best = { at: i, len: j - i };
    i = j;
  }
  if (best.len < 2) return groups.join(':');
  return `${groups.slice(0, best.at).join(':')}::${groups.slice(best.at + best.len).join(':')}`;
}

/** "0100007F" → "127.0.0.1"; 32 hex digits → an IPv6 address. */
export function decodeProcAddress(hex: string): string {
  if (/^[0-9A-Fa-f]{8}$/.test(hex)) return wordBytes(hex).join('.');
  if (/^[0-9A-Fa-f]{32}$/.test(hex)) {
    const bytes = [0, 8, 16, 24].flatMap((i) => wordBytes(hex.slice(i, i + 8)));
    return formatV6(bytes);
  }
  throw new Error(`not a /proc/net address: ${hex}`);
}

/** All sockets in one /proc/net/tcp or tcp6 file (the header line and malformed lines are skipped). */
export function parseProcNetTcp(text: string, family: 4 | 6): TcpSocket[] {
  const out: TcpSocket[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || !/^\d+:$/.test(f[0])) continue;
    const [addrHex, portHex] = f[1].split(':');
    if (!addrHex || !portHex || !/^[0-9A-Fa-f]{4}$/.test(portHex)) continue;
    let localAddress: string;
    try {
      localAddress = decodeProcAddress(addrHex);
    } catch {
      continue;
    }
    out.push({
      family,
      localAddress,
      localPort: parseInt(portHex, 16),
      state: f[3].toUpperCase(),
      uid: Number(f[7]),
      inode: f[9],
    });
  }
  return out;
}

/**
 * Listening sockets on port, on any address: a listener on another address of the same
 * port still makes a server's bind to 0.0.0.0 fail, and "port free" must be conservative.
 */
export function listenersOnPort(sockets: readonly TcpSocket[], port: number): TcpSocket[] {
  return sockets.filter((s) => s.state === TCP_LISTEN && s.localPort === port);
}

/** Prints both tables (for SshHost; split them on the marker line). */
export const PROC_NET_TCP_SCAN = "cat /proc/net/tcp 2>/dev/null; echo '#tcp6'; cat /proc/net/tcp6 2>/dev/null; exit 0";

/** The output of PROC_NET_TCP_SCAN as sockets of both families. */
export function parseProcNetTcpScan(text: string): TcpSocket[] {
  const at = text.indexOf('#tcp6\n');
  const v4 = at < 0 ? text : text.slice(0, at);
  const v6 = at < 0 ? '' : text.slice(at + '#tcp6\n'.length);
  return [...parseProcNetTcp(v4, 4), ...parseProcNetTcp(v6, 6)];
}
