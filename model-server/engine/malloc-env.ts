/**
 * @module engine/malloc-env — the glibc allocator settings a process that runs an engine starts with (workers,
 * and the benchmark's engine probes, so that what is measured is what is served). glibc reads them at process
 * start: they cannot be set from inside.
 *
 * Why: onnxruntime-node copies every fetched output into a fresh ArrayBuffer (the cross-attention keys/values
 * made at encoding: ~180 MB per batch of 64 on the 418M shapes; beam logits: 63 MB per step). With glibc's
 * defaults each large buffer is a new mmap, or heap that was trimmed and grows again, and its pages fault in on
 * every copy; on a VM a first-touch fault costs tens of µs. Keeping large freed buffers in the heap lets the next
 * copy reuse memory that is already mapped (docs/engine.md, "Performance notes"). Values already in the
 * environment win.
 */
export const ENGINE_MALLOC_ENV: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: '4294967296',
  MALLOC_TRIM_THRESHOLD_: '4294967296',
};
