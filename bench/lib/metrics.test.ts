import { describe, expect, it } from 'vitest';
import { findHistogram, histogramTotals, parsePrometheus, windowMean } from './metrics.js';

const scrape = (sum: number, count: number) => `# HELP mt_batch_size Jobs per batch sent to a worker.
# TYPE mt_batch_size histogram
mt_batch_size_bucket{model_name="en",le="1"} 3
mt_batch_size_bucket{model_name="en",le="+Inf"} ${count}
mt_batch_size_sum{model_name="en"} ${sum}
mt_batch_size_count{model_name="en"} ${count}
mt_batch_size_sum{model_name="ko"} 10
mt_batch_size_count{model_name="ko"} 2
ts_inference_requests_total{model_name="en",hostname="h \\"q\\""} 12 1700000000000
`;

describe('metrics', () => {
  it('parses samples, labels (with escapes), special values and timestamps', () => {
    const samples = parsePrometheus(scrape(40, 5));
    expect(samples).toHaveLength(7);
    expect(samples[1]).toEqual({ name: 'mt_batch_size_bucket', labels: { model_name: 'en', le: '+Inf' }, value: 5 });
    expect(samples[6]).toEqual({
      name: 'ts_inference_requests_total',
      labels: { model_name: 'en', hostname: 'h "q"' },
      value: 12,
    });
    expect(parsePrometheus('x NaN\ny +Inf')[1]!.value).toBe(Number.POSITIVE_INFINITY);
  });

  it('sums a histogram over label sets, or the ones a filter keeps', () => {
    const samples = parsePrometheus(scrape(40, 5));
    expect(histogramTotals(samples, 'mt_batch_size')).toEqual({ sum: 50, count: 7 });
    expect(histogramTotals(samples, 'mt_batch_size', (l) => l.model_name === 'en')).toEqual({ sum: 40, count: 5 });
    expect(findHistogram(samples, /batch_size/)).toBe('mt_batch_size');
    expect(findHistogram(samples, /nothing/)).toBeUndefined();
  });

  it('the mean over a window is the difference of two scrapes', () => {
    const before = parsePrometheus(scrape(40, 5));
    const after = parsePrometheus(scrape(40 + 64 * 3, 5 + 3));
    expect(windowMean(before, after, 'mt_batch_size')).toBe(64);
    expect(windowMean(before, before, 'mt_batch_size')).toBeNaN();
  });
});
