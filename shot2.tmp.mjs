import chromium from '@sparticuz/chromium';
import { chromium as pw } from 'playwright-core';
import { readFileSync } from 'node:fs';
const [port, ...paths] = process.argv.slice(2);
const token = readFileSync(process.env.COMBINE_HOME + '/http.token', 'utf8').trim();
const b = await pw.launch({ executablePath: await chromium.executablePath(), args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'], headless: true });
const p = await b.newPage({ viewport: { width: 1200, height: 800 } });
p.on('pageerror', (e) => console.log('pageerror', e.message));
p.on('console', (m) => console.log('console', m.text()));
await p.goto(`http://127.0.0.1:${port}/?token=${token}`);
let i = 0;
for (const path of paths) {
  await p.goto(`http://127.0.0.1:${port}${path}`);
  if (path.includes('open')) await p.locator('details').first().evaluate((d) => (d.open = true));
  await p.screenshot({ path: `/tmp/s${i++}.png`, fullPage: true });
}
await b.close();
