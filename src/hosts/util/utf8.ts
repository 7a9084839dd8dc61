/**
 * Where a byte chunk can be cut without splitting a UTF-8 character, so a log read in
 * pieces (tailFrom) never turns one character into two replacement characters.
 */

/** Length of the longest prefix of buf that does not end inside a multi-byte character. */
export function completeUtf8Length(buf: Uint8Array): number {
  const n = buf.length;
  // Look back at most 3 bytes for the lead byte of the last character.
  for (let back = 1; back <= Math.min(4, n); back++) {
    const b = buf[n - back];
    if ((b & 0xc0) === 0x80) continue; // continuation byte: keep looking for the lead
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return need > back ? n - back : n;
  }
  return n; // only continuation bytes: not valid UTF-8 to begin with, cut nothing
}
