/** start.sh new → pm2 reload router under load → stop.sh, with the built-in proxy as the front (test/support/pm2-stack.ts). */
import { describePm2Stack } from '../support/pm2-stack.js';

describePm2Stack('builtin');
