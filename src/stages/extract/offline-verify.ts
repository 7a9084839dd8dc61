/**
 * Checking SpecForge's hidden-state files where they live. prepare_hidden_states.py writes
 * each `data_{i}.ckpt` in place and skips any file that exists on a rerun, so a file cut short
 * by a crash would be kept and poison training; and a file whose pickle no torch can read
 * fails only when a trainer reaches it. One Python process walks the whole tree on the host,
 * with the standard library only:
 *
 * - the zip directory must be there (it sits at the end: a truncated file has none);
 * - `<archive>/data.pkl` is run through a small stack machine over `pickletools.genops`: it
 *   must be a well-formed pickle that uses only what torch.save writes for a dict of tensors
 *   and torch's weights-only unpickler accepts — the globals `torch._utils._rebuild_tensor_v2`,
 *   `collections.OrderedDict` and `torch.<T>Storage`, persistent ids
 *   `('storage', torch.<T>Storage, key, location, numel)`;
 * - the dict holds SpecForge's four keys (SpecForge@a6b6b023:specforge/runtime/data_plane/offline_reader.py:46):
 *   input_ids and loss_mask int64 [T] (1-D: SpecForge@a6b6b023:specforge/algorithms/eagle3/data.py:15-18),
 *   hidden_state [1,T,H] and aux_hidden_state [1,T,3H] in one floating dtype;
 * - each tensor's storage `<archive>/data/<key>` exists, stored, with exactly numel × itemsize
 *   bytes, and covers the tensor's extent (shape, stride and offset from the rebuild args).
 *
 * Where `import torch` works in that interpreter, each .ckpt is also opened with
 * `torch.load(weights_only=True, mmap=True)` (mmap reads only what the pickle needs). SpecForge
 * itself loads with weights_only=False, mmap=True (SpecForge@a6b6b023:specforge/runtime/data_plane/feature_store.py:235-240),
 * so this is the stricter of the two.
 *
 * Compressed files (`--compress`, .ckpt.gz) can only be checked for their gzip header and a
 * plausible size without decompressing them whole; a truncated .gz is found by the trainer.
 */
import type { Host } from '../../hosts/host.js';
import { JobFailure } from '../common/index.js';

