/**
 * A headless Chromium for page tests, from the npm registry (`@sparticuz/chromium` ships the binary in
 * its package), driven by playwright-core. COMBINE_TEST_CHROMIUM may name another binary (a system
 * Chromium); nothing else is needed on the machine.
 */
import chromium from '@sparticuz/chromium';
import { chromium as playwright, type Browser } from 'playwright-core';

/**
 * Root in a container needs --no-sandbox; the background-networking flags keep Chromium from reaching
 * for Google's services, which a closed network refuses many times a second.
 */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-dev-shm-usage',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--no-first-run',
  '--no-default-browser-check',
  '--disable-extensions',
  '--mute-audio',
];

/** The binary: unpacked from the package into the temp directory on first use (test/helpers/global-setup.ts does it once per run). */
export async function chromiumPath(): Promise<string> {
  if (process.env.COMBINE_TEST_CHROMIUM) return process.env.COMBINE_TEST_CHROMIUM;
  chromium.setGraphicsMode = false; // no GPU emulation libraries: pages are plain HTML and SVG
  return chromium.executablePath();
}

export async function launchBrowser(): Promise<Browser> {
  return playwright.launch({ executablePath: await chromiumPath(), args: CHROMIUM_ARGS, headless: true });
}
