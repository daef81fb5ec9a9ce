/**
 * @module harness/proc-tree — process trees and their memory, read from Linux /proc.
 *
 * Memory is reported as resident set size (RSS, `VmRSS`) summed over a process and all its descendants — what
 * "peak RSS of all processes" means in the benchmark — and, beside it, the proportional set size (PSS, from
 * `smaps_rollup`), which counts a page shared by k processes as 1/k in each so the sum is not inflated by
 * shared libraries. `RssSampler` polls a set of roots and keeps the peak of the sum. `cpuTicks` reads the CPU time
 * a tree has used so far, so a measurement can say where the processor went. One process's figures (its resident
 * memory and high-water mark, nice value, open descriptors, command line) are read here too: no other file reads
 * /proc for the tests, the bench or the soak. `sampleProcesses` names each process of a stack by its role (the soak's
 * tables).
 */
import { readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';

/** A process id, or `self` for this process. */
export type Pid = number | 'self';

/**
 * The fields of /proc/PID/stat after the command name: field 3 (the state) is [0], field N is [N - 3]. The command
 * name may contain spaces and parentheses, so the fields start after the last ')'. @throws when the process is gone.
 */
function statFields(pid: Pid): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/**
 * A `kB` line of /proc/PID/status in bytes: `VmRSS` (resident now) or `VmHWM` (its high-water mark); NaN when the
 * line is missing. @throws when the process is gone.
 */
export function statusBytes(pid: Pid, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match === null ? Number.NaN : Number(match[1]) * 1024;
}

/** Reset this process's resident-memory high-water mark (`VmHWM`), so the next read covers what follows; false where Linux refuses. */
export function resetPeakRss(): boolean {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
    return true;
  } catch {
    return false;
  }
}

/** The nice value of a process (field 19 of its stat). @throws when it is gone. */
export function niceOf(pid: Pid): number {
  return Number(statFields(pid)[16]);
}

/** The command line of a process, its arguments joined by spaces. @throws when it is gone. */
export function commandLine(pid: Pid): string {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
}

/** Open file descriptors of a process, all kinds, and how many of them are sockets. @throws when it is gone. */
export function openFds(pid: Pid): { fds: number; sockets: number } {
  const fds = readdirSync(`/proc/${pid}/fd`);
  let sockets = 0;
  for (const fd of fds) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) sockets += 1;
    } catch {
      // closed while counting
    }
  }
  return { fds: fds.length, sockets };
}

/** `pid → parent pid` for every process visible in /proc. */
export function parentMap(): Map<number, number> {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      parents.set(Number(entry), Number(statFields(Number(entry))[1])); // field 4, the ppid
    } catch {
      // the process exited while we listed /proc
    }
  }
  return parents;
}