/** Prints `TORCH <version>|-`, then `OK <idx> <bytes> <tokens>` or `BAD <path>\t<reason>` per file, then `END <files>`. */
export const VERIFY_SCRIPT = String.raw`
import os, re, sys, zipfile, pickletools
root, hidden = sys.argv[1], int(sys.argv[2])
torch = None
if (sys.argv[3] if len(sys.argv) > 3 else 'auto') != 'off':
    try:
        import torch
    except Exception:
        torch = None
print('TORCH', getattr(torch, '__version__', '?') if torch is not None else '-')
sys.stdout.flush()
name_re = re.compile(r'^data_(\d+)\.ckpt(\.gz)?$')
ITEM = {'LongStorage': ('int64', 8), 'IntStorage': ('int32', 4), 'ShortStorage': ('int16', 2),
        'CharStorage': ('int8', 1), 'ByteStorage': ('uint8', 1), 'BoolStorage': ('bool', 1),
        'DoubleStorage': ('float64', 8), 'FloatStorage': ('float32', 4), 'HalfStorage': ('float16', 2),
        'BFloat16Storage': ('bfloat16', 2)}
FLOATS = ('float64', 'float32', 'float16', 'bfloat16')
REBUILD = ('torch._utils', '_rebuild_tensor_v2')
ODICT = ('collections', 'OrderedDict')
ALLOWED = set([REBUILD, ODICT] + [('torch', s) for s in ITEM])
KEYS = ('input_ids', 'loss_mask', 'hidden_state', 'aux_hidden_state')

class Bad(Exception):
    pass

class Glob(tuple):
    pass

class Storage(object):
    def __init__(self, cls, key, numel):
        self.dtype, self.item = ITEM[cls]
        self.key, self.numel = key, numel

class Tensor(object):
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride

def is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)

def unpickle(pkl):
    stack, memo, marks = [], {}, []
    def pop(k, what):
        if len(stack) - (marks[-1] if marks else 0) < k:
            raise Bad('%s at byte %d finds too little on the stack' % (what, pos))
        items = stack[len(stack) - k:]
        del stack[len(stack) - k:]
        return items
    def to_mark(what):
        if not marks:
            raise Bad('%s at byte %d closes no MARK' % (what, pos))
        at = marks.pop()
        items = stack[at:]
        del stack[at:]
        return items
    def top(kind, what):
        if len(stack) <= (marks[-1] if marks else 0) or not isinstance(stack[-1], kind):
            raise Bad('%s at byte %d has no %s to add to' % (what, pos, kind.__name__))
        return stack[-1]
    pos = 0
    try:
        for op, arg, pos in pickletools.genops(pkl):
            n = op.name
            if n in ('PROTO', 'FRAME'):
                continue
            elif n == 'STOP':
                if len(stack) != 1 or marks:
                    raise Bad('STOP at byte %d leaves %d objects and %d marks' % (pos, len(stack), len(marks)))
                return stack[0]
            elif n == 'MARK':
                marks.append(len(stack))
            elif n == 'EMPTY_DICT':
                stack.append({})
            elif n == 'EMPTY_LIST':
                stack.append([])
            elif n == 'EMPTY_TUPLE':
                stack.append(())
            elif n in ('BINUNICODE', 'SHORT_BINUNICODE', 'BINUNICODE8', 'UNICODE', 'BININT', 'BININT1',
                       'BININT2', 'INT', 'LONG', 'LONG1', 'LONG4', 'BINFLOAT', 'FLOAT'):
                stack.append(arg)
            elif n in ('NEWFALSE', 'NEWTRUE', 'NONE'):
                stack.append({'NEWFALSE': False, 'NEWTRUE': True, 'NONE': None}[n])
            elif n in ('BINPUT', 'LONG_BINPUT', 'PUT', 'MEMOIZE'):
                if len(stack) <= (marks[-1] if marks else 0):
                    raise Bad('%s at byte %d finds nothing to memoize' % (n, pos))
                memo[len(memo) if n == 'MEMOIZE' else arg] = stack[-1]
            elif n in ('BINGET', 'LONG_BINGET', 'GET'):
                if arg not in memo:
                    raise Bad('%s at byte %d reads memo %r, never stored' % (n, pos, arg))
                stack.append(memo[arg])
            elif n in ('GLOBAL', 'STACK_GLOBAL'):
                g = tuple(arg.split(' ', 1)) if n == 'GLOBAL' else tuple(pop(2, n))
                if g not in ALLOWED:
                    raise Bad('global %s.%s at byte %d is not one a weights-only torch.load allows in these files' % (g[0], g[-1], pos))
                stack.append(Glob(g))
            elif n in ('TUPLE1', 'TUPLE2', 'TUPLE3'):
                stack.append(tuple(pop(int(n[-1]), n)))
            elif n == 'TUPLE':
                stack.append(tuple(to_mark(n)))
            elif n == 'LIST':
                stack.append(to_mark(n))
            elif n == 'APPEND':
                v = pop(1, n)[0]
                top(list, n).append(v)
            elif n == 'APPENDS':
                items = to_mark(n)
                top(list, n).extend(items)
            elif n in ('SETITEM', 'SETITEMS'):
                items = pop(2, n) if n == 'SETITEM' else to_mark(n)
                if len(items) % 2:
                    raise Bad('%s at byte %d has an odd number of items' % (n, pos))
                d = top(dict, n)
                for i in range(0, len(items), 2):
                    d[items[i]] = items[i + 1]
            elif n == 'BINPERSID':
                pid = pop(1, n)[0]
                if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == 'storage' and isinstance(pid[1], Glob)
                        and pid[1][0] == 'torch' and pid[1][1] in ITEM and isinstance(pid[2], str)
                        and isinstance(pid[3], str) and is_int(pid[4]) and pid[4] >= 0):
                    raise Bad('persistent id at byte %d is %r, not a torch storage' % (pos, pid))
                stack.append(Storage(pid[1][1], pid[2], pid[4]))
            elif n == 'REDUCE':
                fn, args = pop(2, n)
                if fn == ODICT and args == ():
                    stack.append({})
                elif fn == REBUILD and isinstance(args, tuple) and len(args) in (6, 7):
                    st, off, size, stride = args[:4]
                    if not (isinstance(st, Storage) and is_int(off) and isinstance(size, tuple) and isinstance(stride, tuple)
                            and len(size) == len(stride) and all(is_int(x) and x >= 0 for x in size + stride)):
                        raise Bad('_rebuild_tensor_v2 at byte %d gets malformed arguments' % pos)
                    stack.append(Tensor(st, off, size, stride))
                else:
                    raise Bad('REDUCE at byte %d calls %r, which torch.save does not write here' % (pos, fn))
            else:
                raise Bad('opcode %s at byte %d is not one torch.save writes for a dict of tensors' % (n, pos))
    except ValueError as e:
        raise Bad('%s (near byte %d)' % (e, pos))
    raise Bad('no STOP opcode')

def check_zip(p):
    with zipfile.ZipFile(p) as z:
        infos = dict((i.filename, i) for i in z.infolist())
        pkls = [n for n in infos if n.endswith('/data.pkl') and n.count('/') == 1]
        if len(pkls) != 1:
            raise Bad('no <archive>/data.pkl: not a torch.save file')
        prefix = pkls[0][:-len('data.pkl')]
        try:
            obj = unpickle(z.read(pkls[0]))
        except Bad as e:
            raise Bad('data.pkl is not a pickle torch.load can read: %s' % e)
    if not isinstance(obj, dict):
        raise Bad('data.pkl holds %s, not a dict' % type(obj).__name__)
    missing = [k for k in KEYS if not isinstance(obj.get(k), Tensor)]
    if missing:
        raise Bad('data.pkl has no tensor for %s (SpecForge needs %s; keys: %s)' % (missing, list(KEYS), sorted(map(str, obj))))
    ids, mask, hs, aux = [obj[k] for k in KEYS]
    if ids.storage.dtype != 'int64' or mask.storage.dtype != 'int64' or len(ids.size) != 1 or mask.size != ids.size:
        raise Bad('input_ids %s %s and loss_mask %s %s must be int64 [T]' % (ids.storage.dtype, list(ids.size), mask.storage.dtype, list(mask.size)))
    t = ids.size[0]
    if hs.size != (1, t, hidden) or aux.size != (1, t, 3 * hidden):
        raise Bad('hidden_state %s and aux_hidden_state %s do not fit [1,%d,%d] and [1,%d,%d] (T from input_ids, H = hidden size)'
                  % (list(hs.size), list(aux.size), t, hidden, t, 3 * hidden))
    if hs.storage.dtype not in FLOATS or aux.storage.dtype != hs.storage.dtype:
        raise Bad('hidden_state is %s and aux_hidden_state %s: both must be one floating dtype' % (hs.storage.dtype, aux.storage.dtype))
    for k in KEYS:
        x = obj[k]
        name = prefix + 'data/' + x.storage.key
        info = infos.get(name)
        if info is None:
            raise Bad('%s has no storage: %s is not in the archive' % (k, name))
        want = x.storage.numel * x.storage.item
        if info.compress_type != 0 or info.file_size != want:
            raise Bad('%s is %d bytes (method %d); the %s storage needs %d stored bytes' % (name, info.file_size, info.compress_type, k, want))
        extent = x.offset + sum((d - 1) * s for d, s in zip(x.size, x.stride)) + 1 if all(x.size) else 0
        if extent > x.storage.numel:
            raise Bad('%s %s reaches element %d of a storage of %d' % (k, list(x.size), extent, x.storage.numel))
    return t

def check_torch(p, t):
    try:
        d = torch.load(p, map_location='cpu', weights_only=True, mmap=True)
        shapes = [tuple(d[k].shape) for k in KEYS]
    except Exception as e:
        raise Bad('torch %s cannot load it (weights_only=True): %s: %s' % (torch.__version__, type(e).__name__, e))
    if shapes != [(t,), (t,), (1, t, hidden), (1, t, 3 * hidden)]:
        raise Bad('torch.load gives shapes %s' % shapes)

n = 0
for d, _dirs, files in os.walk(root):
    for f in sorted(files):
        m = name_re.match(f)
        if not m:
            continue
        n += 1
        p = os.path.join(d, f)
        try:
            size = os.path.getsize(p)
            if m.group(2):
                with open(p, 'rb') as fh:
                    if fh.read(2) != b'\x1f\x8b' or size < 64:
                        raise Bad('not a gzip file')
                print('OK', m.group(1), size, -1)
                continue
            t = check_zip(p)
            if torch is not None:
                check_torch(p, t)
            print('OK', m.group(1), size, t)
        except Exception as e:
            print('BAD', p + '\t' + (str(e) or type(e).__name__).replace('\n', ' ').replace('\t', ' '))
print('END', n)
`;

