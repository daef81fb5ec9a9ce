/**
 * @module engine/ort-env — settings onnxruntime reads from the environment when it initialises, which
 * onnxruntime-node does as soon as it is loaded. Import this module before `onnxruntime-node` (as the first
 * import of every module that loads it, or of a process's entry point): ES modules evaluate in import order.
 *
 * Telemetry: official onnxruntime builds since 1.29 send usage events to Microsoft from Linux and macOS too
 * (1DS), unless `ORT_DISABLE_TELEMETRY=1` is set before initialisation. A model server should make no outbound
 * connection its operator did not ask for, and offline (every machine here) each process that loads
 * onnxruntime also leaves a `/tmp/mat-debug-<pid>.log` of failed uploads behind. So it is off unless the
 * operator set the variable already (`ORT_DISABLE_TELEMETRY=0` keeps onnxruntime's default).
 */
process.env.ORT_DISABLE_TELEMETRY ??= '1';
