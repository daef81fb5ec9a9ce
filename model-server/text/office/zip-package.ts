/**
 * @module model-server/text/office/zip-package — an Office or EPUB file's zip container read into memory and written
 * back (fflate), with the checks a hostile upload needs before anything is inflated: the entry count, each entry's and
 * the whole's inflated size and compression ratio as the central directory declares them, names that could point
 * outside a folder, duplicate names. Nothing is ever extracted to disk. fflate inflates an entry into a buffer of its
 * declared size and never past it, so the declared sizes checked here bound the memory spent whatever the data holds.
 *
 * Written back, the entries keep their order and their compression (stored or deflated): EPUB's and ODF's `mimetype`
 * must stay the first entry and stored, and readers look for it there.
 */
import { unzipSync, Zip, ZipDeflate, ZipPassThrough } from 'fflate';
import { ServeError } from '../../../common/errors.js';

/** One file of the container, inflated. */
export interface PackageEntry {
  readonly name: string;
  readonly data: Uint8Array;
  /** Stored uncompressed in the source (written back so). */
  readonly stored: boolean;
}

export interface PackageLimits {
  /** Most entries. */
  maxEntries: number;
  /** Most bytes of one entry, inflated. */
  maxEntryBytes: number;
  /** Most bytes of all entries, inflated. */
  maxTotalBytes: number;
  /** Most inflated bytes per compressed byte of an entry over 1 MiB (smaller ones are never a bomb). */
  maxRatio: number;
}

export const DEFAULT_PACKAGE_LIMITS: PackageLimits = {
  maxEntries: 10_000,
  maxEntryBytes: 64 * 1024 * 1024,
  maxTotalBytes: 256 * 1024 * 1024,
  maxRatio: 200,
};

const RATIO_FLOOR_BYTES = 1024 * 1024;

/**
 * A name is a relative path of plain segments: no leading slash, drive letter or backslash, no `.` or `..`
 * segment, no NUL. Nothing here writes entries to disk, but a name a zip extractor would resolve outside its folder
 * marks a file made to attack one.
 */
function unsafeName(name: string): boolean {
  if (name === '' || name.startsWith('/') || /^[A-Za-z]:/.test(name) || name.includes('\\') || name.includes('\0'))
    return true;
  const segments = name.split('/');
  // A directory entry ends with `/`: its last segment is empty.
  return segments.some(
    (segment, i) => segment === '..' || segment === '.' || (segment === '' && i < segments.length - 1),
  );
}

/**
 * The entries of a zip file, in the order of its central directory.
 * @throws ServeError BAD_REQUEST for a file that is not a zip, an unsafe or duplicate name, an encrypted or unknown
 *   compression; PAYLOAD_TOO_LARGE past a limit, each before anything is inflated
 */
export function readPackage(bytes: Uint8Array, limits: PackageLimits = DEFAULT_PACKAGE_LIMITS): PackageEntry[] {
  const order: { name: string; stored: boolean }[] = [];
  const seen = new Set<string>();
  let total = 0;
  let files: Record<string, Uint8Array>;
  try {
    files = unzipSync(bytes, {
      filter(file) {
        const { name, size, originalSize, compression } = file;
        if (unsafeName(name))
          throw new ServeError('BAD_REQUEST', `The file holds an unsafe entry name: ${JSON.stringify(name)}.`);
        if (seen.has(name))
          throw new ServeError('BAD_REQUEST', `The file holds the entry ${JSON.stringify(name)} twice.`);
        seen.add(name);
        if (seen.size > limits.maxEntries)
          throw new ServeError('PAYLOAD_TOO_LARGE', `The file holds more than ${limits.maxEntries} entries.`);
        if (compression !== 0 && compression !== 8)
          throw new ServeError(
            'BAD_REQUEST',
            `The entry ${JSON.stringify(name)} is encrypted or compressed in an unknown way (method ${compression}).`,
          );
        if (compression === 0 && size !== originalSize)
          throw new ServeError('BAD_REQUEST', `The stored entry ${JSON.stringify(name)} declares two sizes.`);
        if (originalSize > limits.maxEntryBytes)
          throw new ServeError(
            'PAYLOAD_TOO_LARGE',
            `The entry ${JSON.stringify(name)} inflates to ${originalSize} bytes, more than ${limits.maxEntryBytes}.`,
          );
        if (originalSize > RATIO_FLOOR_BYTES && originalSize > limits.maxRatio * size)
          throw new ServeError(
            'PAYLOAD_TOO_LARGE',
            `The entry ${JSON.stringify(name)} inflates ${Math.round(originalSize / Math.max(1, size))} times, more than ${limits.maxRatio}: a zip bomb.`,
          );
        total += originalSize;
        if (total > limits.maxTotalBytes)
          throw new ServeError('PAYLOAD_TOO_LARGE', `The file inflates to more than ${limits.maxTotalBytes} bytes.`);
        order.push({ name, stored: compression === 0 });
        return true;
      },
    });
  } catch (err) {
    if (err instanceof ServeError) throw err;
    throw new ServeError('BAD_REQUEST', `The file is not a readable zip archive (${(err as Error).message}).`);
  }
  return order.map(({ name, stored }) => ({ name, stored, data: files[name]! }));
}

/** A zip file of `entries`, in their order, each stored or deflated as it says. */
export function writePackage(entries: readonly PackageEntry[]): Uint8Array {
  const chunks: Uint8Array[] = [];
  let failure: Error | null = null;
  const zip = new Zip((err, chunk) => {
    if (err) failure = err;
    else chunks.push(chunk);
  });
  for (const entry of entries) {
    const file = entry.stored ? new ZipPassThrough(entry.name) : new ZipDeflate(entry.name, { level: 6 });
    zip.add(file);
    file.push(entry.data, true);
  }
  zip.end();
  if (failure) throw failure;
  return Buffer.concat(chunks);
}
