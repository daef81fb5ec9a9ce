/** start.sh new → pm2 reload router under load → stop.sh, with the built-in proxy as the front (pm2-operations.ts). */
import { describePm2Operations } from './pm2-operations.js';

describePm2Operations('builtin');
