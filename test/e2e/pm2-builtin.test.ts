/** start.sh new → pm2 reload router under load → stop.sh, with the built-in proxy as the front (harness/pm2-stack.ts). */
import { describePm2Stack } from '../../harness/pm2-stack.js';

describePm2Stack('builtin');
