import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { BrowserContext, Page } from "playwright-core";
import type { SignedIn } from "../../src/sdk/index.js";
import { addVirtualAuthenticator, launchBrowser, type TestBrowser, type VirtualAuthenticator } from "./browser.js";
import type { OptionsJson } from "./passkey-client.js";

/** A page in a fresh browser context with its own virtual authenticator (its own passkeys). */
export interface PasskeyPage {
  context: BrowserContext;
  page: Page;
  authenticator: VirtualAuthenticator;
}

/** Opens `url` in a fresh context and adds a virtual authenticator to the page. */
export async function openPasskeyPage(browser: TestBrowser, url: string): Promise<PasskeyPage> {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(url);
  const authenticator = await addVirtualAuthenticator(page);
  return { context, page, authenticator };
}

/**
 * Opens a blank page at an origin no server listens on (http://localhost:1,
 * http://other.localhost:1): Playwright answers the navigation itself, and
 * Chromium treats localhost names as secure contexts, so WebAuthn runs there
 * with that origin, and with an RP ID of that host. The authenticator is the
 * given page's, so its passkeys are there too.
 */
export async function openForeignOrigin(from: PasskeyPage, origin: string): Promise<Page> {
  await from.context.route(`${origin}/**`, (route) =>
    route.fulfill({ status: 200, contentType: "text/html", body: "<!doctype html><title>elsewhere</title>" }),
  );
  await from.page.goto(`${origin}/`);
  return from.page;
}

/** navigator.credentials.create with options a test fetched itself (the browser's own JSON parsing, no SDK). */
export function createCredentialIn(page: Page, options: OptionsJson): Promise<Record<string, unknown>> {
  return page.evaluate(async (json) => {
    const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(json as unknown as PublicKeyCredentialCreationOptionsJSON);
    const credential = (await navigator.credentials.create({ publicKey })) as PublicKeyCredential;
    return credential.toJSON() as Record<string, unknown>;
  }, options);
}

/** navigator.credentials.get with options a test fetched itself. */
export function getAssertionIn(page: Page, options: OptionsJson): Promise<Record<string, unknown>> {
  return page.evaluate(async (json) => {
    const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(json as unknown as PublicKeyCredentialRequestOptionsJSON);
    const credential = (await navigator.credentials.get({ publicKey })) as PublicKeyCredential;
    return credential.toJSON() as Record<string, unknown>;
  }, options);
}

/** What an SDK call in the page gave: its value, or the GatehouseError's code and reason. */
export type SdkOutcome =
  | { ok: true; value: SignedIn }
  | { ok: false; code: string; reason?: string; message: string; isGatehouseError: boolean };

export type SdkCall =
  | { method: "register"; identifier: string }
  | { method: "login"; argument?: string | { mediation: "conditional" } | { identifier: string } };

/** Runs one SDK method in the page, importing the module the platform serves at /sdk/gatehouse.js. */
export function sdkIn(page: Page, publishableKey: string, call: SdkCall): Promise<SdkOutcome> {
  return page.evaluate(
    async ({ publishableKey, call }) => {
      const url = "/sdk/gatehouse.js";
      const sdk = (await import(url)) as typeof import("../../src/sdk/index.js");
      const gatehouse = new sdk.Gatehouse({ publishableKey, domain: location.origin });
      try {
        const value = call.method === "register" ? await gatehouse.register(call.identifier) : await gatehouse.login(call.argument);
        return { ok: true as const, value };
      } catch (error) {
        const e = error as { code?: string; reason?: string; message?: string };
        return {
          ok: false as const,
          code: e.code ?? "",
          reason: e.reason,
          message: e.message ?? String(error),
          isGatehouseError: error instanceof sdk.GatehouseError,
        };
      }
    },
    { publishableKey, call },
  );
}

/** Unwraps a successful SDK outcome, failing the test with the error otherwise. */
export function signedIn(outcome: SdkOutcome): SignedIn {
  if (!outcome.ok) throw new Error(`the SDK call failed: ${outcome.code} ${outcome.reason ?? ""} ${outcome.message}`);
  return outcome.value;
}

/**
 * Browser test timings (the issue asks for them): each measured step, in ms.
 * They are reported, never asserted.
 */
export function createTimings(file: string) {
  const entries: { step: string; ms: number }[] = [];
  return {
    async time<T>(step: string, run: () => Promise<T>): Promise<T> {
      const started = performance.now();
      try {
        return await run();
      } finally {
        entries.push({ step, ms: Math.round((performance.now() - started) * 10) / 10 });
      }
    },
    /** Writes test-artifacts/<file>-timings.json and returns the lines of a summary. */
    report(): string[] {
      const steps = new Map<string, number[]>();
      for (const entry of entries) steps.set(entry.step, [...(steps.get(entry.step) ?? []), entry.ms]);
      const lines = [...steps].map(([step, all]) => {
        const sorted = [...all].sort((a, b) => a - b);
        const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
        return `${step}: n=${all.length} median=${median} ms min=${sorted[0]} ms max=${sorted[sorted.length - 1]} ms`;
      });
      const dir = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "test-artifacts");
      mkdirSync(dir, { recursive: true });
      const database = process.env.TEST_DATABASE_URL?.startsWith("postgres") ? "postgresql" : "sqlite";
      writeFileSync(join(dir, `${file}-${database}-timings.json`), JSON.stringify({ database, entries, summary: lines }, null, 2));
      return lines;
    },
  };
}

export { launchBrowser, type TestBrowser };