export interface VerifyReport {
  /** Good files by the index in their name (not an input row: see offline-driver.ts). */
  ok: Map<number, { bytes: number; tokens: number }>;
  bad: { path: string; reason: string }[];
  files: number;
  complete: boolean;
  /** The torch version that also loaded each file, or undefined when the interpreter has none. */
  torch?: string;
}

export function parseVerifyOutput(stdout: string): VerifyReport {
  const report: VerifyReport = { ok: new Map(), bad: [], files: 0, complete: false };
  for (const line of stdout.split('\n')) {
    if (line.startsWith('OK ')) {
      const [, idx, bytes, tokens] = line.split(' ');
      report.ok.set(Number(idx), { bytes: Number(bytes), tokens: Number(tokens) });
    } else if (line.startsWith('BAD ')) {
      const tab = line.indexOf('\t');
      report.bad.push({
        path: line.slice(4, tab === -1 ? undefined : tab),
        reason: tab === -1 ? '' : line.slice(tab + 1),
      });
    } else if (line.startsWith('TORCH ')) {
      const v = line.slice(6).trim();
      if (v !== '-') report.torch = v;
    } else if (line.startsWith('END ')) {
      report.files = Number(line.slice(4));
      report.complete = true;
    }
  }
  return report;
}

/** Runs the check on the host; a checker that cannot run (no interpreter, a crash) is a JobFailure, never "no files". */
export async function verifyOffline(
  host: Host,
  python: string,
  outDir: string,
  hiddenSize: number,
): Promise<VerifyReport> {
  if (!(await host.stat(outDir))) return { ok: new Map(), bad: [], files: 0, complete: true };
  const r = await host.exec([python, '-c', VERIFY_SCRIPT, outDir, String(hiddenSize)], { timeoutMs: 60 * 60_000 });
  const report = parseVerifyOutput(r.stdout);
  if (r.code !== 0 || !report.complete) {
    throw new JobFailure(
      r.code === 127 ? 'MissingDependencyError' : 'ExtractVerifyFailed',
      `checking the hidden-state files with ${python} on ${host.name} failed (exit ${r.code}): ${r.stderr.trim().slice(-500)}` +
        (r.code === 127 ? ' — set stages.extract.python to an interpreter on the host' : ''),
    );
  }
  return report;
}
