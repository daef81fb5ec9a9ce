// harness/pm2-entry — pm2 7 refuses `.ts` scripts on Node < 22.18, so the pm2 drill gives it this
// JavaScript file, which imports the TypeScript entry named in MT_ENTRY (the tsx loader is in the app's
// node_args). The entry then runs exactly as it does from dist/ under the real ecosystem.config.js.
await import(process.env.MT_ENTRY);
