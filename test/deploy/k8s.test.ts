/**
 * The Kubernetes manifests (deploy/k8s), the Dockerfile and .dockerignore, checked without a cluster or a Docker
 * engine (none is reachable here): every object against the Kubernetes JSON schemas of kubernetes-models
 * (Kubernetes 1.27: apps/v1, policy/v1, autoscaling/v2, networking.k8s.io/v1), then against the code — each
 * container's environment loaded with the real config loader, ports and probe paths answered by the real apps, the
 * startup probe's file the one the container entry writes, grace periods longer than the timeouts the loader
 * derives — and the references between objects (selectors, named ports, volumes, HPA targets, the adapter rule).
 * The schemas accept unknown fields, so the fields the design relies on are asserted by name.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Deployment } from 'kubernetes-models/apps/v1';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Namespace, PersistentVolumeClaim, Service } from 'kubernetes-models/v1';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { ENV_DEFAULTS, loadConfig, readSetupConfig, type Config } from '../../common/config.js';
import { createLogger } from '../../common/logger.js';
import { READY_FILE } from '../../deploy/docker/model-server-entry.js';
import { call } from '../../harness/http.js';
import { startTestServer, type TestServer } from '../../harness/model-server.js';
import { createRouterApp } from '../../router/app.js';
import { Upstream } from '../../router/upstream/upstream.js';
import { parseExposition, parsePromQL } from './promql.js';

const root = new URL('../../', import.meta.url).pathname;
const k8sDir = path.join(root, 'deploy/k8s');

/** Schema classes by apiVersion/kind: every kind the manifests may use. */
const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  'v1/Namespace': Namespace,
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim,
  'apps/v1/Deployment': Deployment,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/Ingress': Ingress,
};

interface Doc {
  file: string;
  obj: any;
}

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? yamlFiles(path.join(dir, e.name))
      : /\.ya?ml$/.test(e.name)
        ? [path.relative(k8sDir, path.join(dir, e.name))]
        : [],
  );
}

const kustomization = parseYaml(readFileSync(path.join(k8sDir, 'kustomization.yaml'), 'utf8'));
/** deploy/k8s/kserve: an optional KServe example outside the kustomization, whose CRD kubernetes-models lacks
 * (test/deploy/kserve.test.ts checks it). */
const isKServeExample = (file: string) => file.startsWith('kserve/');
const docs: Doc[] = yamlFiles(k8sDir)
  .filter((f) => f !== 'kustomization.yaml' && !isKServeExample(f))
  .flatMap((file) =>
    parseAllDocuments(readFileSync(path.join(k8sDir, file), 'utf8')).map((d) => {
      expect(d.errors, file).toEqual([]);
      return { file, obj: d.toJS() };
    }),
  );
const ofKind = (kind: string) => docs.filter((d) => d.obj.kind === kind).map((d) => d.obj);
const deployments = ofKind('Deployment');
const deployment = (name: string) => deployments.find((d) => d.metadata.name === name)!;
const byName = (list: any[], name: string) => list.find((x) => x.name === name);
const envOf = (container: any): Record<string, string> =>
  Object.fromEntries((container.env ?? []).map((e: { name: string; value: string }) => [e.name, e.value]));
/** The config a container's process loads: the loader on its environment, in the image's working directory. */
const configOf = (container: any): Readonly<Config> => loadConfig(envOf(container), '/app');
const matches = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.entries(selector).every(([k, v]) => labels[k] === v);
const podLabels = (d: any): Record<string, string> => d.spec.template.metadata.labels;
const containerOf = (d: any) => d.spec.template.spec.containers[0];
const modelServers = () => deployments.filter((d) => podLabels(d)['app.kubernetes.io/component'] === 'model-server');
const preStopSeconds = (c: any): number => {
  const command = c.lifecycle.preStop.exec.command as string[];
  expect(command.slice(0, 1)).toEqual(['sleep']);
  return Number(command[1]);
};

