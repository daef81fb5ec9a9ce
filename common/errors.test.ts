import { describe, expect, it } from 'vitest';
import { ERRORS, ServeError, isErrorCode, toServeError, type ErrorCode } from './errors.js';

/** TorchServe's status → exception type, where TorchServe defines one (shared/TORCHSERVE.md). */
const TORCHSERVE_TYPES: Record<number, string[]> = {
  400: ['BadRequestException'],
  401: ['InvalidKeyException'],
  404: ['ModelNotFoundException', 'ModelVersionNotFoundException', 'ResourceNotFoundException'],
  405: ['MethodNotAllowedException'],
  409: ['ConflictStatusException'],
  500: ['InternalServerException'],
  503: ['ServiceUnavailableException'],
};

describe('error catalogue', () => {
  it.each(Object.keys(ERRORS) as ErrorCode[])('%s becomes its TorchServe body and survives the wire', (code) => {
    const entry = ERRORS[code];
    const err = new ServeError(code);
    expect(err.status).toBe(entry.status);
    expect(err.toBody()).toEqual({ code: entry.status, type: entry.type, message: entry.message });
    expect(entry.status).toBeGreaterThanOrEqual(400);
    expect(entry.status).toBeLessThan(600);
    expect(entry.message.length).toBeGreaterThan(0);
    expect(entry.type).toMatch(/^[A-Z][A-Za-z]+Exception$/);
    if (TORCHSERVE_TYPES[entry.status]) expect(TORCHSERVE_TYPES[entry.status]).toContain(entry.type);
    const back = ServeError.fromWire(JSON.parse(JSON.stringify(err.toWire())));
    expect(back.code).toBe(code);
    expect(back.toBody()).toEqual(err.toBody());
    expect(JSON.stringify(err.toWire())).not.toContain('at ');
  });

  it('keeps "queue full" and "no worker" apart: same status, different messages', () => {
    expect(ERRORS.QUEUE_FULL.status).toBe(ERRORS.NO_WORKER.status);
    expect(ERRORS.QUEUE_FULL.message).not.toBe(ERRORS.NO_WORKER.message);
    expect(ERRORS.REQUEST_TIMEOUT.status).toBe(504);
  });

  it('carries Retry-After and a custom message', () => {
    const err = new ServeError('QUEUE_FULL', 'Job queue of model ko is full.', { retryAfterS: 3 });
    expect(err.retryAfterS).toBe(3);
    expect(err.toBody().message).toBe('Job queue of model ko is full.');
  });

  it('an unknown wire code or a foreign error becomes a generic 500', () => {
    expect(ServeError.fromWire({ code: 'NOPE' as ErrorCode, message: 'x' }).code).toBe('INTERNAL');
    expect(isErrorCode('QUEUE_FULL')).toBe(true);
    expect(isErrorCode('toString')).toBe(false);
    const foreign = toServeError(new TypeError('secret internals'));
    expect(foreign.toBody()).toEqual({ code: 500, type: 'InternalServerException', message: 'Internal server error.' });
  });
});
