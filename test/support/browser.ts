import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type BrowserContext, type CDPSession, type Page } from "playwright-core";

/** Debian's Chromium: the only browser this project's tests drive (no browser downloads). */
export const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/**
 * Installs Debian's chromium when it is missing. `npm test` already did this once
 * before jest started; this covers jest run on its own. The script holds a lock,
 * so test files started at once do not race for the package manager.
 */
export function ensureChromium(): void {
  if (existsSync(chromiumPath)) return;
  const script = fileURLToPath(new URL("../../scripts/ensure-chromium.mjs", import.meta.url));
  const result = spawnSync(process.execPath, [script], { stdio: ["ignore", "inherit", "inherit"] });
  if (result.status !== 0 || !existsSync(chromiumPath)) {
    throw new Error(`${chromiumPath} is missing and could not be installed (see the output above)`);
  }
}

export interface TestBrowser {
  browser: Browser;
  /** A fresh context (own cookies and storage). */
  newContext(): Promise<BrowserContext>;
  close(): Promise<void>;
}

/** Launches headless Chromium (a fresh temporary profile each time) with flags that keep it off the network. */
export async function launchBrowser(): Promise<TestBrowser> {
  ensureChromium();
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  return {
    browser,
    newContext: () => browser.newContext(),
    close: () => browser.close(),
  };
}

export interface VirtualAuthenticator {
  cdp: CDPSession;
  authenticatorId: string;
  /** Credentials the authenticator holds (for sign-count and removal checks). */
  credentials(): Promise<{ credentialId: string; signCount: number; userHandle?: string; rpId?: string }[]>;
  remove(): Promise<void>;
}

/**
 * A DevTools WebAuthn virtual authenticator on a page: CTAP2, internal transport,
 * resident keys and user verification, so navigator.credentials works with no person.
 */
export async function addVirtualAuthenticator(page: Page): Promise<VirtualAuthenticator> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("WebAuthn.enable", { enableUI: false });
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2",
      transport: "internal",
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  return {
    cdp,
    authenticatorId,
    async credentials() {
      const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
      return credentials;
    },
    async remove() {
      await cdp.send("WebAuthn.removeVirtualAuthenticator", { authenticatorId });
    },
  };
}
