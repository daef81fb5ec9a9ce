/** start.sh new → pm2 reload router under load → stop.sh, with nginx as the front (pm2-operations.ts). */
import { describe, it } from 'vitest';
import { findNginx } from '../../front/nginx.js';
import { describePm2Operations } from './pm2-operations.js';

if (findNginx(process.env)) describePm2Operations('nginx');
else {
  describe('pm2 operations (nginx front)', () => {
    it.skip('nginx is not installed here; this path is NOT tested (apt-get install nginx-light; CI installs it)', () => {});
  });
}