describe('Kubernetes manifests', () => {
  it('every object is valid against the Kubernetes schemas (kubernetes-models)', () => {
    expect(docs.length).toBeGreaterThanOrEqual(14);
    for (const { file, obj } of docs) {
      const Model = MODELS[`${obj.apiVersion}/${obj.kind}`];
      expect(Model, `${file}: ${obj.apiVersion} ${obj.kind} has no schema here`).toBeDefined();
      expect(() => new Model!(obj).validate(), `${file}: ${obj.kind} ${obj.metadata?.name}`).not.toThrow();
    }
    // The API versions the brief asks for (and the only ones current clusters serve).
    expect(ofKind('HorizontalPodAutoscaler').every((h) => h.apiVersion === 'autoscaling/v2')).toBe(true);
    expect(ofKind('PodDisruptionBudget').every((p) => p.apiVersion === 'policy/v1')).toBe(true);
  });

  it('the schema check bites: a wrong-typed field is rejected', () => {
    const broken = structuredClone(deployment('mt-router'));
    broken.spec.template.spec.containers[0].ports[0].containerPort = 'eighty';
    expect(() => new Deployment(broken).validate()).toThrow(/containerPort must be integer/);
  });

  it('kustomization.yaml lists every manifest of the folder (the adapter rule aside) and nothing else', () => {
    const listed = [...kustomization.resources].sort();
    const files = yamlFiles(k8sDir)
      .filter((f) => f !== 'kustomization.yaml' && !f.startsWith('prometheus-adapter/') && !isKServeExample(f))
      .sort();
    expect(listed).toEqual(files);
    const images = new Set(deployments.map((d) => containerOf(d).image));
    expect(new Set(kustomization.images.map((i: { name: string }) => i.name))).toEqual(images);
  });

  it.skipIf(!hasKubectl())('renders with kustomize (kubectl kustomize) into the namespace mt-serve', () => {
    const out = execFileSync('kubectl', ['kustomize', k8sDir], { encoding: 'utf8' });
    const rendered = parseAllDocuments(out).map((d) => d.toJS());
    const key = (o: any) => `${o.kind}/${o.metadata.name}`;
    expect(rendered.map(key).sort()).toEqual(
      docs
        .filter((d) => !d.file.startsWith('prometheus-adapter/'))
        .map((d) => key(d.obj))
        .sort(),
    );
    for (const o of rendered.filter((o) => o.kind !== 'Namespace'))
      expect(o.metadata.namespace, key(o)).toBe('mt-serve');
  });

  it('every environment variable is one the code reads, and the real loader accepts each container environment', () => {
    const known = new Set<string>(Object.keys(ENV_DEFAULTS));
    for (const d of deployments) {
      for (const c of d.spec.template.spec.containers) {
        for (const name of Object.keys(envOf(c))) {
          expect(known.has(name), `${d.metadata.name}: ${name} is read by nothing`).toBe(true);
        }
        expect(() => configOf(c), d.metadata.name).not.toThrow();
      }
    }
  });

  it('container ports are the ports the loaded config listens on; management stays on loopback', () => {
    const router = containerOf(deployment('mt-router'));
    expect(byName(router.ports, 'http').containerPort).toBe(configOf(router).router.address.port);
    expect(configOf(router).router.address.host).toBe('0.0.0.0');
    for (const d of modelServers()) {
      const c = containerOf(d);
      const ms = configOf(c).modelServer;
      expect(byName(c.ports, 'inference').containerPort, d.metadata.name).toBe(ms.inference.port);
      expect(byName(c.ports, 'metrics').containerPort, d.metadata.name).toBe(ms.metrics.port);
      expect([ms.inference.host, ms.metrics.host]).toEqual(['0.0.0.0', '0.0.0.0']);
      expect(ms.management.host).toBe('127.0.0.1');
      expect(c.ports.map((p: { containerPort: number }) => p.containerPort)).not.toContain(ms.management.port);
    }
  });

  it('the router finds the model servers through the headless Service that selects both hardware classes', () => {
    const headless = ofKind('Service').find((s) => s.metadata.name === 'mt-model-server');
    expect(headless.spec.clusterIP).toBe('None');
    const selected = deployments.filter((d) => matches(headless.spec.selector, podLabels(d)));
    expect(selected.map((d) => d.metadata.name).sort()).toEqual(['mt-model-server-cpu', 'mt-model-server-gpu']);
    const router = containerOf(deployment('mt-router'));
    const inferencePort = byName(headless.spec.ports, 'inference').port;
    for (const name of ['MODEL_SERVERS', 'INFERENCE_ADDRESS']) {
      const url = new URL(envOf(router)[name]!);
      expect([url.hostname, Number(url.port)], name).toEqual([headless.metadata.name, inferencePort]);
    }
    expect(configOf(router).router.upstreamUrl).toBe(`http://mt-model-server:${inferencePort}`);
    expect(configOf(router).router.modelServers).toEqual([`http://mt-model-server:${inferencePort}`]);
  });

  it('GPU pods request one GPU each, CPU pods none; setup_config.json comes from the ConfigMap', () => {
    const gpu = containerOf(deployment('mt-model-server-gpu'));
    expect(gpu.resources.limits['nvidia.com/gpu']).toBe(1);
    const cpu = containerOf(deployment('mt-model-server-cpu'));
    expect(JSON.stringify(cpu.resources)).not.toContain('nvidia.com/gpu');

    const cm = ofKind('ConfigMap').find((c) => c.metadata.name === 'mt-setup-config');
    const dir = mkdtempSync(path.join(tmpdir(), 'mt-serve-k8s-'));
    try {
      writeFileSync(path.join(dir, 'setup_config.json'), cm.data['setup_config.json']);
      const setup = readSetupConfig(path.join(dir, 'setup_config.json'));
      const repo = readSetupConfig(path.join(root, 'setup_config.json'));
      expect(Object.keys(setup.cuda_id).sort()).toEqual(Object.keys(repo.cuda_id).sort());
      // One GPU per pod: the container sees it as cuda:0.
      expect(new Set(Object.values(setup.cuda_id))).toEqual(new Set(['0']));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    for (const d of deployments) {
      const c = containerOf(d);
      expect(mountFor(d, configOf(c).modelServer.setupConfigPath), d.metadata.name).toMatchObject({
        kind: 'configMap',
        source: 'mt-setup-config',
        key: 'setup_config.json',
      });
    }
  });

  it('models come from the PVC, read-only; the store and run dir are writable emptyDirs on a read-only root', () => {
    const pvc = ofKind('PersistentVolumeClaim')[0];
    for (const d of modelServers()) {
      const c = containerOf(d);
      const ms = configOf(c).modelServer;
      expect(c.securityContext.readOnlyRootFilesystem).toBe(true);
      expect(mountFor(d, ms.modelDir)).toMatchObject({ kind: 'persistentVolumeClaim', source: pvc.metadata.name });
      expect(mountFor(d, ms.modelDir)!.readOnly).toBe(true);
      expect(mountFor(d, ms.modelStore)).toMatchObject({ kind: 'emptyDir', readOnly: false });
      expect(mountFor(d, configOf(c).runDir)).toMatchObject({ kind: 'emptyDir', readOnly: false });
    }
  });

  it('rolling updates and evictions drain: grace periods exceed preStop plus the response timeout', () => {
    for (const d of deployments) {
      const c = containerOf(d);
      const config = configOf(c);
      const grace = d.spec.template.spec.terminationGracePeriodSeconds;
      const preStop = preStopSeconds(c);
      expect(preStop, d.metadata.name).toBeGreaterThanOrEqual(5);
      expect(grace, d.metadata.name).toBeGreaterThan(preStop + config.modelServer.defaultResponseTimeoutS);
      // The router drains for up to its upstream timeout (router/main.ts).
      expect(grace, d.metadata.name).toBeGreaterThan(preStop + config.router.upstreamTimeoutMs / 1000);
      expect(d.spec.strategy.rollingUpdate.maxUnavailable, d.metadata.name).toBe(0);
    }
    const router = configOf(containerOf(deployment('mt-router'))).router;
    for (const ingress of ofKind('Ingress')) {
      const annotations = ingress.metadata.annotations;
      expect(Number(annotations['nginx.ingress.kubernetes.io/proxy-read-timeout'])).toBeGreaterThan(
        router.upstreamTimeoutMs / 1000,
      );
      expect(sizeBytes(annotations['nginx.ingress.kubernetes.io/proxy-body-size'])).toBe(router.maxBodyBytes);
    }
  });

  it("documents stay with the router pod that took them: a writable run dir, each client's calls to one pod", () => {
    const d = deployment('mt-router');
    const c = containerOf(d);
    expect(c.securityContext.readOnlyRootFilesystem).toBe(true);
    expect(mountFor(d, configOf(c).runDir)).toMatchObject({ kind: 'emptyDir', readOnly: false });
    const documents = ofKind('Ingress').find((i) => i.metadata.name === 'mt-serve-documents');
    expect(documents.metadata.annotations['nginx.ingress.kubernetes.io/upstream-hash-by']).toBe('$binary_remote_addr');
    const paths = documents.spec.rules[0].http.paths.map((p: { path: string }) => p.path);
    expect(paths).toEqual(['/documents', '/v2/document', '/translate_file', '/download_file']);
  });

  it('the model server startup probe waits for the file the container entry writes', () => {
    for (const d of modelServers()) {
      const c = containerOf(d);
      expect(c.startupProbe.exec.command).toEqual(['test', '-f', path.posix.join(configOf(c).runDir, READY_FILE)]);
    }
  });

  it('every PDB, HPA, Service and Ingress reference resolves', () => {
    for (const pdb of ofKind('PodDisruptionBudget')) {
      const hits = deployments.filter((d) => matches(pdb.spec.selector.matchLabels, podLabels(d)));
      expect(
        hits.map((d) => d.metadata.name),
        pdb.metadata.name,
      ).toEqual([pdb.metadata.name]);
    }
    expect(
      ofKind('PodDisruptionBudget')
        .map((p) => p.metadata.name)
        .sort(),
    ).toEqual(deployments.map((d) => d.metadata.name).sort());
    for (const d of deployments) expect(matches(d.spec.selector.matchLabels, podLabels(d)), d.metadata.name).toBe(true);
    for (const svc of ofKind('Service')) {
      const pods = deployments.filter((d) => matches(svc.spec.selector, podLabels(d)));
      expect(pods.length, svc.metadata.name).toBeGreaterThan(0);
      for (const port of svc.spec.ports) {
        for (const d of pods)
          expect(byName(containerOf(d).ports, port.targetPort), `${svc.metadata.name}`).toBeDefined();
      }
    }
    for (const ingress of ofKind('Ingress')) {
      for (const { backend } of ingress.spec.rules[0].http.paths) {
        const routerSvc = ofKind('Service').find((s) => s.metadata.name === backend.service.name);
        expect(byName(routerSvc.spec.ports, backend.service.port.name), ingress.metadata.name).toBeDefined();
      }
    }
    for (const hpa of ofKind('HorizontalPodAutoscaler')) {
      expect(hpa.spec.scaleTargetRef).toMatchObject({ apiVersion: 'apps/v1', kind: 'Deployment' });
      const target = deployment(hpa.spec.scaleTargetRef.name);
      expect(podLabels(target)['app.kubernetes.io/component']).toBe('model-server');
      // The HPA owns the replica count: a replicas field would reset it at every apply.
      expect(target.spec.replicas, target.metadata.name).toBeUndefined();
      expect(hpa.spec.minReplicas, hpa.metadata.name).toBeGreaterThanOrEqual(1);
    }
    expect(
      ofKind('HorizontalPodAutoscaler')
        .map((h) => h.spec.scaleTargetRef.name)
        .sort(),
    ).toEqual(
      modelServers()
        .map((d) => d.metadata.name)
        .sort(),
    );
  });

  it('pods run as the image user (uid 1000, non-root), privileges dropped', () => {
    const dockerUsers = stages().map((s) => s.user);
    for (const d of deployments) {
      const spec = d.spec.template.spec;
      expect(spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
      expect(dockerUsers).toContain(`${spec.securityContext.runAsUser}:${spec.securityContext.runAsGroup}`);
      expect(containerOf(d).securityContext).toMatchObject({
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
      });
    }
  });

  it('Prometheus pod discovery keeps the model server pods and their metrics port', () => {
    const job = parseYaml(readFileSync(path.join(root, 'deploy/prometheus/kubernetes-scrape.yml'), 'utf8'))
      .scrape_configs[0];
    const keep = job.relabel_configs.filter((r: { action?: string }) => r.action === 'keep');
    const sanitize = (label: string) => label.replace(/[^a-zA-Z0-9_]/g, '_');
    for (const d of modelServers()) {
      const labels = podLabels(d);
      const values = (r: { source_labels: string[] }) =>
        r.source_labels.map((s: string) =>
          s === '__meta_kubernetes_pod_container_port_name'
            ? 'metrics'
            : (Object.entries(labels).find(([k]) => `__meta_kubernetes_pod_label_${sanitize(k)}` === s)?.[1] ?? ''),
        );
      for (const r of keep)
        expect(new RegExp(`^(?:${r.regex})$`).test(values(r).join(';')), d.metadata.name).toBe(true);
      expect(byName(containerOf(d).ports, 'metrics')).toBeDefined();
    }
  });
});

describe('probes, HPA metric and adapter rule against the running code', () => {
  let t: TestServer;
  let upstream: Upstream;
  beforeAll(async () => {
    t = await startTestServer({ entries: ['ko'] });
    expect(
      (await call(`${t.management}/models?url=ko&batch_size=4&max_batch_delay=0`, { method: 'POST' })).status,
    ).toBe(200);
    upstream = new Upstream({ url: t.inference, connections: 2, timeoutMs: 5_000 });
  });
  afterAll(async () => {
    await upstream?.close();
    await t?.close();
  });

  it('model server probes: httpGet paths on the named inference port answer 200 when healthy', async () => {
    const urlOfPort: Record<string, string> = { inference: t.inference, metrics: t.metrics };
    for (const d of modelServers()) {
      const c = containerOf(d);
      for (const probe of [c.readinessProbe, c.livenessProbe]) {
        expect(urlOfPort[probe.httpGet.port], d.metadata.name).toBeDefined();
        expect((await fetch(`${urlOfPort[probe.httpGet.port]}${probe.httpGet.path}`)).status).toBe(200);
      }
    }
  });

  it('router probes: readiness GET /health answers 200 through a live model server; liveness is TCP on its port', async () => {
    const c = containerOf(deployment('mt-router'));
    const app = createRouterApp(
      { maxBodyBytes: 1024, languages: ['ko'], logBodies: false },
      { upstream, logger: createLogger('test', 'silent') },
    );
    expect(c.readinessProbe.httpGet.port).toBe('http');
    expect((await app.request(c.readinessProbe.httpGet.path)).status).toBe(200);
    expect(c.livenessProbe.tcpSocket.port).toBe('http');
  });

  it('the HPA metric is the adapter rule’s, over an mt_ queue-depth series the model server exposes', async () => {
    const adapter = docs.find((d) => d.file === 'prometheus-adapter/rules.yaml')!.obj;
    const rules = parseYaml(adapter.data['config.yaml']).rules as any[];
    const scrape = parseExposition((await call(`${t.metrics}/metrics`)).body as string);
    for (const hpa of ofKind('HorizontalPodAutoscaler')) {
      const metric = hpa.spec.metrics[0];
      expect(metric.type).toBe('Pods');
      const rule = rules.find((r) => r.name.as === metric.pods.metric.name);
      expect(rule, metric.pods.metric.name).toBeDefined();
      const series = parsePromQL(rule.seriesQuery);
      expect(series.errors).toEqual([]);
      const name = series.selectors[0]!.metric;
      expect(name).toBe('mt_queue_depth');
      expect(new RegExp(rule.name.matches).test(name)).toBe(true);
      expect(scrape.samples.get(name), name).toEqual(new Set(['model_name', 'model_version']));
      expect(Object.keys(rule.resources.overrides).sort()).toEqual(['namespace', 'pod']);
      const query = rule.metricsQuery
        .replace('<<.Series>>', name)
        .replace('<<.LabelMatchers>>', 'namespace="mt-serve",pod=~"a|b"')
        .replace('<<.GroupBy>>', 'pod');
      expect(parsePromQL(query).errors, query).toEqual([]);
    }
  });
});

describe('Dockerfile and .dockerignore', () => {
  const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8');

  it('is multi-stage: the build compiles TypeScript, the runtime has production dependencies only', () => {
    const all = stages();
    expect(all.length).toBeGreaterThanOrEqual(3);
    const build = all.find((s) => s.name === 'build')!;
    expect(build.runs).toEqual(expect.arrayContaining(['npm ci', expect.stringMatching(/^npm run build\b/)]));
    const prod = all.find((s) => s.runs.some((r) => /\bnpm ci --omit=dev\b/.test(r)));
    expect(prod, 'a stage runs npm ci --omit=dev').toBeDefined();
    for (const name of ['runtime', 'gpu']) {
      const s = all.find((x) => x.name === name)!;
      expect(s, name).toBeDefined();
      // node_modules from the --omit=dev stage (or one built on it), dist/ from the build stage; no npm ci here.
      const modulesFrom = s.copies.find((c) => c.to === './node_modules')?.from;
      const chain = (n: string | undefined): string[] =>
        n === undefined ? [] : [n, ...chain(all.find((x) => x.name === n)?.base)];
      expect(chain(modulesFrom), name).toContain(prod!.name);
      expect(s.copies).toContainEqual({ from: 'build', src: '/app/dist', to: './dist' });
      expect(
        s.runs.some((r) => /\bnpm (ci|install)\b/.test(r)),
        name,
      ).toBe(false);
      expect(s.user, name).toMatch(/^[1-9]\d*:[1-9]\d*$/);
    }
    // The default target (the last stage) is the router / CPU model server image, non-root.
    expect(all.at(-1)!.name).toBe('runtime');
    // No nginx: the ingress controller replaces it. Nothing installs it or copies its config in.
    for (const s of all) {
      expect(
        s.runs.filter((r) => /nginx/i.test(r)),
        s.name,
      ).toEqual([]);
      expect(
        s.copies.filter((c) => /nginx/i.test(c.src)),
        s.name,
      ).toEqual([]);
    }
  });

  it('the commands the manifests run are built by the Dockerfile', () => {
    const runtime = stages().find((s) => s.name === 'runtime')!;
    expect(runtime.cmd).toEqual(containerOf(deployment('mt-router')).command);
    for (const d of deployments) {
      const [node, script] = containerOf(d).command as string[];
      expect(node).toBe('node');
      // dist/<x>.js is compiled from <x>.ts: by `npm run build` (tsconfig.build.json) or deploy/docker/tsconfig.json.
      const source = script!.replace(/^dist\//, '').replace(/\.js$/, '.ts');
      expect(existsSync(path.join(root, source)), source).toBe(true);
      const built = source.startsWith('deploy/docker/')
        ? parseYaml(readFileSync(path.join(root, 'deploy/docker/tsconfig.json'), 'utf8')).include.map(
            (f: string) => `deploy/docker/${f}`,
          )
        : parseYaml(readFileSync(path.join(root, 'tsconfig.build.json'), 'utf8')).include.map((f: string) => `${f}/`);
      expect(
        built.some((b: string) => source === b || source.startsWith(b)),
        `${source} is compiled`,
      ).toBe(true);
    }
    expect(dockerfile).toContain('npx tsc -p deploy/docker/tsconfig.json');
    // The image tag names the manifests use are the two targets.
    expect(new Set(deployments.map((d) => containerOf(d).image))).toEqual(new Set(['mt-serve', 'mt-serve-gpu']));
  });

  it('.dockerignore keeps secrets, build output and models out, and the build inputs in', () => {
    const ignored = readFileSync(path.join(root, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    expect(ignored).toEqual(
      expect.arrayContaining(['.env', 'key_file.json', 'node_modules', 'dist', 'models', 'model_store', '.git']),
    );
    for (const needed of ['package.json', 'package-lock.json', '.npmrc', 'tsconfig.json', 'tsconfig.build.json']) {
      expect(ignored, needed).not.toContain(needed);
    }
    for (const dir of ['common', 'router', 'model-server', 'deploy', 'scripts']) expect(ignored).not.toContain(dir);
  });
});

interface Stage {
  name: string | undefined;
  base: string;
  runs: string[];
  copies: { from: string | undefined; src: string; to: string }[];
  user: string | undefined;
  cmd: string[] | undefined;
}

/** The Dockerfile's stages: FROM, RUN, COPY, USER, CMD (comments dropped, `\` continuations joined). */
function stages(): Stage[] {
  const lines = readFileSync(path.join(root, 'Dockerfile'), 'utf8')
    .split('\n')
    .filter((l) => !l.trim().startsWith('#'))
    .join('\n')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .filter((l) => l.trim());
  const list: Stage[] = [];
  for (const line of lines) {
    const [op, ...rest] = line.trim().split(/\s+/);
    const args = rest.join(' ');
    const current = list.at(-1);
    switch (op) {
      case 'FROM': {
        const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args)!;
        list.push({ base: m[1]!, name: m[2], runs: [], copies: [], user: undefined, cmd: undefined });
        break;
      }
      case 'RUN':
        current!.runs.push(...args.split('&&').map((s) => s.trim()));
        break;
      case 'COPY': {
        const from = /--from=(\S+)/.exec(args)?.[1];
        const paths = rest.filter((a) => !a.startsWith('--'));
        for (const src of paths.slice(0, -1)) current!.copies.push({ from, src, to: paths.at(-1)! });
        break;
      }
      case 'USER':
        current!.user = args;
        break;
      case 'CMD':
        current!.cmd = JSON.parse(args);
        break;
    }
  }
  return list;
}

/** The volume behind a file or folder path in a Deployment's first container. */
function mountFor(d: any, file: string) {
  const c = containerOf(d);
  const mount = (c.volumeMounts as { name: string; mountPath: string; readOnly?: boolean }[])
    .filter((m) => file === m.mountPath || file.startsWith(`${m.mountPath}/`))
    .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
  if (!mount) return undefined;
  const volume = byName(d.spec.template.spec.volumes, mount.name);
  const kind = Object.keys(volume).find((k) => k !== 'name')!;
  const source = volume.configMap?.name ?? volume.persistentVolumeClaim?.claimName;
  return {
    kind,
    source,
    readOnly: mount.readOnly === true,
    key: path.posix.relative(mount.mountPath, file) || undefined,
  };
}

/** nginx size notation (`1m`, `512k`, bytes) → bytes. */
function sizeBytes(value: string): number {
  const m = /^(\d+)([kKmMgG]?)$/.exec(value)!;
  return Number(m[1]) * { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2]!.toLowerCase() as '' | 'k' | 'm' | 'g'];
}

function hasKubectl(): boolean {
  try {
    execFileSync('kubectl', ['version', '--client'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
