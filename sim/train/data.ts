/**
 * How many samples one epoch covers. Online (no hidden states): the rows of the training
 * jsonl, which `datasets.load_dataset("json")` must be able to parse. Offline: SpecForge's
 * list_local_files walks --train-hidden-states-path and keeps files ending in `.ckpt`
 * (`.ckpt.gz` once compression landed); the jsonl is then only used for the vocab mapping.
 * A hidden-states path with no such files is an empty dataset: zero steps, no checkpoint,
 * exit 0, exactly the silent outcome aerie has to catch.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';

export class DatasetError extends Error {}

export async function countJsonlRows(file: string): Promise<number> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT')
      throw new DatasetError(`FileNotFoundError: Unable to find '${file}'`);
    throw e;
  }
  let rows = 0;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (!line) continue;
    try {
      JSON.parse(line);
    } catch {
      throw new DatasetError(
        `datasets.exceptions.DatasetGenerationError: An error occurred while generating the dataset (JSON parse error in ${path.basename(file)} at line ${i + 1})`,
      );
    }
    rows++;
  }
  return rows;
}

export async function countHiddenStateFiles(dir: string): Promise<number> {
  let count = 0;
  const walk = async (d: string): Promise<void> => {
    let entries;
    try {
      entries = await fs.readdir(d, { withFileTypes: true });
    } catch {
      return; // os.walk on a missing directory yields nothing
    }
    for (const e of entries) {
      if (e.isDirectory()) await walk(path.join(d, e.name));
      else if (e.isFile() && /\.ckpt(\.gz)?$/.test(e.name)) count++;
    }
  };
  await walk(dir);
  return count;
}
