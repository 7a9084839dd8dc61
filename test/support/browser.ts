/**
 * Debian's Chromium, headless, driven by playwright-core: no browser download, no outside
 * network (background networking off). Playwright gives each launch a fresh temp profile.
 */
import { chromium, type Browser } from 'playwright-core';

export async function launchChromium(): Promise<{ browser: Browser; close(): Promise<void> }> {
  const browser = await chromium.launch({
    executablePath: process.env.AERIE_CHROMIUM ?? '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return { browser, close: () => browser.close() };
}
