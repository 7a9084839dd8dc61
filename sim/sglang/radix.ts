/**
 * A prefix cache over token ids (as strings): what makes `cached_tokens`,
 * `/flush_cache` and `--disable-radix-cache` mean something in the simulator.
 * Eviction is crude on purpose: past capacity the whole tree is dropped.
 */

interface Node {
  children: Map<string, Node>;
}

export class PrefixCache {
  private root: Node = { children: new Map() };
  private nodes = 0;

  constructor(private readonly capacity: number) {}

  /** Length of the longest cached prefix of `units`. */
  match(units: readonly string[]): number {
    let node = this.root;
    let n = 0;
    for (const u of units) {
      const next = node.children.get(u);
      if (!next) break;
      node = next;
      n++;
    }
    return n;
  }

  insert(units: readonly string[]): void {
    if (this.nodes + units.length > this.capacity) this.clear();
    let node = this.root;
    for (const u of units) {
      let next = node.children.get(u);
      if (!next) {
        next = { children: new Map() };
        node.children.set(u, next);
        this.nodes++;
      }
      node = next;
    }
  }

  clear(): void {
    this.root = { children: new Map() };
    this.nodes = 0;
  }

  get size(): number {
    return this.nodes;
  }
}
