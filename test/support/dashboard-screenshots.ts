import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";

/** test-artifacts/dashboard/<database>/: git-ignored screenshots of every dashboard page a test visits. */
export function screenshotDir(): string {
  const database = process.env.TEST_DATABASE_URL?.startsWith("postgres") ? "postgresql" : "sqlite";
  const dir = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "test-artifacts", "dashboard", database);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Saves a full-page screenshot named after the page and state. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(screenshotDir(), `${name}.png`), fullPage: true });
}

/**
 * Accessibility smoke check of the page as it stands: every form control has
 * an accessible name and every image or button has text; answers the offenders.
 */
export function unlabelledControls(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const offenders: string[] = [];
    for (const element of Array.from(document.querySelectorAll("input, select, textarea, button"))) {
      const control = element as HTMLInputElement;
      const labelled =
        (control.labels && control.labels.length > 0) ||
        (control.getAttribute("aria-label") ?? "").trim() !== "" ||
        (element.tagName === "BUTTON" && (element.textContent ?? "").trim() !== "");
      if (!labelled) offenders.push(element.outerHTML.slice(0, 120));
    }
    return offenders;
  });
}
