/**
 * The SGLang names py/aerie_hs/sglang_hook.py patches or reads, held against what the pinned
 * wheels' source has (test/fixtures/real/sglang-<v>/capture-points.json, recorded by AST with
 * scripts/real/sglang_capture_points.py). A declaration that drifts from the source fails here.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { pythonJson } from '../support/python.js';
import { useWorkdir } from '../support/workdir.js';

const ROOT = resolve(import.meta.dirname, '../..');
type Target = [kind: 'function' | 'fields', module: string, qualname: string, names: string[]];

const pyJson = (src: string): unknown => pythonJson(`import json, sys\n${src}`);
const tmp = useWorkdir('aerie-capture-points-');

const declared = pyJson('from aerie_hs.sglang_hook import TARGETS\nprint(json.dumps(TARGETS))') as Record<
  string,
  Target[]
>;

describe('sglang_hook.py declared capture points', () => {
  it('covers exactly the pinned versions with fixtures', () => {
    expect(Object.keys(declared).sort()).toEqual(['0.5.12', '0.5.23']);
  });

  for (const version of Object.keys(declared)) {
    const rec = JSON.parse(
      readFileSync(join(ROOT, `test/fixtures/real/sglang-${version}/capture-points.json`), 'utf8'),
    );
    it(`match sglang==${version}'s source`, () => {
      expect(rec.sglang).toBe(version);
      for (const [kind, module, qualname, names] of declared[version]!) {
        const key = `${module}:${qualname}`;
        if (kind === 'function') {
          // a target missing from the fixture reads as undefined: regenerate it if newly declared
          expect(rec.functions[key]?.params, `${key} parameters as recorded from the wheel`).toEqual(names);
        } else {
          expect(names.length, `${key} declares the attributes it relies on`).toBeGreaterThan(0);
          for (const attr of names)
            expect(rec.fields[key]?.attrs?.[attr], `${key}.${attr} is defined in the wheel (its line)`).toBeTypeOf(
              'number',
            );
        }
      }
    });
  }

  it('refuses an unknown SGLang version with a message naming the supported ones', () => {
    const r = pyJson(`from aerie_hs.sglang_hook import check_version
try:
    check_version("0.5.14")
    print(json.dumps(None))
except SystemExit as e:
    print(json.dumps(str(e)))`);
    expect(r).toMatch(/supports SGLang 0\.5\.12, 0\.5\.23; this server runs SGLang 0\.5\.14/);
  });

  it('does nothing, and imports no SGLang, when AERIE_HS_DUMP_DIR is unset', () => {
    const r = pyJson(`import os
os.environ.pop("AERIE_HS_DUMP_DIR", None)
from aerie_hs.sglang_hook import plugin
print(json.dumps([plugin(), any(m.startswith("sglang") for m in sys.modules)]))`);
    expect(r).toEqual([null, false]);
  });

  it('names each launch flag the capture needs', () => {
    const r = pyJson(`from aerie_hs.sglang_hook import check_launch_args
print(json.dumps([check_launch_args("0.5.23", ["--model-path", "m", "--tp", "8"]),
  check_launch_args("0.5.23", ["--disable-radix-cache", "--enable-return-aux-hidden-states", "--speculative-algorithm", "EAGLE3"]),
  check_launch_args("0.5.12", ["--disable-radix-cache", "--pp-size=2"])]))`) as string[][];
    expect(r[0]!.join('\n')).toMatch(
      /--disable-radix-cache[\s\S]*--enable-return-aux-hidden-states[\s\S]*--speculative-algorithm EAGLE3/,
    );
    expect(r[1]).toEqual([]);
    expect(r[2]).toEqual([expect.stringMatching(/--pp-size 1/)]);
  });

  it('announces the plugin in the group SGLang loads', () => {
    const r = pyJson(`import importlib.metadata as md
from aerie_hs.sglang_hook import write_plugin_dist
d = ${JSON.stringify(tmp.path)}
write_plugin_dist(d)
sys.path.insert(0, d)
print(json.dumps([(e.name, e.value) for e in md.entry_points(group="sglang.srt.plugins")]))`);
    expect(r).toContainEqual(['aerie_hs_capture', 'aerie_hs.sglang_hook:plugin']);
  });
});
