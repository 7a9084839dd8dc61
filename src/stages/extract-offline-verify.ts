/**
 * Checking SpecForge's hidden-state files where they live. prepare_hidden_states.py writes
 * each `data_{i}.ckpt` in place and skips any file that exists on a rerun, so a file cut short
 * by a crash would be kept and poison training. A torch.save file is a zip archive whose
 * directory sits at its end: a truncated file has none. The check reads only that directory
 * (Python's zipfile, on the host, one process for the whole tree) and also requires the two
 * largest tensors to be aux_hidden_state = 3 × hidden_state with hidden_state = tokens × H × 2
 * bytes (bf16), which gives each file's token count.
 *
 * Compressed files (`--compress`, .ckpt.gz) can only be checked for their gzip header and a
 * plausible size without decompressing them whole; a truncated .gz is found by the trainer.
 */

/** Prints `OK <idx> <bytes> <tokens>` or `BAD <path>\t<reason>` per file, then `END <files>`. */
export const VERIFY_SCRIPT = String.raw`
import os, re, sys, zipfile
root, hidden = sys.argv[1], int(sys.argv[2])
name_re = re.compile(r'^data_(\d+)\.ckpt(\.gz)?$')
n = 0
for d, _dirs, files in os.walk(root):
    for f in files:
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
                        raise ValueError('not a gzip file')
                print('OK', m.group(1), size, -1)
                continue
            with zipfile.ZipFile(p) as z:
                sizes = sorted((i.file_size for i in z.infolist() if '/data/' in i.filename), reverse=True)
            if len(sizes) < 2 or sizes[1] == 0 or sizes[0] != 3 * sizes[1] or sizes[1] % (2 * hidden):
                raise ValueError('tensor sizes %s do not fit aux = 3 x hidden_state at hidden size %d' % (sizes[:4], hidden))
            print('OK', m.group(1), size, sizes[1] // (2 * hidden))
        except Exception as e:
            print('BAD', p + '\t' + (str(e) or type(e).__name__).replace('\n', ' '))
print('END', n)
`;

export interface VerifyReport {
  /** Good files by sample index. */
  ok: Map<number, { bytes: number; tokens: number }>;
  bad: { path: string; reason: string }[];
  files: number;
  complete: boolean;
}

export function parseVerifyOutput(stdout: string): VerifyReport {
  const report: VerifyReport = { ok: new Map(), bad: [], files: 0, complete: false };
  for (const line of stdout.split('\n')) {
    if (line.startsWith('OK ')) {
      const [, idx, bytes, tokens] = line.split(' ');
      report.ok.set(Number(idx), { bytes: Number(bytes), tokens: Number(tokens) });
    } else if (line.startsWith('BAD ')) {
      const tab = line.indexOf('\t');
      report.bad.push({ path: line.slice(4, tab === -1 ? undefined : tab), reason: tab === -1 ? '' : line.slice(tab + 1) });
    } else if (line.startsWith('END ')) {
      report.files = Number(line.slice(4));
      report.complete = true;
    }
  }
  return report;
}
