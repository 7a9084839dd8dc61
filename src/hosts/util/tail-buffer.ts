/**
 * Keeps the last `cap` bytes of a stream. A chatty command (a model server's load log,
 * pip) must not grow a worker's memory without bound; the end of the output is where the
 * error is, so the head is what gets dropped.
 */
export const DEFAULT_OUTPUT_CAP = 4 * 1024 * 1024;

export class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  /** Bytes dropped from the front so far. */
  dropped = 0;

  constructor(private readonly cap = DEFAULT_OUTPUT_CAP) {}

  push(chunk: Buffer): void {
    if (chunk.length >= this.cap) {
      this.dropped += this.size + chunk.length - this.cap;
      this.chunks = [chunk.subarray(chunk.length - this.cap)];
      this.size = this.cap;
      return;
    }
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.cap) {
      const head = this.chunks[0];
      const over = this.size - this.cap;
      if (head.length <= over) {
        this.chunks.shift();
        this.size -= head.length;
        this.dropped += head.length;
      } else {
        this.chunks[0] = head.subarray(over);
        this.size -= over;
        this.dropped += over;
      }
    }
  }

  /** The kept bytes as text; a multi-byte character cut at the front decodes as U+FFFD. */
  text(): string {
    return Buffer.concat(this.chunks, this.size).toString('utf8');
  }
}
