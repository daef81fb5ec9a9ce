/**
 * @module harness/http — what tests ask of a server over HTTP and read back: a JSON call answered with its status,
 * parsed body (or text) and headers, and one value of a Prometheus metrics page.
 */

/** `text` parsed as JSON, or the text itself when it is not JSON (an nginx page, a plain-text answer). */
export function jsonOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** JSON request helper: status, parsed body (or text), headers. A body makes it a POST unless `method` says. */
export async function call(
  url: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: any; headers: Headers }> {
  const hasBody = init.body !== undefined;
  const res = await fetch(url, {
    method: init.method ?? (hasBody ? 'POST' : 'GET'),
    headers: { ...(hasBody ? { 'content-type': 'application/json' } : {}), ...init.headers },
    ...(hasBody ? { body: typeof init.body === 'string' ? init.body : JSON.stringify(init.body) } : {}),
  });
  return { status: res.status, body: jsonOrText(await res.text()), headers: res.headers };
}

/** The value of one sample line of Prometheus text, e.g. `mt_batch_size_count{model_name="echo",...}`. */
export function metricValue(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const matches = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (matches) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

/** kserve/open-inference-protocol specification/protocol/inference_rest.md, "Inference Request Examples". */
export const OPEN_INFERENCE_SPEC_EXAMPLE = {
  id: '42',
  inputs: [
    { name: 'input0', shape: [2, 2], datatype: 'UINT32', data: [1, 2, 3, 4] },
    { name: 'input1', shape: [3], datatype: 'BOOL', data: [true] },
  ],
  outputs: [{ name: 'output0' }],
};
