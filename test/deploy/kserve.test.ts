/**
 * deploy/k8s/kserve/inference-service.yaml, the KServe example, checked without a cluster. KServe's CRDs are not in
 * kubernetes-models, so the pod-level part (containers, probes, volumes, security) is validated as a Kubernetes
 * PodSpec with kubernetes-models, and the KServe part by hand against the fields of KServe's published CRD
 * (kserve/kserve config/crd/full/serving.kserve.io_inferenceservices.yaml, v1beta1) and the rules its webhook
 * applies (pkg/apis/serving/v1beta1: predictor_custom.go, inference_service_validation.go). Then against the
 * code: the environment loads with the real config loader and the probe paths are answered by the real app.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PodSpec } from 'kubernetes-models/v1';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { loadConfig } from '../../common/config.js';
import { withTokenServer } from '../../harness/model-server.js';

const root = new URL('../../', import.meta.url).pathname;
const file = path.join(root, 'deploy/k8s/kserve/inference-service.yaml');
const documents = parseAllDocuments(readFileSync(file, 'utf8'));
const isvc = documents[0]!.toJS();
const predictor = isvc.spec.predictor;
const container = predictor.containers[0];
const env: Record<string, string> = Object.fromEntries(
  container.env.map((e: { name: string; value: string }) => [e.name, e.value]),
);

/** The properties of `spec` in KServe's v1beta1 CRD. */
const SPEC_FIELDS = ['predictor', 'transformer', 'explainer', 'canary'];
/**
 * The properties of `spec.predictor` in KServe's v1beta1 CRD that are KServe's, not PodSpec's: the rest must validate
 * as a PodSpec.
 */
const KSERVE_PREDICTOR_FIELDS = [
  'annotations',
  'autoScaling',
  'batcher',
  'canaryTrafficPercent',
  'containerConcurrency',
  'deploymentStrategy',
  'huggingface',
  'labels',
  'lightgbm',
  'logger',
  'maxReplicas',
  'minReplicas',
  'model',
  'onnx',
  'paddle',
  'pmml',
  'pytorch',
  'scaleMetric',
  'scaleMetricType',
  'scaleTarget',
  'sklearn',
  'storageContainerName',
  'storageUris',
  'tensorflow',
  'timeout',
  'triton',
  'workerSpec',
  'xgboost',
];
/** The properties of `spec.predictor` in KServe's v1beta1 CRD that are PodSpec's. */
const POD_SPEC_PREDICTOR_FIELDS = [
  'activeDeadlineSeconds',
  'affinity',
  'automountServiceAccountToken',
  'containers',
  'dnsConfig',
  'dnsPolicy',
  'enableServiceLinks',
  'hostAliases',
  'hostIPC',
  'hostNetwork',
  'hostPID',
  'hostUsers',
  'hostname',
  'hostnameOverride',
  'imagePullSecrets',
  'initContainers',
  'name',
  'nodeName',
  'nodeSelector',
  'os',
  'overhead',
  'preemptionPolicy',
  'priority',
  'priorityClassName',
  'readinessGates',
  'resourceClaims',
  'resources',
  'restartPolicy',
  'runtimeClassName',
  'schedulerName',
  'schedulingGates',
  'securityContext',
  'serviceAccount',
  'serviceAccountName',
  'setHostnameAsFQDN',
  'shareProcessNamespace',
  'subdomain',
  'terminationGracePeriodSeconds',
  'tolerations',
  'topologySpreadConstraints',
  'volumes',
];
/** The properties of `spec.predictor` in KServe's v1beta1 CRD (PodSpec's fields and KServe's own). */
const PREDICTOR_FIELDS = [...POD_SPEC_PREDICTOR_FIELDS, ...KSERVE_PREDICTOR_FIELDS];

