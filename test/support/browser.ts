import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { chromium, type Browser, type BrowserContext, type CDPSession, type Page } from "playwright-core";

/** Debian's Chromium: the only browser this project's tests drive (no browser downloads). */
export const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/**
 * Installs Debian's chromium when it is missing (as root, with apt-get), so that
 * the browser tests pass on a fresh machine.
 */
export function ensureChromium(): void {
  if (existsSync(chromiumPath)) return;
  if (process.getuid?.() !== 0) {
    throw new Error(`${chromiumPath} is missing and the tests are not running as root: install it with "apt-get install -y chromium"`);
  }
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  execFileSync("apt-get", ["update", "-qq"], { stdio: "inherit", env });
  execFileSync("apt-get", ["install", "-y", "-qq", "chromium"], { stdio: "inherit", env });
  if (!existsSync(chromiumPath)) throw new Error(`apt-get installed chromium but ${chromiumPath} is still missing`);
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
