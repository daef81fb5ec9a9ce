/** start.sh new → pm2 reload router under load → stop.sh, with nginx as the front (harness/pm2-stack.ts). */
import { describe, it } from 'vitest';
import { findNginx } from '../../front/nginx.js';
import { describePm2Stack } from '../../harness/pm2-stack.js';

if (findNginx(process.env)) describePm2Stack('nginx');
else {
  describe('pm2 operations (nginx front)', () => {
    it.skip('nginx is not installed here; this path is NOT tested (apt-get install nginx-light; CI installs it)', () => {});
  });
}