/** `root` and every live descendant of it. */
export function processTree(root: number, parents: Map<number, number> = parentMap()): number[] {
  const children = new Map<number, number[]>();
  for (const [pid, ppid] of parents) {
    const list = children.get(ppid);
    if (list) list.push(pid);
    else children.set(ppid, [pid]);
  }
  const out: number[] = [];
  const stack = parents.has(root) ? [root] : [];
  while (stack.length > 0) {
    const pid = stack.pop()!;
    out.push(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  return out;
}

/** Resident and proportional memory of one process in bytes; zeros when it has exited. */
export function processMemory(pid: number): { rssBytes: number; pssBytes: number } {
  let rssBytes = 0;
  let pssBytes = 0;
  try {
    rssBytes = statusBytes(pid, 'VmRSS') || 0;
  } catch {
    return { rssBytes: 0, pssBytes: 0 };
  }
  try {
    const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const pss = /^Pss:\s+(\d+) kB/m.exec(rollup);
    pssBytes = pss ? Number(pss[1]) * 1024 : rssBytes;
  } catch {
    pssBytes = rssBytes; // smaps_rollup needs Linux ≥ 4.14 and the same user
  }
  return { rssBytes, pssBytes };
}

/** Memory of the trees under `roots` right now. */
export function treeMemory(roots: readonly number[]): { rssBytes: number; pssBytes: number; processes: number } {
  const parents = parentMap();
  const pids = new Set<number>();
  for (const root of roots) for (const pid of processTree(root, parents)) pids.add(pid);
  let rssBytes = 0;
  let pssBytes = 0;
  for (const pid of pids) {
    const m = processMemory(pid);
    rssBytes += m.rssBytes;
    pssBytes += m.pssBytes;
  }
  return { rssBytes, pssBytes, processes: pids.size };
}

/** Kernel clock ticks per second are 100 on Linux (USER_HZ): one tick is 10 ms, 10,000 µs. */
export const CPU_TICK_US = 10_000;

/** CPU clock ticks (user + system) of one process so far. @throws when it is gone or /proc is missing. */
export function ownCpuTicks(pid: number): number {
  const fields = statFields(pid);
  return Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of stat)
}

/** CPU clock ticks (user + system) of `root` and its descendants so far; NaN without /proc. */
export function cpuTicks(root: number, parents: Map<number, number> = parentMap()): number {
  try {
    let ticks = 0;
    for (const pid of processTree(root, parents)) ticks += ownCpuTicks(pid);
    return ticks;
  } catch {
    return NaN;
  }
}

export interface MemoryPeak {
  /** Largest summed RSS seen over the sampled trees, bytes. */
  peakRssBytes: number;
  /** Largest summed PSS seen, bytes. */
  peakPssBytes: number;
  /** Most processes seen at once in the trees. */
  peakProcesses: number;
  samples: number;
}

/**
 * Samples the summed memory of the process trees under `roots` every `intervalMs` until stopped, keeping
 * the peak. Roots may be added later (a server started after sampling began).
 */
export class RssSampler {
  #roots: number[];
  #timer: NodeJS.Timeout | undefined;
  #peak: MemoryPeak = { peakRssBytes: 0, peakPssBytes: 0, peakProcesses: 0, samples: 0 };

  constructor(roots: number[] = [], intervalMs = 250) {
    this.#roots = [...roots];
    this.#timer = setInterval(() => this.sample(), intervalMs);
    this.#timer.unref();
  }

  addRoot(pid: number): void {
    this.#roots.push(pid);
  }

  /** Take one sample now (also called by the timer). */
  sample(): void {
    if (this.#roots.length === 0) return;
    const m = treeMemory(this.#roots);
    const p = this.#peak;
    p.samples++;
    p.peakRssBytes = Math.max(p.peakRssBytes, m.rssBytes);
    p.peakPssBytes = Math.max(p.peakPssBytes, m.pssBytes);
    p.peakProcesses = Math.max(p.peakProcesses, m.processes);
  }

  /** Stop sampling (after one last sample) and return the peak. */
  stop(): MemoryPeak {
    if (this.#timer) {
      this.sample();
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
    return { ...this.#peak };
  }
}

/** One process of a stack at one moment, named by its role. */
export interface ProcessSample {
  pid: number;
  name: string;
  rssMiB: number;
  /** Open file descriptors, all kinds. */
  fds: number;
  /** Of those, the ones that are not sockets (files, pipes, event fds): these must not grow at all. */
  files: number;
}

/** Every live process under `roots` (the roots and all their descendants), named by role. */
export function sampleProcesses(roots: readonly number[]): ProcessSample[] {
  const parents = parentMap();
  const pids = roots.flatMap((root) => processTree(root, parents));
  const out: ProcessSample[] = [];
  for (const pid of pids) {
    try {
      const name = roleOf(commandLine(pid));
      const rssMiB = (statusBytes(pid, 'VmRSS') || 0) / 2 ** 20; // NaN: no VmRSS line
      const { fds, sockets } = openFds(pid);
      out.push({ pid, name, rssMiB, fds, files: fds - sockets });
    } catch {
      // exited while sampling
    }
  }
  return out.sort((a, b) => a.name.localeCompare(b.name) || a.pid - b.pid);
}

function roleOf(cmdline: string): string {
  if (cmdline.includes('worker/main')) return 'worker';
  if (cmdline.includes('model-server')) return 'model-server';
  if (cmdline.includes('router-cluster')) return 'router (primary)';
  if (cmdline.includes('router/main')) return 'router';
  if (cmdline.startsWith('nginx: master')) return 'nginx master';
  if (cmdline.startsWith('nginx: worker')) return 'nginx worker';
  if (cmdline.includes('front/main')) return 'front';
  if (cmdline.includes('esbuild')) return 'esbuild (tsx)';
  return cmdline.split(' ')[0] ?? '?';
}