describe('KServe InferenceService example (deploy/k8s/kserve)', () => {
  it('one InferenceService of serving.kserve.io/v1beta1, with only the fields KServe defines', () => {
    expect(documents.map((d) => d.errors)).toEqual([[]]);
    expect(isvc).toMatchObject({ apiVersion: 'serving.kserve.io/v1beta1', kind: 'InferenceService' });
    expect(isvc.metadata.name).toMatch(/^[a-z]([-a-z0-9]*[a-z0-9])?$/);
    expect(SPEC_FIELDS).toEqual(expect.arrayContaining(Object.keys(isvc.spec)));
    // kubernetes-models' schemas accept unknown fields: the names are checked against the CRD's.
    expect(PREDICTOR_FIELDS).toEqual(expect.arrayContaining(Object.keys(predictor)));
    const podSpec = Object.fromEntries(Object.entries(predictor).filter(([k]) => !KSERVE_PREDICTOR_FIELDS.includes(k)));
    expect(() => new PodSpec(podSpec as any).validate()).not.toThrow();
    // The CRD's types for the extension fields used.
    expect(Number.isInteger(predictor.minReplicas) && Number.isInteger(predictor.maxReplicas)).toBe(true);
    expect(predictor.minReplicas).toBeLessThanOrEqual(predictor.maxReplicas);
  });

  it('the PodSpec check bites: a wrong-typed container field is refused', () => {
    const broken = structuredClone(container);
    broken.ports[0].containerPort = 'ninety-nine';
    expect(() => new PodSpec({ containers: [broken] }).validate()).toThrow(/containerPort must be integer/);
  });

  it("KServe's rules for a custom predictor: kserve-container, PROTOCOL v2, one port, an HPA metric", () => {
    // predictor_custom.go: the container KServe serves is the one named kserve-container; its PROTOCOL (v1 or v2)
    // is the protocol; it is the custom predictor because no framework or `model` field is set.
    expect(container.name).toBe('kserve-container');
    expect(env.PROTOCOL).toBe('v2');
    expect(predictor.model).toBeUndefined();
    expect(container.ports).toHaveLength(1);
    // inference_service_validation.go: Standard (raw) mode scales with an HPA, cpu or memory only; cpu is 1-100 %.
    expect(isvc.metadata.annotations['serving.kserve.io/deploymentMode']).toBe('Standard');
    expect(['cpu', 'memory']).toContain(predictor.scaleMetric);
    expect(predictor.scaleTarget).toBeGreaterThanOrEqual(1);
    expect(predictor.scaleTarget).toBeLessThanOrEqual(100);
    expect(isvc.metadata.annotations['prometheus.kserve.io/port']).toBe(new URL(env.METRICS_ADDRESS!).port);
    // Not part of the main kustomization.
    const kustomization = parseYaml(readFileSync(path.join(root, 'deploy/k8s/kustomization.yaml'), 'utf8'));
    expect(kustomization.resources.some((r: string) => r.startsWith('kserve'))).toBe(false);
  });

  it("the container's environment loads, and its probe paths are the model server's /v2 health routes", async () => {
    const { PROTOCOL: _protocol, ...serverEnv } = env;
    const config = loadConfig(serverEnv, '/app');
    expect(config.modelServer.inference.port).toBe(container.ports[0].containerPort);
    for (const probe of [container.startupProbe, container.readinessProbe, container.livenessProbe]) {
      expect(probe.httpGet.port).toBe(container.ports[0].containerPort);
    }
    // Probes carry no key: they must pass with token authorization on.
    await withTokenServer({ inference: 'k', management: 'm' }, async (server) => {
      const app = server.inferenceApp;
      expect((await app.request(container.livenessProbe.httpGet.path)).status).toBe(200);
      // Nothing registered yet: not ready, so the startup probe holds the pod back until the languages are loaded.
      expect(container.startupProbe.httpGet.path).toBe(container.readinessProbe.httpGet.path);
      expect((await app.request(container.readinessProbe.httpGet.path)).status).toBe(400);
    });
  });
});
